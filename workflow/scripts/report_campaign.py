from pathlib import Path

import gicomm_path  # noqa: F401

from gicomm.report import MODEL_TABLES, CampaignReport, render_campaign_report
from gicomm.smk import logged

with logged(snakemake):
    i = snakemake.input
    render_campaign_report(
        CampaignReport(
            campaign=snakemake.wildcards.campaign,
            records_csv=Path(i.records),
            summary_csv=Path(i.summary),
            claims_csv=Path(i.claims),
            fits_csv=Path(i.fits),
            ratios_csv=Path(i.ratios),
            tables_dir=Path(i.tables[0]).parent,
            hardware_files=[Path(p) for p in i.hardware],
            index=Path(snakemake.output.index),
            current=snakemake.wildcards.campaign == snakemake.config["campaign"],
            combined_index=Path(snakemake.params.combined),
            model_tables={name: Path(i[f"model_{name}"]) for name in MODEL_TABLES},
        )
    )
