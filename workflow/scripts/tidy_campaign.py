import gicomm_path  # noqa: F401

from gicomm.smk import logged
from gicomm.tidy import tidy_from_files

with logged(snakemake):
    df = tidy_from_files(snakemake.input, points=dict(snakemake.params.points))
    df.to_csv(snakemake.output.records, index=False)
    print(f"{len(snakemake.input)} raw files -> {len(df)} records")
