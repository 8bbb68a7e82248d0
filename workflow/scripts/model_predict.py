import gicomm_path  # noqa: F401
import pandas as pd

from gicomm.model.parameters import ModelParams, apply_platform
from gicomm.model.predict import beside_measured, predict
from gicomm.smk import logged

with logged(snakemake):
    params = ModelParams.load(snakemake.input.params)
    platform = snakemake.params.platform
    df = predict(params, platform)
    df.to_csv(snakemake.output.predictions, index=False)
    print(f"{len(df)} predictions for {df['platform'].iloc[0]}")
    tidy = pd.read_csv(snakemake.input.records, low_memory=False)
    beside = beside_measured(apply_platform(params, platform) if platform else params, tidy)
    beside.to_csv(snakemake.output.beside, index=False)
    print(f"{len(beside)} measured points with a model prediction beside them")
