# Report: the HTML report of each campaign (claims table, experiments, paper figures and tables,
# hosts and provenance, a page per experiment) and one across campaigns (workflow/gicomm/report.py).


def campaign_figures(campaign):
    own = [
        f"results/{campaign}/report/figures/{e}.{ext}"
        for e in report_experiments(campaign)
        for ext in ("png", "svg")
    ]
    paper = [
        f"results/{campaign}/report/figures/paper/{f}.{ext}"
        for f in FIGURE_IDS
        for ext in ("png", "svg")
    ]
    return own + paper


rule report_campaign:
    input:
        records="results/{campaign}/tidy/records.csv",
        summary="results/{campaign}/aggregate/summary.csv",
        ratios="results/{campaign}/aggregate/ratios.csv",
        fits="results/{campaign}/aggregate/clock_fits.csv",
        claims="results/{campaign}/claims/claims.csv",
        tables=[f"results/{{campaign}}/report/tables/{t}.csv" for t in TABLE_IDS],
        hardware=lambda w: LAYOUT.hardware_files(w.campaign),
        figures=lambda w: campaign_figures(w.campaign),
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
        claims=lambda w: [
            f"results/{c}/claims/claims.csv" for c in LAYOUT.reported_campaigns()
        ],
        summaries=lambda w: [
            f"results/{c}/aggregate/summary.csv" for c in LAYOUT.reported_campaigns()
        ],
        figures=lambda w: [
            f"results/combined/report/figures/{e}.{ext}"
            for e in all_experiments()
            for ext in ("png", "svg")
        ],
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
