import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.paper_figures import plot_paper_figure
from gicomm.smk import logged

with logged(snakemake):
    summary = pd.read_csv(snakemake.input.summary, low_memory=False)
    records = pd.read_csv(snakemake.input.records, low_memory=False)
    beside = pd.read_csv(snakemake.input.beside)
    for png, svg in zip(snakemake.output.png, snakemake.output.svg, strict=True):
        fig_id = png.rsplit("/", 1)[1].removesuffix(".png")
        plot_paper_figure(
            summary, records, snakemake.wildcards.campaign, fig_id, [png, svg], beside=beside
        )
        print(f"drew {fig_id}")
