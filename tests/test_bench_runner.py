"""The batch runner: finished points survive a killed driver, reruns measure only what is missing,
a crashing or hanging point is recorded as failed and the rest of the batch still runs, and points
the host cannot run are recorded as skipped with the reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import REPO

from gicomm.bench import BatchJob, run_batch
from gicomm.experiments import Experiment, expand_sweep
from gicomm.records import iter_records

NO_GPU = {"provenance_id": "h-1", "gpus": {"devices": []}, "rdma": {"devices": []}}


def experiment(behaviours: list[str], needs: dict | None = None, needs_when=()) -> Experiment:
    return Experiment(
        name="fake", title="fake", paper_ref="", description="", driver="gicomm-bench-fake",
        needs=needs or {"gpus": 0}, needs_when=tuple(needs_when), opt_in=False, point_s=None, repetitions=1, warmup=1,
        iters=5, metrics=("issue_ns",), points_per_job=100,
        sweeps={"full": [{"behave": behaviours, "size": [8]}]}, figure={}, path=Path("fake.yaml"),
    )  # fmt: skip


def make_job(tmp_path: Path, e: Experiment, point_s: int = 30) -> BatchJob:
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True, exist_ok=True)
    (build / "gicomm_build.json").write_text('{"cuda": false, "rdma": false}')
    shutil.copy(REPO / "tests/fixtures/fake_driver.py", build / "bin" / "gicomm-bench-fake")
    return BatchJob(
        experiment=e, points=e.points(), campaign="c", host="h", platform="local", run_index=0,
        build_dir=build, hardware=NO_GPU, partial=tmp_path / "partial/b0.jsonl",
        output=tmp_path / "raw/b0.jsonl", point_s=point_s,
    )  # fmt: skip


def statuses(path: Path) -> list[tuple[str, str]]:
    return [(r["params"]["behave"], r["status"]) for r in iter_records(path)]


def calls(job: BatchJob) -> list[str]:
    p = Path(str(job.partial) + ".calls")
    return p.read_text().split() if p.exists() else []


def test_all_points_measured(tmp_path: Path):
    job = make_job(tmp_path, experiment(["ok", "ok2", "ok3"]))
    run_batch(job)
    assert statuses(job.output) == [("ok", "ok"), ("ok2", "ok"), ("ok3", "ok")]


def test_crash_marks_point_failed_and_batch_goes_on(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a", "crash", "b"]))
    run_batch(job)
    assert statuses(job.output) == [("a", "ok"), ("crash", "failed"), ("b", "ok")]
    failed = [r for r in iter_records(job.output) if r["status"] == "failed"][0]
    assert "exited (139)" in failed["error"]


def test_hang_is_cut_by_the_point_limit(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a", "hang", "b"]), point_s=1)
    run_batch(job)
    assert statuses(job.output) == [("a", "ok"), ("hang", "failed"), ("b", "ok")]
    assert (
        "timeout after"
        in [r for r in iter_records(job.output) if r["status"] == "failed"][0]["error"]
    )


def test_sigkill_keeps_finished_points_and_rerun_measures_only_the_rest(tmp_path: Path):
    e = experiment(["a", "b", "kill", "c"])
    job = make_job(tmp_path, e)
    run_batch(job)
    # The killed point is failed (a torn line was dropped, never read as data); a and b were
    # measured once, c after the kill.
    assert statuses(job.output) == [("a", "ok"), ("b", "ok"), ("kill", "failed"), ("c", "ok")]
    assert len(calls(job)) == 3
    # A rerun of the same batch (e.g. after Snakemake lost the job) measures nothing again.
    job.output.unlink()
    run_batch(job)
    assert len(calls(job)) == 3
    assert len(list(iter_records(job.output))) == 4


def test_points_the_host_cannot_run_are_skipped_with_the_reason(tmp_path: Path):
    e = experiment(
        ["a", "gpu"], needs_when=[({"behave": "gpu"}, {"gpus": 2, "nvlink_peers": True})]
    )
    job = make_job(tmp_path, e)
    run_batch(job)
    assert statuses(job.output) == [("gpu", "skipped"), ("a", "ok")]
    skipped = [r for r in iter_records(job.output) if r["status"] == "skipped"][0]
    assert "needs 2 GPU(s), found 0" in skipped["error"]
    assert "NVLink" in skipped["error"]
    assert calls(job) == [p.point_id for p in expand_sweep("fake", {"behave": ["a"], "size": [8]})]


def test_missing_driver_skips_with_reason(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a"]))
    (job.build_dir / "bin/gicomm-bench-fake").unlink()
    run_batch(job)
    (rec,) = iter_records(job.output)
    assert rec["status"] == "skipped" and "gicomm-bench-fake is not built" in rec["error"]
    assert json.loads(job.output.read_text())["point_id"] == rec["point_id"]


def test_job_on_a_node_without_the_declared_hardware_fails_early(tmp_path: Path):
    from dataclasses import replace

    import pytest

    from gicomm.bench import HardwareMismatch

    spec = {
        "template": False,
        "gpu": {"per_node": 4},
        "nics": [{"name": f"mlx5_{i}"} for i in range(4)],
    }
    job = replace(make_job(tmp_path, experiment(["a"])), platform="h200", platform_spec=spec)
    with pytest.raises(HardwareMismatch) as err:
        run_batch(job)
    msg = str(err.value)
    assert "declares 4 GPU(s) per node, found 0" in msg
    assert "declares 4 RDMA NIC(s) per node, found 0" in msg
    assert "platform h200" in msg
    assert calls(job) == [] and not job.output.exists()


def test_each_nic_backend_gets_its_own_driver_process(tmp_path: Path):
    e = experiment(["a"])
    e.sweeps["full"][0]["nic_backend"] = ["softnic-cpu", "none"]
    job = make_job(tmp_path, e)
    run_batch(job)
    got = {(r["params"]["nic_backend"], r["nic_backend"]) for r in iter_records(job.output)}
    assert got == {("softnic-cpu", "softnic-cpu"), ("none", "none")}
