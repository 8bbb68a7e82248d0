# Aggregation: raw JSONL -> tidy table per campaign (one row per record) -> summary across
# independent process runs; and one combined table across every reported campaign.


rule tidy_campaign:
    input:
        lambda w: LAYOUT.raw_files(w.campaign),
    output:
        records="results/{campaign}/tidy/records.csv",
        summary="results/{campaign}/tidy/summary.csv",
    log:
        "results/{campaign}/logs/tidy.log",
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/tidy_campaign.py"


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
