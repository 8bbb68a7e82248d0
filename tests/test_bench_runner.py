"""The batch runner: a job measures every point of its batch, a killed job resumes keeping only
what it finished `ok` under the same measure key, a crashing or hanging point is recorded as
failed with the driver's own words and the rest of the batch still runs, points the host cannot run
are skipped with the reason, a driver missing from the build is a build error, and whatever the
driver writes is checked before it becomes a record."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REPO

from gicomm import ledger
from gicomm.bench import BatchJob, run_batch
from gicomm.errors import BuildError, RecordError
from gicomm.experiments import Experiment, expand_sweep
from gicomm.locks import FileLock, LockHeld
from gicomm.records import iter_records

NO_GPU = {"provenance_id": "h-1", "hostname": "h", "gpus": {"devices": []}, "rdma": {"devices": []}}
ONE_GPU = {**NO_GPU, "gpus": {"devices": [{"name": "GPU", "uuid": "GPU-1"}]}}


def experiment(
    behaviours: list[str], needs: dict | None = None, needs_when=(), driver="gicomm-bench-fake"
) -> Experiment:
    return Experiment(
        name="fake", title="fake", paper_ref="", description="", driver=driver,
        needs=needs or {"gpus": 0}, needs_when=tuple(needs_when), opt_in=False, point_s=None, repetitions=1, warmup=1,
        iters=5, metrics=("issue_ns",), points_per_job=100,
        sweeps={"full": [{"behave": behaviours, "size": [8]}]}, figure={}, path=Path("fake.yaml"),
    )  # fmt: skip


def make_job(tmp_path: Path, e: Experiment, point_s: int = 30, **kw) -> BatchJob:
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True, exist_ok=True)
    (build / "gicomm_build.json").write_text('{"cuda": false, "rdma": false}')
    shutil.copy(REPO / "tests/fixtures/fake_driver.py", build / "bin" / "gicomm-bench-fake")
    return BatchJob(
        experiment=e, points=e.points(), campaign="c", host="h", platform="local", run_index=0,
        build_dir=build, hardware=kw.pop("hardware", NO_GPU), partial=tmp_path / "partial/b0.jsonl",
        history=tmp_path / "history/b0", output=tmp_path / "raw/b0.jsonl", point_s=point_s, **kw,
    )  # fmt: skip


def statuses(path: Path) -> list[tuple[str, str]]:
    return [(r["params"]["behave"], r["status"]) for r in iter_records(path)]


def calls(job: BatchJob) -> list[str]:
    p = job.partial.parent / "calls"
    return p.read_text().split() if p.exists() else []


def behave_of(job: BatchJob, pid: str) -> str:
    return next(str(p.params["behave"]) for p in job.points if p.point_id == pid)


def killed_before_publishing(job: BatchJob, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the job as if it were killed after its last point, before it published."""

    def die(self, output, order):
        raise KeyboardInterrupt("killed")

    with monkeypatch.context() as m:
        m.setattr(ledger.Ledger, "publish", die)
        with pytest.raises(KeyboardInterrupt):
            run_batch(job)
    assert not job.output.exists() and job.partial.exists()


def test_all_points_measured_as_schema_2_records_with_their_measure_key(tmp_path: Path):
    job = make_job(tmp_path, experiment(["ok", "ok2", "ok3"]))
    run_batch(job)
    assert statuses(job.output) == [("ok", "ok"), ("ok2", "ok"), ("ok3", "ok")]
    for r in iter_records(job.output):
        assert r["schema_version"] == 2 and "transport" not in r["params"]
        assert len(r["measure_key"]) == 16
    assert len({r["measure_key"] for r in iter_records(job.output)}) == 3
    # The partial file went to the history folder with the published records.
    assert not job.partial.exists()
    assert [p.name.endswith(".published.jsonl") for p in job.history_dir.iterdir()] == [True]


def test_crash_marks_point_failed_with_the_exit_and_batch_goes_on(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a", "crash", "b"]))
    run_batch(job)
    assert statuses(job.output) == [("a", "ok"), ("crash", "failed"), ("b", "ok")]
    failed = [r for r in iter_records(job.output) if r["status"] == "failed"][0]
    assert (
        "gicomm-bench-fake exited with code 139 (128 + 11: killed by signal SIGSEGV)"
        in (failed["error"])
    )


def test_a_driver_refusing_its_input_is_named_with_its_own_words(tmp_path: Path):
    job = make_job(tmp_path, experiment(["refuse", "b"]))
    run_batch(job)
    failed = [r for r in iter_records(job.output) if r["status"] == "failed"][0]
    assert "exited with code 2 (it refused its arguments or points file)" in failed["error"]
    assert "bad parameter behave=refuse" in failed["error"]
    assert statuses(job.output)[1] == ("b", "ok")


def test_a_driver_finding_hardware_missing_skips_with_its_reason(tmp_path: Path):
    job = make_job(tmp_path, experiment(["hardware", "b"]))
    run_batch(job)
    skipped = list(iter_records(job.output))
    assert {r["status"] for r in skipped} == {"skipped"}
    assert "needs a GPU, found none" in skipped[0]["error"]


def test_hang_is_cut_by_the_point_limit(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a", "hang", "b"]), point_s=1)
    run_batch(job)
    assert statuses(job.output) == [("a", "ok"), ("hang", "failed"), ("b", "ok")]
    failed = [r for r in iter_records(job.output) if r["status"] == "failed"][0]
    assert "did not finish within" in failed["error"]


def test_a_killed_driver_fails_its_point_and_the_rest_is_measured(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a", "b", "kill", "c"]))
    run_batch(job)
    # The killed point is failed (its torn line was never read as data); a and b were measured
    # once, c after the kill.
    assert statuses(job.output) == [("a", "ok"), ("b", "ok"), ("kill", "failed"), ("c", "ok")]
    assert "killed by signal SIGKILL" in list(iter_records(job.output))[2]["error"]
    assert len(calls(job)) == 3


def test_a_rerun_measures_every_point_again_and_keeps_the_old_records_as_history(tmp_path: Path):
    """What `--forcerun bench_batch`, a rebuilt driver or changed params make Snakemake do: run
    the job again (after deleting its output). Nothing of the first measurement is reused."""
    job = make_job(tmp_path, experiment(["a", "crash", "b"]))
    run_batch(job)
    first = list(iter_records(job.output))
    job.output.unlink()
    run_batch(job)
    second = list(iter_records(job.output))
    assert len(calls(job)) == 4  # a and b twice
    assert [r["stats"]["p50"] for r in second if r["status"] == "ok"] == [1.0, 1.0]
    history = sorted(job.history_dir.glob("*.published.jsonl"))
    assert len(history) == 2
    assert list(iter_records(history[0])) == first


def test_a_killed_job_resumes_keeping_only_ok_points_of_the_same_key(tmp_path, monkeypatch):
    job = make_job(tmp_path, experiment(["a", "crash", "b"]))
    killed_before_publishing(job, monkeypatch)
    assert len(calls(job)) == 2
    run_batch(job)
    # a and b were kept; the failed point was measured again (its cause may be gone).
    assert len(calls(job)) == 2
    assert statuses(job.output) == [("a", "ok"), ("crash", "failed"), ("b", "ok")]
    superseded = next(job.history_dir.glob("*.superseded.jsonl"))
    assert [r["status"] for r in iter_records(superseded)] == ["failed"]


@pytest.mark.parametrize("change", ["driver", "wait_ms", "point_s", "iters", "node"])
def test_a_changed_driver_timeouts_or_node_measures_kept_points_again(
    tmp_path, monkeypatch, change
):
    job = make_job(tmp_path, experiment(["a", "b"]))
    killed_before_publishing(job, monkeypatch)
    old = {r["point_id"]: r["measure_key"] for r in iter_records(job.partial)}
    if change == "driver":
        with open(job.build_dir / "bin/gicomm-bench-fake", "a") as f:
            f.write("# rebuilt\n")
    elif change == "iters":
        job = replace(job, experiment=replace(job.experiment, iters=6))
    elif change == "node":
        job = replace(job, hardware={**NO_GPU, "hostname": "elsewhere"})
    else:
        job = replace(job, **{change: getattr(job, change) + 1})
    run_batch(job)
    assert len(calls(job)) == 4
    new = {r["point_id"]: r["measure_key"] for r in iter_records(job.output)}
    assert all(new[p] != old[p] for p in old)
    assert all(r["stats"]["p50"] == 1.0 for r in iter_records(job.output))


def test_a_point_skipped_for_a_cause_that_is_gone_is_measured(tmp_path, monkeypatch):
    e = experiment(["a", "gpu"], needs_when=[({"behave": "gpu"}, {"gpus": 1})])
    job = make_job(tmp_path, e)
    killed_before_publishing(job, monkeypatch)
    assert sorted(r["status"] for r in iter_records(job.partial)) == ["ok", "skipped"]
    run_batch(replace(job, hardware=ONE_GPU))  # the GPU is back
    assert statuses(job.output) == [("a", "ok"), ("gpu", "ok")]


def test_bad_partial_lines_are_reported_and_their_points_measured_again(
    tmp_path, monkeypatch, capfd
):
    job = make_job(tmp_path, experiment(["a", "b", "c", "d"]))
    killed_before_publishing(job, monkeypatch)
    lines = job.partial.read_bytes().split(b"\n")
    lines.insert(2, b"garbage")  # sed -i '3i garbage'
    lines[3] = b'{"point_id": "\xff\xfe'  # point c's record, corrupted (not UTF-8)
    job.partial.write_bytes(b"\n".join(lines))
    capfd.readouterr()
    run_batch(job)
    err = capfd.readouterr().err
    assert "b0.jsonl:3: malformed JSON" in err
    assert "b0.jsonl:4: not UTF-8 text" in err
    assert statuses(job.output) == [("a", "ok"), ("b", "ok"), ("c", "ok"), ("d", "ok")]
    assert calls(job).count(job.points[2].point_id) == 2  # c measured again, a b d kept
    assert len(calls(job)) == 5
    rejected = next(job.history_dir.glob("*.rejected.txt")).read_text()
    assert "garbage" in rejected and "b0.jsonl:3" in rejected


@pytest.mark.parametrize(
    ("behave", "why"),
    [
        ("nan", "NaN is not a number JSON allows"),
        ("foreign", "a record of campaign 'other', not 'c'"),
        ("garbage", "malformed JSON"),
        ("badutf8", "not UTF-8 text"),
    ],
)
def test_an_invalid_record_from_the_driver_fails_its_point(tmp_path: Path, behave, why):
    job = make_job(tmp_path, experiment(["a", behave, "b"]))
    run_batch(job)
    recs = list(iter_records(job.output))
    assert [(behave_of(job, r["point_id"]), r["status"]) for r in recs] == [
        ("a", "ok"), (behave, "failed"), ("b", "ok")
    ]  # fmt: skip
    assert "the driver wrote an invalid record" in recs[1]["error"] and why in recs[1]["error"]
    assert ".driver.jsonl:2" in recs[1]["error"]


def test_a_record_written_twice_is_kept_once(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a", "dup"]))
    run_batch(job)
    assert statuses(job.output) == [("a", "ok"), ("dup", "ok")]


def test_a_driver_exiting_0_without_a_point_fails_that_point(tmp_path: Path):
    job = make_job(tmp_path, experiment(["silent", "b"]))
    run_batch(job)
    assert statuses(job.output) == [("silent", "failed"), ("b", "ok")]


def test_non_ascii_parameter_values_round_trip(tmp_path: Path):
    job = make_job(tmp_path, experiment(["\U0001f680", "b"]))
    run_batch(job)
    assert statuses(job.output) == [("\U0001f680", "ok"), ("b", "ok")]


def test_points_the_host_cannot_run_are_skipped_with_the_reason(tmp_path: Path):
    e = experiment(
        ["a", "gpu"], needs_when=[({"behave": "gpu"}, {"gpus": 2, "nvlink_peers": True})]
    )
    job = make_job(tmp_path, e)
    run_batch(job)
    assert statuses(job.output) == [("a", "ok"), ("gpu", "skipped")]
    skipped = [r for r in iter_records(job.output) if r["status"] == "skipped"][0]
    assert "needs 2 GPU(s), found 0" in skipped["error"]
    assert "NVLink" in skipped["error"]
    assert calls(job) == [p.point_id for p in expand_sweep("fake", {"behave": ["a"], "size": [8]})]


@pytest.mark.parametrize("how", ["deleted", "misspelled"])
def test_a_driver_missing_from_the_build_is_a_build_error(tmp_path: Path, how: str):
    if how == "deleted":
        job = make_job(tmp_path, experiment(["a"]))
        (job.build_dir / "bin/gicomm-bench-fake").unlink()
        name = "gicomm-bench-fake"
    else:
        job = make_job(tmp_path, experiment(["a"], driver="gicomm-bench-faek"))
        name = "gicomm-bench-faek"
    with pytest.raises(BuildError) as err:
        run_batch(job)
    assert f"bin/{name} does not exist: a build error" in str(err.value)
    assert not job.output.exists()


def test_a_second_live_writer_of_a_batch_is_refused(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a"]))
    job.partial.parent.mkdir(parents=True)
    holder = FileLock(job.side_file(".lock"))
    assert holder.try_acquire("the first bench job")
    try:
        with pytest.raises(LockHeld) as err:
            run_batch(job)
        assert "a second live writer of this batch is refused" in str(err.value)
        assert "the first bench job (pid" in str(err.value)
    finally:
        holder.release()
    run_batch(job)  # released: the batch runs
    assert statuses(job.output) == [("a", "ok")]


def test_job_on_a_node_without_the_declared_hardware_fails_early(tmp_path: Path):
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


def test_the_points_file_has_the_contract_shape(tmp_path: Path):
    e = experiment(["a"])
    e.sweeps["full"][0]["transport"] = ["mini-gda"]
    e.sweeps["full"][0]["nic_backend"] = ["softnic-cpu"]
    job = make_job(tmp_path, e)
    run_batch(job)
    (line,) = [json.loads(x) for x in (job.partial.parent / "points.seen").read_text().splitlines()]
    assert line["transport"] == "mini-gda" and line["nic_backend"] == "softnic-cpu"
    assert set(line) == {"point_id", "transport", "nic_backend", "params", "measure_key"}
    (rec,) = iter_records(job.output)
    assert line["measure_key"] == rec["measure_key"]
    assert rec["transport"] == "mini-gda" and rec["nic_backend"] == "softnic-cpu"
    assert set(rec["params"]) == {"behave", "size"}


def test_each_point_is_measured_on_its_own_nic_backend(tmp_path: Path):
    e = experiment(["a"])
    e.sweeps["full"][0]["nic_backend"] = ["softnic-cpu", "none"]
    job = make_job(tmp_path, e)
    run_batch(job)
    assert {r["nic_backend"] for r in iter_records(job.output)} == {"softnic-cpu", "none"}


def test_publishing_rechecks_the_whole_batch(tmp_path: Path):
    """A point without an outcome is an error at publication, never a silent gap."""
    from conftest import make_record

    expect = ledger.Expect("c1", "h1", "one_op", 0, {"p0": "0" * 16, "p1": "1" * 16})
    book = ledger.Ledger(tmp_path / "b0.jsonl", tmp_path / "history", expect)
    book.add("p0", [make_record()])
    with pytest.raises(RecordError, match="no outcome for point.*p1"):
        book.publish(tmp_path / "out.jsonl", ["p0", "p1"])
    assert not (tmp_path / "out.jsonl").exists()
