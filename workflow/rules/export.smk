# Export: one zip per campaign that an evaluator can attach to a review (HTML report, figures, tidy
# CSVs, provenance of every host).


rule export_report:
    input:
        index=paths.REPORT_INDEX,
        records=paths.TIDY_RECORDS,
        summary=paths.SUMMARY,
        hardware=lambda w: LAYOUT.hardware_files(w.campaign),
    output:
        paths.EXPORT_ZIP,
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="export"),
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/export_report.py"
