from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))
# A folder the pytest-xdist workers of one session share: the controller makes it, the workers find
# its path in the environment they inherit, and the controller removes it when the session ends.
SHARED_ENV = "GICOMM_PYTEST_SHARED"
SLURM_SETUP = REPO / "tests" / "slurm" / "setup.sh"
SLURM_TEARDOWN = REPO / "tests" / "slurm" / "teardown.sh"

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


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, or the only process
        os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="gicomm-pytest-")


def pytest_unconfigure(config: pytest.Config) -> None:
    """After every worker: stop the test Slurm when this session started it (slurm_cluster)."""
    if hasattr(config, "workerinput") or SHARED_ENV not in os.environ:
        return
    shared = Path(os.environ.pop(SHARED_ENV))
    if (shared / "slurm-started").exists() and os.environ.get("GICOMM_SLURM_KEEP") != "1":
        subprocess.run(["bash", str(SLURM_TEARDOWN)], capture_output=True, text=True, timeout=120)
    shutil.rmtree(shared, ignore_errors=True)


def shared_dir() -> Path:
    """The folder every worker of this session sees (SHARED_ENV)."""
    return Path(os.environ[SHARED_ENV])


@contextlib.contextmanager
def shared_lock(name: str) -> Iterator[None]:
    """Held by one worker of this session at a time: the first makes what the others then use."""
    with open(shared_dir() / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


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
def native_build() -> Path:
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
    build = shared_dir() / "native-build"
    with shared_lock("native-build"):
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


def slurm_answers() -> bool:
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and any(s in out.stdout for s in ("idle", "mixed", "alloc"))


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[str]:
    """A running one-node Slurm with accounting (tests/test_slurm_e2e.py, tests/test_launcher.py).
    Root: set it up once for every worker of the session (failure fails the tests), and keep it up
    until the session ends (pytest_unconfigure stops the daemons it started then: slurmd,
    slurmctld, slurmdbd, mariadbd, munged), unless Slurm was already answering before (then it is
    someone else's) or GICOMM_SLURM_KEEP=1 asks to keep them for the next run. Up to the end, not
    per module: with Slurm's client installed and its controller stopped, every snakemake started
    afterwards waits 9 s for it (the Slurm executor plugin asks `scontrol show config` on start)."""
    if os.geteuid() == 0:
        state = shared_dir() / "slurm-setup"
        with shared_lock("slurm"):
            if not state.exists():
                running_before = slurm_answers()
                t0 = time.monotonic()
                out = subprocess.run(
                    ["bash", str(SLURM_SETUP)], capture_output=True, text=True, timeout=600
                )
                if out.returncode:
                    state.write_text(f"tests/slurm/setup.sh failed:\n{out.stdout}\n{out.stderr}")
                else:
                    state.write_text(
                        f"set up by tests/slurm/setup.sh in {time.monotonic() - t0:.1f} s"
                    )
                    if not running_before:
                        (shared_dir() / "slurm-started").touch()
        said = state.read_text()
        assert not said.startswith("tests/slurm/setup.sh failed"), said
        yield said
        return
    if os.environ.get("GICOMM_SLURM_TESTS") == "1":
        if slurm_answers():
            yield "already running"
            return
        pytest.fail(
            "GICOMM_SLURM_TESTS=1 but no Slurm answers: run `sudo tests/slurm/setup.sh` first"
        )
    pytest.skip(
        "needs root to install and start slurmctld/slurmd/slurmdbd/munge/mariadb (CI runs as root); "
        "or run `sudo tests/slurm/setup.sh` and set GICOMM_SLURM_TESTS=1"
    )
