"""The pipeline end to end through a real Slurm: the default campaign, `snakemake --profile slurm`.

tests/slurm/setup.sh brings up a one-node Slurm (Debian's slurmctld, slurmd, slurmdbd on mariadb,
munge) on this machine; this test then runs the CPU-runnable part of the default campaign twice, in
two fresh copies of the tree, with the same config: once through `--profile slurm` (every job a Slurm
job, job states read by the plugin through sacct/slurmdbd) and once through `--profile profiles/local`.
The tidy tables (tidy/records.csv, one row per record; aggregate/summary.csv, across runs) must be
equal after dropping the fields that legitimately differ between two runs: the timestamp (when a
point ran) and every measured value or clock reading (p50, p90, p99 and their _min/_max/_ci_*
companions, min, max, mean, stddev, sm_clock_*, cpu_clock_*, and the host's load host_*):
timing noise.

The Slurm run goes all the way to the report, its native build a Slurm job too; the local
reference then runs with that build copied in (the same binaries, so the same measure keys, without
building twice) and stops at the tidy tables (the local profile's full run is
tests/test_pipeline.py's). Everything else must match row for row: which
points ran, each point's status and reason, units, sample counts, run indices, and the provenance id
(the same host probed inside a Slurm job). Points measured for real (status ok) must be among them.

A second test points an H200 platform file at this CPU-only node and checks that its benchmark job,
landing there through Slurm, fails at once naming the missing hardware.

Runs when we are root (CI) or GICOMM_SLURM_TESTS=1 with a cluster already up; skips, saying why,
only when neither holds. Status-check intervals are shortened on the command line for the test (the
profile's own values are meant for real clusters).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

# The CPU-runnable part of the default campaign (config/config.yaml): its experiments with a point
# that needs no GPU, NIC, CUDA build, second node or clock locking, with their reduced sweeps, one
# independent run per point, a host-only native build of just their drivers (every target would
# double the build: the tests and tools the pipeline never runs), and no archived campaigns beside
# it (those are not run, only reported).
E2E_CONFIG = """\
campaign: e2e
sweep: reduced
runs: 1
native: {{cuda: 'off', build_jobs: 2, targets: {targets}}}
report: {{archived: []}}
experiments: {experiments}
"""
# Fields that legitimately differ between two runs of the same config (see the module docstring):
# when a point ran, and every measured value or clock reading.
VOLATILE = re.compile(r"^(timestamp|p\d+(_\w+)?|min|max|mean|stddev|(sm|cpu)_clock\w*|host_\w+)$")
# The tidy tables compared, under results/e2e/.
TABLES = ("tidy/records.csv", "aggregate/summary.csv")
TIDY_TARGETS = [f"results/e2e/{t}" for t in TABLES]
FAST_POLL = [
    "--slurm-init-seconds-before-status-checks", "2",
    "--seconds-between-status-checks", "2",
]  # fmt: skip

pytestmark = pytest.mark.slow


def cpu_runnable_experiments() -> dict[str, str]:
    """Experiments of the default campaign with at least one point a CPU-only machine can run, and
    the driver (a CMake target) of each."""
    from gicomm.config import load_campaign_file

    def cpu_only(needs: dict[str, Any]) -> bool:
        return not (
            needs.get("gpus", 0)
            or needs.get("rdma_nic")
            or needs.get("nvlink_peers")
            or needs.get("cuda_build")
            or needs.get("clock_lock")
            or needs.get("nodes", 1) > 1
        )

    campaign = load_campaign_file(REPO / "config" / "config.yaml", sweep="reduced")
    return {
        name: e.driver
        for name, e in sorted(campaign.experiments.items())
        if any(cpu_only(e.needs_of(p)) for p in e.points("reduced"))
    }


def copy_tree(dst: Path) -> Path:
    """What a fresh clone has (tracked and untracked-but-not-ignored files), links kept as links."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True,
        check=True,
    ).stdout.splitlines()  # fmt: skip
    for f in files:
        src, out = REPO / f, dst / f
        if not (src.is_symlink() or src.is_file()):
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            out.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, out)
    drivers = cpu_runnable_experiments()
    experiments = sorted(drivers) or "all"
    targets = sorted(set(drivers.values()))  # none: every target
    (dst / "e2e.yaml").write_text(
        E2E_CONFIG.format(experiments=json.dumps(experiments), targets=json.dumps(targets))
    )
    return dst


def snakemake(cwd: Path, *args: str) -> subprocess.Popen[str]:
    log = open(cwd / "snakemake.log", "w")  # noqa: SIM115 - closed by the caller through wait()
    return subprocess.Popen(
        [sys.executable, "-m", "snakemake", *args], cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip


def wait(proc: subprocess.Popen[str], cwd: Path, timeout: float) -> tuple[int, str]:
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(30)
        code = -1
    return code, (cwd / "snakemake.log").read_text()


def table(path: Path, drop: re.Pattern[str] | None) -> tuple[list[str], list[tuple[str, ...]]]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    cols = [c for c in (rows[0].keys() if rows else []) if not (drop and drop.match(c))]
    return cols, sorted(tuple(r[c] for c in cols) for r in rows)


def test_slurm_profile_end_to_end_equals_local(slurm_cluster: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    via_slurm = copy_tree(tmp_path / "slurm")
    via_local = copy_tree(tmp_path / "local")
    # The command users type, from the repository root; only the poll intervals are the test's.
    slurm_run = snakemake(via_slurm, "--profile", "slurm", "--configfile", "e2e.yaml", *FAST_POLL)
    code_slurm, log_slurm = wait(slurm_run, via_slurm, timeout=600)
    assert code_slurm == 0, log_slurm[-5000:]
    assert "rule build_native" in log_slurm  # the native build ran as a Slurm job
    # The local reference measures with the binaries the Slurm job built (its build summary newer
    # than every source, so Snakemake keeps it) and only needs the tidy tables.
    for summary in (via_slurm / "build").glob("*/gicomm_build.json"):
        host = via_local / "build" / summary.parent.name
        shutil.copytree(summary.parent / "bin", host / "bin", symlinks=True)
        shutil.copy2(summary, host / summary.name)
    local_run = snakemake(
        via_local, *TIDY_TARGETS, "--profile", "profiles/local", "--configfile", "e2e.yaml"
    )
    code_local, log_local = wait(local_run, via_local, timeout=600)
    elapsed = time.monotonic() - t0
    assert code_local == 0, log_local[-5000:]
    assert "rule build_native" not in log_local, "the local reference rebuilt the native tree"

    # Every job really went through Slurm, and the plugin saw the states through accounting.
    submitted = log_slurm.count("has been submitted with SLURM jobid")
    assert submitted >= 3, log_slurm[-3000:]
    assert "Neither 'sacct' nor 'squeue'" not in log_slurm
    run_ids = {
        line.split("SLURM run ID: ")[1].strip()
        for line in log_slurm.splitlines()
        if "SLURM run ID: " in line
    }
    assert len(run_ids) == 1, run_ids
    sacct = subprocess.run(
        ["sacct", "-X", "-n", "-P", "--name", run_ids.pop(), "-o", "JobID,State,Account", "-S", "now-1hour"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert len(sacct) == submitted, sacct
    assert all(line.split("|")[1] == "COMPLETED" for line in sacct), sacct

    for name in TABLES:
        cols_s, rows_s = table(via_slurm / "results/e2e" / name, VOLATILE)
        cols_l, rows_l = table(via_local / "results/e2e" / name, VOLATILE)
        assert cols_s == cols_l, name
        assert rows_s, f"{name} is empty"
        assert rows_s == rows_l, f"{name}: Slurm and local tables differ"
    # No duplicated result rows (retries and group jobs must not duplicate points).
    _, rows = table(via_slurm / "results/e2e/tidy/records.csv", None)
    with open(via_slurm / "results/e2e/tidy/records.csv", newline="") as f:
        keys = [
            (r["experiment"], r["point_id"], r["metric"], r["run_index"]) for r in csv.DictReader(f)
        ]
    assert len(keys) == len(set(keys)) == len(rows)
    if cpu_runnable_experiments():
        with open(via_slurm / "results/e2e/tidy/records.csv", newline="") as f:
            assert any(r["status"] == "ok" for r in csv.DictReader(f)), "nothing measured via Slurm"
    assert (via_slurm / "results/e2e/report/index.html").exists()
    print(f"slurm: {slurm_cluster}; {submitted} Slurm jobs; both runs took {elapsed:.1f} s")


def test_job_on_a_node_without_the_declared_hardware_fails_early(
    slurm_cluster: str, tmp_path: Path
) -> None:
    """An H200 platform whose Slurm section points at this CPU-only test node: the benchmark job
    lands there and must stop at once, through Slurm, saying which declared hardware is missing."""
    import yaml

    tree = copy_tree(tmp_path / "wrong")
    platform = yaml.safe_load((REPO / "config/platforms/h200.yaml").read_text())
    platform["platform_spec"]["slurm"].update(
        partition=None, cpu_partition=None, constraint=None, gpu_resource="none", gpu_type=None,
        exclusive=False, cpus_per_task=1, mem_mb=1000, cpu_mem_mb=1000,
    )  # fmt: skip
    experiment = (sorted(cpu_runnable_experiments()) or ["engine_ceiling"])[0]
    config = {
        **platform,
        "campaign": "wrongnode",
        "sweep": "reduced",
        "runs": 1,
        "experiments": [experiment],
        "report": {"archived": []},
    }
    (tree / "wrong.yaml").write_text(yaml.safe_dump(config))
    # Neither the build nor the campaign's probe record is what this test is about (the check runs
    # on the node the benchmark job lands on): stand-ins newer than their sources take their place.
    build = tree / "build" / "h200" / "gicomm_build.json"
    build.parent.mkdir(parents=True)
    build.write_text('{"cuda": false}\n')
    probe = tree / "results" / "wrongnode" / "hosts" / "h200" / "hardware.json"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        json.dumps({"host": "h200", "provenance_id": "h200-test", "gpus": {}, "rdma": {}})
    )
    target = f"results/wrongnode/raw/{experiment}/h200/run0/batch0.jsonl"
    run = snakemake(
        tree, target, "--profile", "slurm", "--configfile", "wrong.yaml", "--retries", "0",
        *FAST_POLL,
    )  # fmt: skip
    code, log = wait(run, tree, timeout=300)
    assert code != 0, log[-3000:]
    assert "has been submitted with SLURM jobid" in log
    assert not (tree / target).exists()
    # The reason is in the failed job's logs (the Slurm log, which the plugin keeps for failed jobs
    # and names in its error report, or the rule's log).
    logs = [tree / f"results/wrongnode/logs/bench/{experiment}/h200/run0/batch0.log"]
    logs += sorted((tree / ".snakemake" / "slurm_logs").rglob("*.log"))
    text = "".join(p.read_text() for p in logs if p.is_file())
    assert "without the declared hardware of platform h200" in text, text[-3000:]
    assert "4 GPU(s) per node, found 0" in text, text[-3000:]
