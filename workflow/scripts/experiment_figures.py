import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.plots import plot_experiment
from gicomm.smk import logged

with logged(snakemake):
    summary = pd.read_csv(snakemake.input.summary, low_memory=False)
    records = pd.read_csv(snakemake.input.records, low_memory=False)
    for png, svg in zip(snakemake.output.png, snakemake.output.svg, strict=True):
        experiment = png.rsplit("/", 1)[1].removesuffix(".png")
        plot_experiment(summary, records, snakemake.params.campaign, experiment, [png, svg])
        print(f"drew {experiment}")
