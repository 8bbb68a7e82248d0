# Shared helpers: the validated campaign, the run lock, wildcard constraints, and the target lists
# of each stage. The only place that makes workflow/gicomm importable for the rules.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from gicomm import layout as paths  # noqa: E402
from gicomm import targets  # noqa: E402
from gicomm.config import check_config_files, load_campaign  # noqa: E402
from gicomm.errors import GicommError  # noqa: E402
from gicomm.layout import Layout  # noqa: E402
from gicomm.slurm import slurm_resources  # noqa: E402
from gicomm.smk import claim_run_lock, refuse_second_run  # noqa: E402

DEFAULT_CONFIG = "config/config.yaml"
try:  # gicomm's reading first: a malformed file is named with its line, not "not valid YAML"
    check_config_files([DEFAULT_CONFIG] if Path(DEFAULT_CONFIG).exists() else [])
except GicommError as exc:
    raise WorkflowError(str(exc)) from None


configfile: DEFAULT_CONFIG


try:
    check_config_files(workflow.configfiles)
    CAMPAIGN = load_campaign(
        config,
        source="config (config/config.yaml and --config/--configfile)",
        command_line=workflow.config_settings.config,
    )
    LAYOUT = Layout(CAMPAIGN)
    LAYOUT.check_folders(Path.cwd())
except GicommError as exc:
    raise WorkflowError(str(exc)) from None

if workflow.is_main_process:
    claim_run_lock(Path.cwd())


onstart:
    try:
        refuse_second_run(Path.cwd())
    except GicommError as exc:
        raise WorkflowError(str(exc)) from None


wildcard_constraints:
    campaign=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    host=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    experiment=r"[a-z0-9_]+",
    run=r"\d+",
    batch=r"\d+",


def platform_resources(kind, **kw):
    """Slurm resources of a job of `kind` on this campaign's platform (its `slurm:` section)."""
    return slurm_resources(CAMPAIGN.platform_spec, kind, **kw)


# What a one-node job leaves unset of a two-node job's resources (falsy: no sbatch option).
ONE_NODE = {"nodes": 1, "tasks": 1, "mpi": "", "tasks_per_gpu": 0, "slurm_extra": "",
            "gpu": 0, "gpu_model": "", "gres": ""}  # fmt: skip


def bench_resources():
    """A bench job's Slurm resources: one node, or two nodes with one task each for a batch of
    two-rank NIC points (Layout.bench_nodes)."""
    one = platform_resources("gpu")
    if CAMPAIGN.max_nodes < 2:
        return one
    two = platform_resources("gpu", nodes=2)

    def pick(key):
        def value(wildcards):
            res = (
                two
                if LAYOUT.bench_nodes(wildcards.experiment, int(wildcards.batch)) == 2
                else one
            )
            return res[key] if key in res else ONE_NODE[key]

        return value

    return {k: pick(k) for k in {**one, **two}}


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
