import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.plots import plot_experiment
from gicomm.smk import logged

with logged(snakemake):
    plot_experiment(
        summary=pd.read_csv(snakemake.input.summary, low_memory=False),
        records=pd.read_csv(snakemake.input.records, low_memory=False),
        campaign=snakemake.wildcards.campaign,
        experiment=snakemake.wildcards.experiment,
        outputs=[snakemake.output.png, snakemake.output.svg],
    )
