import gicomm_path  # noqa: F401

from gicomm.model.validate import validation_table
from gicomm.smk import logged

with logged(snakemake):
    df = validation_table()
    df.to_csv(snakemake.output[0], index=False)
    head = df[df["role"] == "headline"]
    print(f"{len(df)} checks; headline passed {int(head['passed'].sum())}/{len(head)}")
    print(df.drop(columns=["paper_ref"]).to_string(index=False))
