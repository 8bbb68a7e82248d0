import json
from pathlib import Path

import gicomm_path  # noqa: F401

from gicomm.model.memo import memo_csv
from gicomm.model.predict import base_params, predict
from gicomm.smk import logged

with logged(snakemake):
    platform = snakemake.params.platform
    out = Path(snakemake.output.predictions)
    hit = memo_csv(
        [json.dumps(platform, sort_keys=True, default=str)],
        Path(snakemake.params.store),
        out,
        lambda: predict(base_params(platform), platform),
    )
    print(f"predictions for platform {platform['platform']}: {'reused' if hit else 'computed'}")
