# Every claim of config/claims.yaml checked against a campaign's aggregates (aggregate.smk).
from gicomm.catalogue import FIGURE_IDS, TABLE_IDS  # noqa: E402

ONE_CAMPAIGN = targets.ONE_CAMPAIGN


rule check_claims:
    input:
        claims="config/claims.yaml",
        summary=paths.SUMMARY,
        records=paths.TIDY_RECORDS,
        hardware=lambda w: LAYOUT.hardware_files(w.campaign),
    output:
        report(
            paths.CLAIMS,
            caption="../../report/captions/claims.rst",
            category="{campaign}",
            subcategory="Claims",
        ),
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="claims"),
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/check_claims.py"
