# Aggregation over independent process runs (p50/p99, spread, bootstrap CI), same-run transport
# ratios and clock fits; then every claim of config/claims.yaml checked against the campaign.
import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(workflow.basedir) / "workflow"))

from gicomm.paper import FIGURE_IDS, PAPER_EXPERIMENTS, TABLE_IDS  # noqa: E402

# A campaign wildcard that never captures the cross-campaign folder results/combined/.
ONE_CAMPAIGN = r"(?!combined/)[A-Za-z0-9][A-Za-z0-9_.-]*"


def report_experiments(campaign):
    """Every experiment a campaign report has a page for: the paper's and the campaign's own."""
    return sorted(set(PAPER_EXPERIMENTS) | set(LAYOUT.experiments_of(campaign)))


def all_experiments():
    names = set(PAPER_EXPERIMENTS)
    for c in LAYOUT.reported_campaigns():
        names |= set(LAYOUT.experiments_of(c))
    return sorted(names)


rule aggregate_runs:
    input:
        records="results/{campaign}/tidy/records.csv",
    output:
        summary="results/{campaign}/aggregate/summary.csv",
        ratios="results/{campaign}/aggregate/ratios.csv",
        fits="results/{campaign}/aggregate/clock_fits.csv",
    log:
        "results/{campaign}/logs/aggregate.log",
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/aggregate_runs.py"


rule check_claims:
    input:
        claims="config/claims.yaml",
        summary="results/{campaign}/aggregate/summary.csv",
        records="results/{campaign}/tidy/records.csv",
        hardware=lambda w: LAYOUT.hardware_files(w.campaign),
    output:
        report(
            "results/{campaign}/claims/claims.csv",
            caption="../../report/captions/claims.rst",
            category="{campaign}",
            subcategory="Claims",
        ),
    log:
        "results/{campaign}/logs/claims.log",
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/check_claims.py"
