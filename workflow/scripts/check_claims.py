import json
from pathlib import Path

import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.claims import check_claims, decide_settings, load_claims
from gicomm.smk import logged

with logged(snakemake):
    claims_file = Path(snakemake.input.claims)
    result = check_claims(
        summary=pd.read_csv(snakemake.input.summary, low_memory=False),
        records=pd.read_csv(snakemake.input.records, low_memory=False),
        hardware=[json.loads(Path(p).read_text()) for p in snakemake.input.hardware],
        claims=load_claims(claims_file),
        decide=decide_settings(claims_file),
    )
    result.to_csv(snakemake.output[0], index=False)
    print(result["verdict"].value_counts().to_string())
