import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.smk import logged

with logged(snakemake):
    frames = [pd.read_csv(p) for p in snakemake.input]
    combined = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    combined.to_csv(snakemake.output[0], index=False)
    print(f"{len(frames)} campaigns -> {len(combined)} records")
