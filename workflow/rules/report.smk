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
            for k in (
                "calibration",
                "beside_measured",
                "validation",
                "predictions",
                "blind",
            )
        },
        records=paths.TIDY_RECORDS,
        summary=paths.SUMMARY,
        ratios=paths.RATIOS,
        fits=paths.CLOCK_FITS,
        claims=paths.CLAIMS,
        tables=lambda w: targets.campaign_tables(w.campaign),
        hardware=lambda w: LAYOUT.hardware_files(w.campaign),
        figures=lambda w: targets.campaign_figures(LAYOUT, w.campaign),
        model_figures=lambda w: targets.model_figures(w.campaign),
    output:
        index=report(
            paths.REPORT_INDEX,
            caption="../../report/captions/index.rst",
            category="{campaign}",
        ),
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="report"),
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
        claims=lambda w: targets.per_campaign(LAYOUT, paths.CLAIMS),
        summaries=lambda w: targets.per_campaign(LAYOUT, paths.SUMMARY),
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
        paths.CAMPAIGN_LOG.format(campaign=CAMPAIGN.name, name="report_combined"),
    conda:
        "../../envs/pipeline.yaml"
    params:
        campaigns=LAYOUT.reported_campaigns(),
        hardware={c: LAYOUT.hardware_files(c) for c in LAYOUT.reported_campaigns()},
    script:
        "../scripts/report_combined.py"
