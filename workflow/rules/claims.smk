# Every claim of config/claims.yaml checked against a campaign's aggregates (aggregate.smk).
from gicomm.catalogue import FIGURE_IDS, TABLE_IDS  # noqa: E402

ONE_CAMPAIGN = targets.ONE_CAMPAIGN


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
