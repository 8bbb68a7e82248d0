import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.model.figures import FIGURES
from gicomm.smk import logged

with logged(snakemake):
    i = snakemake.input
    tables = {
        "model_validation": pd.read_csv(i.validation),
        "model_beside_measured": pd.read_csv(i.beside),
        "model_predictions": pd.read_csv(i.predictions),
    }
    for png, svg in zip(snakemake.output.png, snakemake.output.svg, strict=True):
        name = png.rsplit("/", 1)[1].removesuffix(".png")
        FIGURES[name](tables[name], [png, svg])
        print(f"drew {name}")
