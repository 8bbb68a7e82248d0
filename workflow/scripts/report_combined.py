import json
from pathlib import Path

import gicomm_path  # noqa: F401

from gicomm.report import render_combined_report
from gicomm.smk import logged

with logged(snakemake):
    render_combined_report(
        campaigns=list(snakemake.params.campaigns),
        claims_files=[Path(p) for p in snakemake.input.claims],
        summary_files=[Path(p) for p in snakemake.input.summaries],
        comparison_figures=[Path(p) for p in snakemake.input.figures],
        index=Path(snakemake.output.index),
        hardware={
            c: [json.loads(Path(p).read_text()) for p in files]
            for c, files in snakemake.params.hardware.items()
        },
    )
