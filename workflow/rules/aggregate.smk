# Aggregation: raw JSONL -> tidy table per campaign (one row per record) -> aggregates across
# independent process runs (p50/p99, spread, bootstrap CI), same-run transport ratios and clock
# fits; and one combined table across every reported campaign.


rule tidy_campaign:
    input:
        lambda w: LAYOUT.raw_files(w.campaign),
    output:
        records="results/{campaign}/tidy/records.csv",
    log:
        "results/{campaign}/logs/tidy.log",
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/tidy_campaign.py"


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
        campaign=targets.ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/aggregate_runs.py"


rule combine_campaigns:
    input:
        expand(
            "results/{campaign}/tidy/records.csv", campaign=LAYOUT.reported_campaigns()
        ),
    output:
        "results/combined/records.csv",
    log:
        "results/combined/logs/combine.log",
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/combine_campaigns.py"
