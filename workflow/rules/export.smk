# Export: one zip per campaign that an evaluator can attach to a review (HTML report, figures, tidy
# CSVs, provenance of every host).


rule export_report:
    input:
        index="results/{campaign}/report/index.html",
        records="results/{campaign}/tidy/records.csv",
        summary="results/{campaign}/aggregate/summary.csv",
        hardware=lambda w: LAYOUT.hardware_files(w.campaign),
    output:
        "results/{campaign}/export/{campaign}-report.zip",
    log:
        "results/{campaign}/logs/export.log",
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/export_report.py"
