# Report: the HTML report of each campaign (claims table, experiments, paper figures and tables,
# hosts and provenance, a page per experiment) and one across campaigns (workflow/gicomm/report.py).


rule report_campaign:
    input:
        records="results/{campaign}/tidy/records.csv",
        summary="results/{campaign}/aggregate/summary.csv",
        ratios="results/{campaign}/aggregate/ratios.csv",
        fits="results/{campaign}/aggregate/clock_fits.csv",
        claims="results/{campaign}/claims/claims.csv",
        tables=lambda w: targets.campaign_tables(w.campaign),
        hardware=lambda w: LAYOUT.hardware_files(w.campaign),
        figures=lambda w: targets.campaign_figures(LAYOUT, w.campaign),
        model=lambda w: targets.model_tables(w.campaign),
        model_figures=lambda w: targets.model_figures(w.campaign),
    output:
        index=report(
            "results/{campaign}/report/index.html",
            caption="../../report/captions/index.rst",
            category="{campaign}",
        ),
    log:
        "results/{campaign}/logs/report.log",
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    params:
        combined="results/combined/report/index.html",
    script:
        "../scripts/report_campaign.py"


rule report_combined:
    input:
        claims=lambda w: targets.per_campaign(LAYOUT, "results/{c}/claims/claims.csv"),
        summaries=lambda w: targets.per_campaign(
            LAYOUT, "results/{c}/aggregate/summary.csv"
        ),
        figures=lambda w: targets.comparison_figures(LAYOUT),
    output:
        index=report(
            "results/combined/report/index.html",
            caption="../../report/captions/combined.rst",
            category="Across campaigns",
        ),
    log:
        "results/combined/logs/report.log",
    conda:
        "../../envs/pipeline.yaml"
    params:
        campaigns=LAYOUT.reported_campaigns(),
    script:
        "../scripts/report_combined.py"
