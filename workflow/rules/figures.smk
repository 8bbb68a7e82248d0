# Figures and tables, per campaign: each paper figure (3-11) in the paper's form with the paper's
# numbers beside ours and the model's (one job; gicomm.paper_figures), one figure per experiment of
# the campaign (one job), each paper table with its rows first and ours under them (3-16; 15 is
# qualitative; gicomm.tables); and one comparison figure per experiment across campaigns (one job,
# for the configured campaign's combined page). PNG and SVG. claims.smk (claim checks) is included
# from the Snakefile before this file.


rule paper_figures:
    input:
        summary=paths.SUMMARY,
        records=paths.TIDY_RECORDS,
        beside=paths.MODEL_BESIDE,
    output:
        png=[
            report(
                paths.fill(paths.PAPER_FIGURE, name=f, ext="png"),
                caption="../../report/captions/paper_figure.rst",
                category="{campaign}",
                subcategory="Paper figures",
            )
            for f in FIGURE_IDS
        ],
        svg=[paths.fill(paths.PAPER_FIGURE, name=f, ext="svg") for f in FIGURE_IDS],
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="figures/paper"),
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/paper_figures.py"


# One job per campaign draws the figure of each of its experiments (the set is known when the
# workflow loads: the configured experiments, or an archive's folders).
for _campaign in LAYOUT.reported_campaigns():

    rule:
        name:
            targets.rule_name("experiment_figures", _campaign)
        input:
            summary=paths.SUMMARY.format(campaign=_campaign),
            records=paths.TIDY_RECORDS.format(campaign=_campaign),
        output:
            png=[
                report(
                    paths.REPORT_FIGURE.format(campaign=_campaign, name=e, ext="png"),
                    caption="../../report/captions/figure.rst",
                    category=_campaign,
                    subcategory="Experiments",
                )
                for e in LAYOUT.experiments_of(_campaign)
            ],
            svg=[
                paths.REPORT_FIGURE.format(campaign=_campaign, name=e, ext="svg")
                for e in LAYOUT.experiments_of(_campaign)
            ],
        log:
            paths.CAMPAIGN_LOG.format(campaign=_campaign, name="figures/experiments"),
        localrule: True
        conda:
            "../../envs/pipeline.yaml"
        params:
            campaign=_campaign,
        script:
            "../scripts/experiment_figures.py"


rule paper_tables:
    input:
        summary=paths.SUMMARY,
        records=paths.TIDY_RECORDS,
        fits=paths.CLOCK_FITS,
    output:
        [
            report(
                paths.fill(paths.REPORT_TABLE, name=t),
                caption="../../report/captions/table.rst",
                category="{campaign}",
                subcategory="Paper tables",
            )
            for t in TABLE_IDS
        ],
    log:
        paths.fill(paths.CAMPAIGN_LOG, name="tables"),
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/paper_tables.py"


rule comparison_figures:
    input:
        summaries=lambda w: targets.per_campaign(LAYOUT, paths.SUMMARY),
    output:
        png=[
            report(
                paths.COMBINED_FIGURE.format(
                    campaign=CAMPAIGN.name, name=e, ext="png"
                ),
                caption="../../report/captions/comparison.rst",
                category="Across campaigns",
            )
            for e in targets.all_experiments(LAYOUT)
        ],
        svg=[
            paths.COMBINED_FIGURE.format(campaign=CAMPAIGN.name, name=e, ext="svg")
            for e in targets.all_experiments(LAYOUT)
        ],
    log:
        paths.CAMPAIGN_LOG.format(campaign=CAMPAIGN.name, name="figures/combined"),
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/comparison_figures.py"
