"""Re-measuring and resuming through Snakemake, on this machine: a point is measured again when its
timeouts change or the user forces it (the old records stay as history, out of the tables); a run
killed with SIGKILL resumes without `snakemake --unlock` and keeps the points it finished; a second
live run is refused (by Snakemake's lock, and by ours even after `snakemake --unlock`); a driver
missing from the build fails the run.

One copy of the tree serves every test of this module (each test uses its own campaign). Besides
the CPU experiment engine_ceiling, a stand-in driver (tests/fixtures/fake_driver.py) with slow points
gives the kill and race tests a deterministic window."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, copy_repo

from gicomm.records import iter_records

HOST = socket.gethostname().split(".")[0]
FAKE = """name: fake_slow
title: a stand-in driver with slow points
driver: gicomm-bench-fake
needs: {gpus: 0}
opt_in: true
repetitions: 1
warmup: 0
iters: 1
metrics: [issue_ns]
points_per_job: 8
params:
  transport: {values: [mini-gda], default: mini-gda, doc: what the stand-in says it measured}
  nic_backend: {values: [softnic-cpu], default: softnic-cpu, doc: what the stand-in says served it}
  behave: {type: string, values: [slow, wait, ok], default: ok, doc: how the stand-in behaves}
  size: {type: integer, min: 1, max: 4, default: 1, doc: a swept value}
sweep:
  - {behave: [slow], size: [1, 2, 3, 4]}
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory, native_build: Path) -> Path:
    dst = copy_repo(tmp_path_factory.mktemp("remeasure") / "repo", native_build)
    shutil.copy(
        REPO / "tests/fixtures/fake_driver.py", dst / "build" / HOST / "bin/gicomm-bench-fake"
    )
    (dst / "config/experiments/fake_slow.yaml").write_text(FAKE)
    return dst


def config(tree: Path, name: str, file: str | None = None, **keys: object) -> Path:
    cfg = {"campaign": name, "platform": "local", "report": {"archived": []}}
    cfg |= {"native": {"cuda": "off"}, **keys}
    path = tree / f"{file or name}.yaml"
    path.write_text(json.dumps(cfg))
    return path


def command(cfg: Path, *extra: str) -> list[str]:
    """snakemake with `extra` (targets, flags) first: --configfile takes every word after it."""
    return [sys.executable, "-m", "snakemake", *extra, "--profile", "profiles/local",
            "--configfile", str(cfg)]  # fmt: skip


def snakemake(tree: Path, cfg: Path, *extra: str, env: dict | None = None, timeout: int = 600):
    return subprocess.run(
        command(cfg, *extra), cwd=tree, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})}, check=False,
    )  # fmt: skip


def batch(tree: Path, campaign: str, experiment: str, run: int = 0) -> dict[str, Path]:
    base = f"results/{campaign}/%s/{experiment}/{HOST}/run{run}/batch0"
    return {
        "raw": tree / (base % "raw" + ".jsonl"),
        "partial": tree / (base % "partial" + ".jsonl"),
        "history": tree / (base % "history"),
        "log": tree / (base % "logs/bench" + ".log"),
        "calls": tree / f"results/{campaign}/partial/{experiment}/{HOST}/run{run}/calls",
    }


def test_changed_timeouts_or_forcerun_measure_again_and_keep_history(tree: Path):
    """A campaign whose 1 ms wait fails its points, run again with 2000 ms
    and --forcerun bench_batch, measures them again. (The stand-in driver fails a point whose wait
    is under 10 ms, so the first run fails whatever the machine's load; engine_ceiling rides along
    for a native driver's log.)"""
    exp = tree / "config/experiments/fake_wait.yaml"
    exp.write_text(FAKE.replace("fake_slow", "fake_wait").replace("[slow]", "[wait]"))
    keys = {"experiments": ["fake_wait", "engine_ceiling"], "sweep": "reduced"}
    hw1 = config(tree, "hw", "hw1", **keys, timeouts={"wait_ms": 1})
    hw2 = config(tree, "hw", "hw2", **keys, timeouts={"wait_ms": 2000})
    tidy = "results/hw/tidy/records.csv"
    first = snakemake(tree, hw1, tidy)
    assert first.returncode == 0, first.stderr[-3000:]
    files = batch(tree, "hw", "fake_wait")
    assert {r["status"] for r in iter_records(files["raw"])} == {"failed"}
    # A native driver's own progress lines are in its job's log.
    engine_log = batch(tree, "hw", "engine_ceiling")["log"].read_text()
    assert "[gicomm] point 1/2 id=" in engine_log

    second = snakemake(tree, hw2, tidy, "--forcerun", "bench_batch")
    assert second.returncode == 0, second.stderr[-3000:]
    assert {r["status"] for r in iter_records(files["raw"])} == {"ok"}
    history = sorted(files["history"].glob("*.published.jsonl"))
    assert len(history) == 2 and {r["status"] for r in iter_records(history[0])} == {"failed"}
    records = (tree / tidy).read_text()
    assert "CQE not seen" not in records  # the old failures are history, not in the tables

    # A changed timeout alone makes Snakemake run the jobs again (and they measure again).
    dry = snakemake(tree, hw1, tidy, "-n")
    assert "params have changed since last execution" in dry.stdout and "bench_batch" in dry.stdout
    # Forced again with nothing changed: measured again all the same.
    third = snakemake(tree, hw2, tidy, "--forcerun", "bench_batch")
    assert third.returncode == 0, third.stderr[-3000:]
    assert len(sorted(files["history"].glob("*.published.jsonl"))) == 3


def slow_campaign(tree: Path, name: str) -> tuple[Path, dict[str, Path]]:
    return config(tree, name, experiments=["fake_slow"]), batch(tree, name, "fake_slow")


def start(
    tree: Path, cfg: Path, files: dict[str, Path], slow_s: float, gate: Path | None = None
) -> subprocess.Popen:
    """Start a run and return once its bench job has finished two of the four slow points (with
    `gate`, the third waits until that file exists)."""
    target = str(files["raw"].relative_to(tree)).split("/raw/")[0] + "/tidy/records.csv"
    proc = subprocess.Popen(
        command(cfg, target), cwd=tree, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "FAKE_SLOW_S": str(slow_s), "FAKE_GATE": str(gate or "")},
    )  # fmt: skip
    scratch = files["partial"].with_suffix(".driver.jsonl")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if scratch.exists() and scratch.read_text().count("\n") >= 2:
            return proc
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        time.sleep(0.1)
    proc.kill()
    pytest.fail("the bench job did not start")


def test_a_killed_run_resumes_without_unlock_and_keeps_finished_points(tree: Path):
    cfg, files = slow_campaign(tree, "kt")
    run = start(tree, cfg, files, slow_s=2)
    os.kill(run.pid, signal.SIGKILL)  # Snakemake itself, as the OOM killer or kill -9 would
    run.wait()
    # The job and its driver die with it: its lock on the batch goes with them.
    from gicomm.locks import FileLock

    lock = FileLock(files["partial"].with_suffix(".lock"))
    deadline = time.monotonic() + 30
    while not lock.try_acquire("the test") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert lock.fd is not None, "the killed run's bench job lives on"
    lock.release()
    assert (tree / ".snakemake/locks").is_dir() and any((tree / ".snakemake/locks").iterdir())
    finished = files["calls"].read_text().split()
    assert len(finished) >= 2
    # A bad line in the middle of what the killed job left (here: what its driver had written).
    scratch = files["partial"].with_suffix(".driver.jsonl")
    lines = scratch.read_bytes().split(b"\n")
    scratch.write_bytes(b"\n".join([lines[0], b"garbage \xff", *lines[1:]]))
    again = snakemake(tree, cfg, "results/kt/tidy/records.csv", env={"FAKE_SLOW_S": "0"})
    assert again.returncode == 0, again.stderr[-3000:]
    assert "removed Snakemake's lock files" in again.stderr
    calls = files["calls"].read_text().split()
    assert calls[: len(finished)] == finished and len(calls) == 4  # the finished ones kept
    log = files["log"].read_text()
    assert f"kept {len(finished)} point(s) measured ok" in log
    assert "batch0.driver.jsonl:2: not UTF-8 text" in log  # reported with file:line, then skipped
    assert [r["status"] for r in iter_records(files["raw"])] == ["ok"] * 4


def race_a_held_run(tree: Path, name: str, unlock: bool = False) -> subprocess.CompletedProcess:
    """A run of campaign `name` held at a gate (its third point waits) and the same command started
    beside it, after `snakemake --unlock` when asked; then the first run let go. Checks that the
    second run failed, the first ended well and each point was measured once; returns the second."""
    cfg, files = slow_campaign(tree, name)
    gate = tree / f"{name}.gate"
    first = start(tree, cfg, files, slow_s=0, gate=gate)
    try:
        if unlock:
            out = snakemake(tree, cfg, "--unlock")
            assert out.returncode == 0, out.stderr[-2000:]
        second = snakemake(tree, cfg, f"results/{name}/tidy/records.csv")
    finally:
        gate.write_text("open\n")
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0, out[-3000:]
    assert second.returncode != 0
    assert len(files["calls"].read_text().split()) == 4  # each point measured once
    assert len(list(iter_records(files["raw"]))) == 4
    return second


def test_a_second_run_on_the_same_results_is_refused(tree: Path):
    """The same command again while a run is alive (held, so the race is always won by the first):
    Snakemake's own lock refuses it."""
    second = race_a_held_run(tree, "race")
    assert "cannot be locked" in second.stdout + second.stderr


def test_a_second_run_after_unlock_is_refused_by_our_lock(tree: Path):
    """Snakemake's lock message suggests --unlock; doing that during a run and starting the same
    command again must not measure (or publish) anything twice."""
    second = race_a_held_run(tree, "ul", unlock=True)
    assert "another snakemake run of gicomm is alive in this directory" in second.stderr
    assert "snakemake --unlock does not end it" in second.stderr


@pytest.mark.parametrize("how", ["deleted", "misspelled"])
def test_a_driver_missing_from_the_build_fails_the_run(tree: Path, how: str):
    name = f"nodriver{how}"
    exp = tree / f"config/experiments/fake_{how}.yaml"
    driver = "gicomm-bench-fake-gone" if how == "deleted" else "gicomm-bench-faek"
    exp.write_text(FAKE.replace("fake_slow", f"fake_{how}").replace("gicomm-bench-fake", driver))
    if how == "deleted":  # built once, deleted since
        (tree / "build" / HOST / "bin" / driver).unlink(missing_ok=True)
    cfg = config(tree, name, experiments=[f"fake_{how}"])
    out = snakemake(tree, cfg, f"results/{name}/tidy/records.csv")
    assert out.returncode != 0
    assert f"bin/{driver} does not exist: a build error" in out.stderr
    assert not batch(tree, name, f"fake_{how}")["raw"].exists()
