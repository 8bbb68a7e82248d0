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
    for png, svg in zip(snakemake.output.png, snakemake.output.svg, strict=True):
        experiment = png.rsplit("/", 1)[1].removesuffix(".png")
        plot_comparison(summary, experiment, [png, svg])
        print(f"drew {experiment}")
