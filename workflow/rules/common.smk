# Shared helpers: the validated campaign, wildcard constraints, and the target lists of each stage.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from gicomm.config import load_campaign  # noqa: E402
from gicomm.errors import GicommError  # noqa: E402
from gicomm.layout import Layout  # noqa: E402
from gicomm import targets  # noqa: E402
from gicomm.slurm import slurm_resources  # noqa: E402

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


def platform_resources(kind, **kw):
    """Slurm resources of a job of `kind` on this campaign's platform (its `slurm:` section)."""
    return slurm_resources(CAMPAIGN.platform_spec, kind, **kw)


# Tables, figures and reports are light: they run where Snakemake runs, never as cluster jobs.
localrules:
    all,
    tidy_campaign,
    aggregate_runs,
    combine_campaigns,
    check_claims,
    comparison_figures,
    paper_figures,
    paper_tables,
    nvlink_dissection_table,
    model_calibrate,
    model_predict,
    model_validate,
    model_figures,
    report_campaign,
    report_combined,
    export_report,


def all_targets():
    return LAYOUT.all_targets()
