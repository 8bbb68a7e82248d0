import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.plots import plot_comparison
from gicomm.smk import logged

with logged(snakemake):
    frames = [pd.read_csv(p, low_memory=False) for p in snakemake.input.summaries]
    frames = [f for f in frames if not f.empty]
    summary = (
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["experiment"])
    )
    plot_comparison(
        summary, snakemake.wildcards.experiment, [snakemake.output.png, snakemake.output.svg]
    )
