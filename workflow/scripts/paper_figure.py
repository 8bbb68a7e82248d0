import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.plots import plot_paper_figure
from gicomm.smk import logged

with logged(snakemake):
    plot_paper_figure(
        summary=pd.read_csv(snakemake.input.summary, low_memory=False),
        records=pd.read_csv(snakemake.input.records, low_memory=False),
        campaign=snakemake.wildcards.campaign,
        fig_id=snakemake.wildcards.fig,
        outputs=[snakemake.output.png, snakemake.output.svg],
    )
