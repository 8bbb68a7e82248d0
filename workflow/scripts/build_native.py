from pathlib import Path

import gicomm_path  # noqa: F401

from gicomm.build import build_native
from gicomm.smk import logged

with logged(snakemake):
    build_native(
        source=Path("native"),
        build_dir=Path(snakemake.output.summary).parent,
        with_cuda=snakemake.params.cuda != "off",
        cuda_archs=snakemake.params.cuda_archs,
        build_type=snakemake.params.build_type,
        jobs=snakemake.threads,
    )
