from pathlib import Path

import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.smk import logged
from gicomm.tables import write_tables

with logged(snakemake):
    tables = write_tables(
        summary=pd.read_csv(snakemake.input.summary, low_memory=False),
        records=pd.read_csv(snakemake.input.records, low_memory=False),
        fits=pd.read_csv(snakemake.input.fits, low_memory=False),
        out_dir=Path(snakemake.output[0]).parent,
    )
    print(", ".join(f"{k}: {len(v)} rows" for k, v in tables.items()))
