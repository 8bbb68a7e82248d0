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
    source: Path,
    build_dir: Path,
    with_cuda: bool,
    cuda_archs: str,
    build_type: str,
    jobs: int,
    targets: list[str] | None = None,
) -> None:
    configure = [
        "cmake", "-S", str(source), "-B", str(build_dir),
        f"-DGICOMM_WITH_CUDA={'ON' if with_cuda else 'OFF'}",
        f"-DGICOMM_CUDA_ARCHS={cuda_archs}", f"-DCMAKE_BUILD_TYPE={build_type}",
    ]  # fmt: skip
    run(configure)
    build = ["cmake", "--build", str(build_dir), "-j", str(jobs)]
    if targets:
        have = configured_targets(build_dir)
        missing = [t for t in targets if t not in have]
        if missing:
            print(f"not configured on this host (left out): {', '.join(missing)}", flush=True)
        wanted = [t for t in targets if t in have]
        if not wanted:
            return
        build += ["--target", *wanted]
    run(build)


def run(argv: list[str]) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, check=True, stdout=sys.stdout, stderr=sys.stderr)


def configured_targets(build_dir: Path) -> set[str]:
    """The targets of a configured build tree (`cmake --build <dir> --target help`)."""
    listing = subprocess.run(
        ["cmake", "--build", str(build_dir), "--target", "help"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    # Makefile generators print "... name" per target; Ninja prints "name: phony" and the like.
    names = set()
    for line in listing.splitlines():
        line = line.strip()
        if line.startswith("... "):
            names.add(line[4:].split()[0])
        elif ":" in line:
            names.add(line.split(":", 1)[0].strip())
    return names
