import gicomm_path  # noqa: F401

from gicomm.model.parameters import ModelParams
from gicomm.model.predict import predict
from gicomm.smk import logged

with logged(snakemake):
    params = ModelParams.load(snakemake.input.params)
    df = predict(params, snakemake.params.platform)
    df.to_csv(snakemake.output[0], index=False)
    print(f"{len(df)} predictions for {params.platform}")
