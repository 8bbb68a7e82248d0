from pathlib import Path

import gicomm_path  # noqa: F401

from gicomm.baselines.sources import load_baselines, prepare_source, roots_from_manifests
from gicomm.smk import logged

with logged(snakemake):
    baselines = load_baselines(snakemake.params.baselines_file)
    source = baselines.source(snakemake.wildcards.source)
    prepare_source(
        source,
        Path(snakemake.output[0]).parent,
        roots=roots_from_manifests(list(snakemake.input)),
        jobs=snakemake.threads,
        cuda_archs=str(snakemake.params.cuda_archs).split(";")[0],
    )
