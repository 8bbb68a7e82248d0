"""Configure and build native/ with CMake, out of tree, one build directory per host type."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def want_cuda(mode: str, gpus_here: int) -> bool:
    """on: CUDA targets whenever nvcc is found (CMake decides); off: never; auto: only where a GPU
    could run them (this host has one), so CPU-only hosts skip minutes of nvcc for code they cannot
    run (`make test` still compiles every CUDA target through ctest)."""
    if mode == "auto":
        return gpus_here > 0
    return mode == "on"


def build_native(
    source: Path, build_dir: Path, with_cuda: bool, cuda_archs: str, build_type: str, jobs: int
) -> None:
    configure = [
        "cmake", "-S", str(source), "-B", str(build_dir),
        f"-DGICOMM_WITH_CUDA={'ON' if with_cuda else 'OFF'}",
        f"-DGICOMM_CUDA_ARCHS={cuda_archs}", f"-DCMAKE_BUILD_TYPE={build_type}",
    ]  # fmt: skip
    build = ["cmake", "--build", str(build_dir), "-j", str(jobs)]
    for argv in (configure, build):
        print("+", " ".join(argv), flush=True)
        subprocess.run(argv, check=True, stdout=sys.stdout, stderr=sys.stderr)
