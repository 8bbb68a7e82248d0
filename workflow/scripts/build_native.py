from pathlib import Path

import gicomm_path  # noqa: F401

from gicomm.build import build_native, want_cuda
from gicomm.probe import probe_node
from gicomm.smk import logged

with logged(snakemake):
    gpus = len(probe_node()["gpus"]["devices"])
    with_cuda = want_cuda(snakemake.params.cuda, gpus)
    print(f"native.cuda={snakemake.params.cuda}, {gpus} GPU(s) here: CUDA targets {with_cuda}")
    build_native(
        source=Path("native"),
        build_dir=Path(snakemake.output.summary).parent,
        with_cuda=with_cuda,
        cuda_archs=snakemake.params.cuda_archs,
        build_type=snakemake.params.build_type,
        jobs=snakemake.threads,
        targets=snakemake.params.targets,
    )
