# Figures and tables, per campaign: one seaborn figure per paper figure (3-11), one per experiment,
# one table per paper table (3-16; 15 is qualitative); and one comparison figure per experiment
# across campaigns. PNG and SVG (workflow/gicomm/plots.py, workflow/gicomm/tables.py).
# claims.smk (aggregation over runs, claim checks) is included here, before the rules that use it.


include: "claims.smk"


rule paper_figure:
    input:
        summary="results/{campaign}/aggregate/summary.csv",
        records="results/{campaign}/tidy/records.csv",
    output:
        png=report(
            "results/{campaign}/report/figures/paper/{fig}.png",
            caption="../../report/captions/paper_figure.rst",
            category="{campaign}",
            subcategory="Paper figures",
        ),
        svg="results/{campaign}/report/figures/paper/{fig}.svg",
    log:
        "results/{campaign}/logs/figures/paper_{fig}.log",
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
        fig=r"fig\d\d",
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/paper_figure.py"


rule figure:
    input:
        summary="results/{campaign}/aggregate/summary.csv",
        records="results/{campaign}/tidy/records.csv",
    output:
        png=report(
            "results/{campaign}/report/figures/{experiment}.png",
            caption="../../report/captions/figure.rst",
            category="{campaign}",
            subcategory="Experiments",
        ),
        svg="results/{campaign}/report/figures/{experiment}.svg",
    log:
        "results/{campaign}/logs/figures/{experiment}.log",
    wildcard_constraints:
        campaign=ONE_CAMPAIGN,
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/figure.py"


rule paper_tables:
    input:
        summary="results/{campaign}/aggregate/summary.csv",
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


rule comparison_figure:
    input:
        summaries=lambda w: [
            f"results/{c}/aggregate/summary.csv" for c in LAYOUT.reported_campaigns()
        ],
    output:
        png=report(
            "results/combined/report/figures/{experiment}.png",
            caption="../../report/captions/comparison.rst",
            category="Across campaigns",
        ),
        svg="results/combined/report/figures/{experiment}.svg",
    log:
        "results/combined/logs/figures/{experiment}.log",
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/comparison_figure.py"
