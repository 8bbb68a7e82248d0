# Report: the HTML report of each campaign (claims table, experiments, paper figures and tables,
# hosts and provenance, a page per experiment) and, for the configured campaign, the page that sets
# it beside every archived one (workflow/gicomm/report.py).
COMBINED_INDEX = targets.combined_index(CAMPAIGN.name)


rule report_campaign:
    input:
        **{
            f"model_{k}": (
                lambda w, k=k: targets.model_tables(w.campaign, CAMPAIGN.platform)[k]
            )
            for k in ("calibration", "beside_measured", "validation", "predictions")
        },
        records="results/{campaign}/tidy/records.csv",
        summary="results/{campaign}/aggregate/summary.csv",
        ratios="results/{campaign}/aggregate/ratios.csv",
        fits="results/{campaign}/aggregate/clock_fits.csv",
        claims="results/{campaign}/claims/claims.csv",
        tables=lambda w: targets.campaign_tables(w.campaign),
        hardware=lambda w: LAYOUT.hardware_files(w.campaign),
        figures=lambda w: targets.campaign_figures(LAYOUT, w.campaign),
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
        combined=COMBINED_INDEX,
    script:
        "../scripts/report_campaign.py"


rule report_combined:
    input:
        claims=lambda w: targets.per_campaign(LAYOUT, "results/{c}/claims/claims.csv"),
        summaries=lambda w: targets.per_campaign(
            LAYOUT, "results/{c}/aggregate/summary.csv"
        ),
        figures=targets.comparison_figures(LAYOUT, CAMPAIGN.name),
        hardware=[
            h for c in LAYOUT.reported_campaigns() for h in LAYOUT.hardware_files(c)
        ],
    output:
        index=report(
            COMBINED_INDEX,
            caption="../../report/captions/combined.rst",
            category="Across campaigns",
        ),
    log:
        f"results/{CAMPAIGN.name}/logs/report_combined.log",
    conda:
        "../../envs/pipeline.yaml"
    params:
        campaigns=LAYOUT.reported_campaigns(),
        hardware={c: LAYOUT.hardware_files(c) for c in LAYOUT.reported_campaigns()},
    script:
        "../scripts/report_combined.py"
