import json
from pathlib import Path

import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.model.blind import blind_table, load_tables, summary
from gicomm.model.memo import memo_csv
from gicomm.model.parameters import ModelParams, apply_platform
from gicomm.smk import logged

with logged(snakemake):
    params_text = Path(snakemake.input.params).read_text()
    params = apply_platform(ModelParams.load(snakemake.input.params), snakemake.params.platform)
    published = [Path(p) for p in snakemake.input.published]
    tables = load_tables(published)  # a malformed table fails here, naming file:key
    out = Path(snakemake.output.blind)
    hit = memo_csv(
        [params_text, json.dumps(snakemake.params.platform, sort_keys=True, default=str)]
        + [p.read_bytes() for p in sorted(published)],
        Path(snakemake.params.store),
        out,
        lambda: blind_table(params, tables),
    )
    print(summary(pd.read_csv(out)).to_string(index=False))
    print("reused" if hit else "computed")
