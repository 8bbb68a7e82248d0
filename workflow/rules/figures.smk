# Figures and tables, per campaign: each paper figure (3-11) in the paper's form with the paper's
# numbers beside ours and the model's (one job; gicomm.paper_figures), one figure per experiment of
# the campaign (one job), each paper table with its rows first and ours under them (3-16; 15 is
# qualitative; gicomm.tables); and one comparison figure per experiment across campaigns (one job,
# for the configured campaign's combined page). PNG and SVG. claims.smk (claim checks) is included
# from the Snakefile before this file.


rule paper_figures:
    input:
        summary="results/{campaign}/aggregate/summary.csv",
        records="results/{campaign}/tidy/records.csv",
        beside="results/{campaign}/model/beside_measured.csv",
    output:
        png=[
            report(
                f"results/{{campaign}}/report/figures/paper/{f}.png",
                caption="../../report/captions/paper_figure.rst",
                category="{campaign}",
                subcategory="Paper figures",
            )
            for f in FIGURE_IDS
        ],
        svg=[f"results/{{campaign}}/report/figures/paper/{f}.svg" for f in FIGURE_IDS],
    log:
        "results/{campaign}/logs/figures/paper.log",
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
            summary=f"results/{_campaign}/aggregate/summary.csv",
            records=f"results/{_campaign}/tidy/records.csv",
        output:
            png=[
                report(
                    f"results/{_campaign}/report/figures/{e}.png",
                    caption="../../report/captions/figure.rst",
                    category=_campaign,
                    subcategory="Experiments",
                )
                for e in LAYOUT.experiments_of(_campaign)
            ],
            svg=[
                f"results/{_campaign}/report/figures/{e}.svg"
                for e in LAYOUT.experiments_of(_campaign)
            ],
        log:
            f"results/{_campaign}/logs/figures/experiments.log",
        localrule: True
        conda:
            "../../envs/pipeline.yaml"
        params:
            campaign=_campaign,
        script:
            "../scripts/experiment_figures.py"


rule paper_tables:
    input:
        summary="results/{campaign}/aggregate/summary.csv",
        records="results/{campaign}/tidy/records.csv",
        fits="results/{campaign}/aggregate/clock_fits.csv",
    output:
        [
            report(
                f"results/{{campaign}}/report/tables/{t}.csv",
                caption="../../report/captions/table.rst",
                category="{campaign}",
                subcategory="Paper tables",
            )
            for t in TABLE_IDS
        ],
    log:
        "results/{campaign}/logs/tables.log",
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/paper_tables.py"


rule comparison_figures:
    input:
        summaries=lambda w: targets.per_campaign(
            LAYOUT, "results/{c}/aggregate/summary.csv"
        ),
    output:
        png=[
            report(
                f"results/{CAMPAIGN.name}/report/combined/figures/{e}.png",
                caption="../../report/captions/comparison.rst",
                category="Across campaigns",
            )
            for e in targets.all_experiments(LAYOUT)
        ],
        svg=[
            f"results/{CAMPAIGN.name}/report/combined/figures/{e}.svg"
            for e in targets.all_experiments(LAYOUT)
        ],
    log:
        f"results/{CAMPAIGN.name}/logs/figures/combined.log",
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/comparison_figures.py"
