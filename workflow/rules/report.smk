# Report: the HTML report of a campaign (index, hosts and provenance, one page per experiment).


rule report_campaign:
    input:
        records="results/{campaign}/tidy/records.csv",
        summary="results/{campaign}/tidy/summary.csv",
        hardware=lambda w: LAYOUT.hardware_files(w.campaign),
        figures=lambda w: LAYOUT.figure_files(w.campaign),
    output:
        index=report(
            "results/{campaign}/report/index.html",
            caption="../../report/captions/index.rst",
            category="{campaign}",
        ),
    log:
        "results/{campaign}/logs/report.log",
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/report_campaign.py"
