import json
from pathlib import Path

import gicomm_path  # noqa: F401

from gicomm.baselines.upstream import records_from_log
from gicomm.fsutil import write_atomic
from gicomm.smk import logged

with logged(snakemake):
    w = snakemake.wildcards
    records = records_from_log(
        tool=w.tool,
        text=Path(snakemake.input[0]).read_text(errors="replace"),
        campaign=w.campaign,
        host=w.host,
        platform=snakemake.params.platform,
        experiment=w.experiment,
        run_index=int(w.run),
    )
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    write_atomic(snakemake.output[0], lines)
    print(f"{len(records)} records from {snakemake.input[0]}")
