import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.model.figures import FIGURES
from gicomm.smk import logged

with logged(snakemake):
    for png, svg in zip(snakemake.output.png, snakemake.output.svg, strict=True):
        name = png.rsplit("/", 1)[1].removesuffix(".png")
        plot, table = FIGURES[name]
        plot(pd.read_csv(getattr(snakemake.input, table)), [png, svg])
        print(f"drew {name}")
