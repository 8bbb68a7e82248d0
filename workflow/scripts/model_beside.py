import json
from pathlib import Path

import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.model.memo import memo_csv
from gicomm.model.parameters import ModelParams, apply_platform
from gicomm.model.predict import beside_measured
from gicomm.smk import logged

with logged(snakemake):
    params_text = Path(snakemake.input.params).read_text()
    params = apply_platform(ModelParams.load(snakemake.input.params), snakemake.params.platform)
    records = Path(snakemake.input.records)
    out = Path(snakemake.output.beside)
    hit = memo_csv(
        [
            params_text,
            json.dumps(snakemake.params.platform, sort_keys=True, default=str),
            records.read_bytes(),
        ],
        Path(snakemake.params.store),
        out,
        lambda: beside_measured(params, pd.read_csv(records, low_memory=False)),
    )
    n = len(pd.read_csv(out))
    how = "reused" if hit else "computed"
    print(f"{n} measured points with a model prediction beside them ({how})")
