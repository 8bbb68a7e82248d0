from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

# The longest modules first (each runs whole pipelines): `make test` runs pytest on two workers
# (pytest-xdist, --dist loadfile), and a long module started last would leave one worker idle
# while the other finishes it.
LONGEST_FIRST = (
    "test_pipeline.py",
    "test_slurm_e2e.py",
    "test_remeasure.py",
    "test_faults.py",
    "test_config.py",
    "test_report.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable within a module


def make_record(**overrides: object) -> dict:
    record = {
        "schema_version": 1,
        "campaign": "c1",
        "host": "h1",
        "platform": "local",
        "experiment": "one_op",
        "transport": "mini-gda",
        "nic_backend": "softnic-cpu",
        "point_id": "p0",
        "params": {"payload": "inline", "size": 8},
        "metric": "issue_ns",
        "unit": "ns",
        "stats": {"n": 100, "p50": 700.0, "p99": 900.0, "min": 650.0, "max": 1000.0},
        "sm_clock_mhz": 1980.0,
        "run_index": 0,
        "provenance_id": "h1-abc",
        "status": "ok",
    }
    record.update(overrides)
    return record


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _newest_source_mtime() -> float:
    return max(p.stat().st_mtime for p in (REPO / "native").rglob("*") if p.is_file())


def _host_drivers() -> set[str]:
    """The drivers of the experiments with a point a host-only build runs (no GPU, no CUDA)."""
    from gicomm.experiments import load_experiment

    def host_only(needs: dict) -> bool:
        return not needs.get("gpus") and not needs.get("cuda_build")

    experiments = map(load_experiment, (REPO / "config" / "experiments").glob("*.yaml"))
    return {e.driver for e in experiments if any(host_only(e.needs_of(p)) for p in e.points())}


def host_build(build: Path, *cmake_flags: str, target: str | None = None) -> Path:
    """A host-only native build in `build` (CUDA off), of `target` alone when named."""
    subprocess.run(
        ["cmake", "-S", str(REPO / "native"), "-B", str(build), "-DGICOMM_WITH_CUDA=OFF", *cmake_flags],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        ["cmake", "--build", str(build), "-j", "2", *(["--target", target] if target else [])],
        check=True, capture_output=True,
    )  # fmt: skip
    return build


def current_build_with(
    tmp_path_factory: pytest.TempPathFactory, target: str, *cmake_flags: str
) -> Path:
    """The build folder holding a current `target`: `make test`'s ctest build when its binary is
    newer than every native source, else a host-only build of that target alone (seconds, not the
    whole tree)."""
    ctest = REPO / "build" / "ctest"
    binary = ctest / "bin" / target
    if binary.is_file() and binary.stat().st_mtime >= _newest_source_mtime():
        return ctest
    return host_build(tmp_path_factory.mktemp(f"{target}-build"), *cmake_flags, target=target)


@pytest.fixture(scope="session")
def native_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One native build for every pipeline test of the session: `make test`'s ctest build when it
    is current (it just ran: every host driver built after the last source change), else a
    host-only build made here, once for all pytest-xdist workers
    (the first one builds under a lock, the others wait and use it). Pipeline tests copy its bin/
    and summary in, so each run exercises the pipeline, not the compiler, again."""
    ctest = REPO / "build" / "ctest"
    summary = ctest / "gicomm_build.json"
    newest = _newest_source_mtime()
    drivers = [ctest / "bin" / d for d in _host_drivers()]
    if (
        summary.exists()
        and summary.stat().st_mtime >= newest
        and all(d.is_file() and d.stat().st_mtime >= newest for d in drivers)
    ):
        return ctest
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the workers of this session
    build = root / "native-build"
    with open(root / "native-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (build / "gicomm_build.json").exists():
            host_build(build)
    return build


def copy_repo(dst: Path, native_build: Path) -> Path:
    """A copy of the tracked working tree (what a fresh clone has) at `dst`, for pipeline runs,
    with the session's native build in place as build/<host>/ (the local platform's host label)."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for f in files:
        src = REPO / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    host = socket.gethostname().split(".")[0]
    shutil.copytree(native_build / "bin", dst / "build" / host / "bin")
    shutil.copy(native_build / "gicomm_build.json", dst / "build" / host / "gicomm_build.json")
    return dst


@pytest.fixture
def repo_copy(tmp_path: Path, native_build: Path) -> Path:
    """A copy of the tracked working tree for one test (copy_repo)."""
    return copy_repo(tmp_path / "repo", native_build)
