import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.baselines.dissection import dissect
from gicomm.fsutil import write_atomic
from gicomm.smk import logged

with logged(snakemake):
    table = dissect(pd.read_csv(snakemake.input[0]))
    write_atomic(snakemake.output[0], table.to_csv(index=False))
    print(f"{len(table)} rows")
