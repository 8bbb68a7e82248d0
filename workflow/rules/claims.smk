# Aggregation over independent process runs (p50/p99, spread, bootstrap CI), same-run transport
# ratios and clock fits; then every claim of config/claims.yaml checked against the campaign.
from gicomm.paper import FIGURE_IDS, TABLE_IDS  # noqa: E402
from gicomm import targets  # noqa: E402

ONE_CAMPAIGN = targets.ONE_CAMPAIGN


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
