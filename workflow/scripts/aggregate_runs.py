import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.aggregate import summarize_runs, transport_ratios
from gicomm.fits import clock_fits
from gicomm.smk import logged

with logged(snakemake):
    df = pd.read_csv(snakemake.input.records, low_memory=False)
    summary = summarize_runs(df)
    summary.to_csv(snakemake.output.summary, index=False)
    transport_ratios(df).to_csv(snakemake.output.ratios, index=False)
    clock_fits(summary).to_csv(snakemake.output.fits, index=False)
    print(f"{len(df)} records -> {len(summary)} points over runs")
