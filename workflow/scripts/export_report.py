from pathlib import Path

import gicomm_path  # noqa: F401

from gicomm.export import export_campaign
from gicomm.smk import logged

with logged(snakemake):
    export_campaign(
        campaign=snakemake.wildcards.campaign,
        report_dir=Path(snakemake.input.index).parent,
        tables=[Path(snakemake.input.records), Path(snakemake.input.summary)],
        hardware_files=[Path(p) for p in snakemake.input.hardware],
        out=Path(snakemake.output[0]),
    )
