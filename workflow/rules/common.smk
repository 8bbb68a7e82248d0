# Shared helpers: the validated campaign, wildcard constraints, and the target lists of each stage.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from gicomm.config import load_campaign  # noqa: E402
from gicomm.errors import GicommError  # noqa: E402
from gicomm.layout import Layout  # noqa: E402
from gicomm import targets  # noqa: E402

try:
    CAMPAIGN = load_campaign(
        config, source="config (config/config.yaml and --config/--configfile)"
    )
except GicommError as exc:
    raise WorkflowError(str(exc)) from None

LAYOUT = Layout(CAMPAIGN)


wildcard_constraints:
    campaign=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    host=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    experiment=r"[a-z0-9_]+",
    run=r"\d+",
    batch=r"\d+",


def all_targets():
    return LAYOUT.all_targets()
