# Aggregation: raw JSONL -> tidy table per campaign (one row per record, after checking that the
# campaign holds each point of each run once and nothing foreign) -> aggregates across independent
# process runs (p50/p99, spread, t-interval), same-run transport ratios and clock fits; and one
# combined table across every reported campaign.


rule tidy_campaign:
    input:
        lambda w: LAYOUT.raw_files(w.campaign),
    output:
        records=paths.TIDY_RECORDS,
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="tidy"),
    conda:
        "../../envs/pipeline.yaml"
    params:
        points=lambda w: LAYOUT.batch_points(w.campaign),
    script:
        "../scripts/tidy_campaign.py"


rule aggregate_runs:
    input:
        records=paths.TIDY_RECORDS,
    output:
        summary=paths.SUMMARY,
        ratios=paths.RATIOS,
        fits=paths.CLOCK_FITS,
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="aggregate"),
    wildcard_constraints:
        campaign=targets.ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/aggregate_runs.py"


rule combine_campaigns:
    input:
        expand(paths.TIDY_RECORDS, campaign=LAYOUT.reported_campaigns()),
    output:
        paths.COMBINED_RECORDS,
    log:
        paths.COMBINED_LOG,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/combine_campaigns.py"
