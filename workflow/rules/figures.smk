# Figures: one seaborn figure per experiment and campaign, PNG and SVG (workflow/gicomm/plots.py).


rule figure:
    input:
        records="results/{campaign}/tidy/records.csv",
    output:
        png=report(
            "results/{campaign}/report/figures/{experiment}.png",
            caption="../../report/captions/figure.rst",
            category="{campaign}",
            subcategory="{experiment}",
        ),
        svg="results/{campaign}/report/figures/{experiment}.svg",
    log:
        "results/{campaign}/logs/figures/{experiment}.log",
    conda:
        "../../envs/pipeline.yaml"
    script:
        "../scripts/figure.py"
