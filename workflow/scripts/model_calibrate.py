import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.model.calibrate import calibration_table, from_paper, from_records
from gicomm.model.predict import base_params
from gicomm.smk import logged

with logged(snakemake):
    base = base_params(snakemake.params.platform)
    tidy = pd.read_csv(snakemake.input.records, low_memory=False)
    params = from_records(tidy, base=base)
    params.save(snakemake.output.params)
    table = calibration_table(params, reference=from_paper(base.platform))
    table.to_csv(snakemake.output.table, index=False)
    fitted = int((table["origin"] == "records").sum())
    print(
        f"{len(tidy)} records; {fitted} parameter groups fitted from records, rest from the paper"
    )
