from pathlib import Path

import gicomm_path  # noqa: F401

from gicomm.report import render_campaign_report
from gicomm.smk import logged

with logged(snakemake):
    render_campaign_report(
        campaign=snakemake.wildcards.campaign,
        records_csv=Path(snakemake.input.records),
        summary_csv=Path(snakemake.input.summary),
        hardware_files=[Path(p) for p in snakemake.input.hardware],
        figure_files=[Path(p) for p in snakemake.input.figures],
        index=Path(snakemake.output.index),
        current=snakemake.wildcards.campaign == snakemake.config["campaign"],
    )
