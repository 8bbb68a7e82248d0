"""NIC points on the emulated rdma-core and between two ranks: the campaign's `nic` section is
validated and resolved against the platform; the batch runner wraps a NIC point in gicomm-emu-run
only where the campaign asks and the node has no RDMA device, starts two ranks that meet at
127.0.0.1 (or one srun in a two-node allocation), reports a rank that exits non-zero or never
connects with its own words, never waits on a dead peer until the deadline, and keys the
measurement on the NIC and topology; a point whose path check failed is a failed point."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import REPO, make_record

from gicomm import ranks
from gicomm.aggregate import summarize_runs
from gicomm.bench import BatchJob, Plan, measure_key, run_batch
from gicomm.config import load_campaign
from gicomm.errors import ConfigError
from gicomm.experiments import Experiment
from gicomm.records import check_record, iter_records
from gicomm.tidy import tidy_frame

NO_NIC = {"provenance_id": "h-1", "hostname": "h", "gpus": {"devices": []}, "rdma": {"devices": []}}
WITH_NIC = {**NO_NIC, "rdma": {"devices": [{"name": "mlx5_0"}]}}
EMULATED = ranks.NicSetup(emulated=True, topology="two-rank")
FAKE_EMU_RUN = """#!/bin/sh
# the test's stand-in for gicomm-emu-run: marks the command as run on the emulation
while [ "$1" = --sysfs ]; do shift; done
[ "$1" = -- ] && shift
GICOMM_EMU_WRAPPED=1 exec "$@"
"""


# ---- the campaign's nic section ------------------------------------------------------------------
def campaign(nic: object = None, platform: str = "local", **spec: object) -> dict:
    cfg: dict = {"campaign": "t", "platform": platform, "experiments": ["proxy_msg_rate"]}
    if nic is not None:
        cfg["nic"] = nic
    if spec:
        base = json.loads(json.dumps(load_campaign(cfg).platform_spec))
        base["nodes"] = {**base["nodes"], **spec}
        cfg["platform_spec"] = base
    return cfg


@pytest.mark.parametrize(
    ("nic", "named"),
    [
        (
            {"topology": "ring"},
            "'nic.topology': value 'ring' is not allowed; allowed: 'auto', 'two-rank', 'loopback'",
        ),
        (
            {"emulated": "yes"},
            "'nic.emulated': value 'yes' has the wrong type; allowed: true or false",
        ),
        ({"emulate": True}, "unknown key(s) 'emulate' under 'nic'; allowed: emulated, topology"),
        ("emulated", "'nic': value 'emulated' has the wrong type; allowed: a mapping"),
    ],
)
def test_a_bad_nic_key_or_value_is_refused_by_name(nic: object, named: str):
    with pytest.raises(ConfigError) as err:
        load_campaign(campaign(nic))
    assert named in str(err.value), str(err.value)


def test_a_bad_local_ranks_value_is_refused_by_name():
    with pytest.raises(ConfigError) as err:
        load_campaign(campaign({"emulated": True}, local_ranks=3))
    assert "'platform_spec.nodes.local_ranks': value 3 is out of range (maximum 2)" in str(
        err.value
    )


def test_the_topology_follows_the_campaign_then_the_platform():
    assert load_campaign(campaign()).nic == ranks.NicSetup(
        False, None, load_campaign(campaign()).nic.why
    )
    assert "nodes.local_ranks: 2" in load_campaign(campaign()).nic.why
    assert load_campaign(campaign({"emulated": True})).nic == EMULATED
    assert load_campaign(campaign({}, local_ranks=2)).nic.topology == "two-rank"
    assert load_campaign(campaign({"topology": "loopback"})).nic.topology == "loopback"
    h200 = load_campaign(campaign({}, platform="h200"))
    assert h200.nic.topology == "two-rank" and not h200.nic.emulated


def test_the_emulated_nic_campaigns_load():
    from gicomm.config import load_campaign_file

    for name in ("h200x1-emulated-nic", "cpu-emulated-nic"):
        c = load_campaign_file(REPO / "config" / "campaigns" / f"{name}.yaml")
        assert c.nic == EMULATED, name


# ---- the batch runner ----------------------------------------------------------------------------
def experiment(behaviours: list[str], needs: dict | None = None) -> Experiment:
    return Experiment(
        name="fake", title="fake", paper_ref="", description="", driver="gicomm-bench-fakerank",
        needs=needs or {"gpus": 0, "rdma_nic": True}, needs_when=(), opt_in=False, point_s=None,
        repetitions=1, warmup=1, iters=5, metrics=("msg_rate",), points_per_job=100,
        sweeps={"full": [{"behave": behaviours, "nic_backend": ["verbs"]}]}, figure={},
        path=Path("fake.yaml"),
    )  # fmt: skip


def make_job(tmp_path: Path, e: Experiment, emu_run: bool = True, **kw) -> BatchJob:
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True, exist_ok=True)
    (build / "gicomm_build.json").write_text('{"cuda": false, "rdma": true}')
    shutil.copy(REPO / "tests/fixtures/fake_rank_driver.py", build / "bin" / e.driver)
    if emu_run:
        (build / "bin" / ranks.EMU_RUN).write_text(FAKE_EMU_RUN)
        (build / "bin" / ranks.EMU_RUN).chmod(0o755)
    return BatchJob(
        experiment=e, points=e.points(), campaign="c", host="h", platform="local", run_index=0,
        build_dir=build, hardware=kw.pop("hardware", NO_NIC), partial=tmp_path / "partial/b0.jsonl",
        history=tmp_path / "history/b0", output=tmp_path / "raw/b0.jsonl",
        point_s=kw.pop("point_s", 60), wait_ms=kw.pop("wait_ms", 100), nic=kw.pop("nic", EMULATED),
        **kw,
    )  # fmt: skip


def started(job: BatchJob, rank: int) -> dict:
    return json.loads((job.partial.parent / f"started.rank{rank}.json").read_text())


def test_two_emulated_ranks_measure_and_rank_0_writes_the_records(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a", "b"]))
    run_batch(job)
    recs = list(iter_records(job.output))
    assert [r["status"] for r in recs] == ["ok", "ok"]
    assert {(r["rdma_provider"], r["topology"]) for r in recs} == {("emulated", "two-rank")}
    r0, r1 = started(job, 0), started(job, 1)
    assert r0["wrapped"] == r1["wrapped"] == "1"  # both ranks under gicomm-emu-run
    assert r0["sysfs"] != r1["sysfs"]  # each emulated host its own counters
    for r, s in ((0, r0), (1, r1)):
        argv = s["argv"]
        flags = dict(zip(argv[::2], argv[1::2], strict=False))
        assert flags["--rank"] == str(r) and flags["--world-size"] == "2"
        assert flags["--rendezvous"] == "127.0.0.1"
        assert flags["--peer-timeout-ms"] == str(ranks.peer_timeout_ms(job.wait_ms))
    assert (
        r0["argv"][r0["argv"].index("--points") + 1] == r1["argv"][r1["argv"].index("--points") + 1]
    )
    out0, out1 = (s["argv"][s["argv"].index("--out") + 1] for s in (r0, r1))
    assert out0 != out1
    assert not any(p.exists() for p in ranks.rank_side_files(Path(out0)))  # nothing left behind


@pytest.mark.parametrize(
    ("rank1", "first", "words"),
    [
        # rank 1 dies at once: its own words, and its peer is not waited for until the limit
        ("crash", "rank 1", "cannot open device mlx5_0: No such device"),
        # rank 1 never connects: rank 0 gives up within its peer timeout, naming rank 1
        ("never", "rank 0", "rank 1 did not connect to 127.0.0.1:"),
    ],
)
def test_a_rank_that_dies_or_never_connects_fails_the_point_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rank1: str, first: str, words: str
):
    monkeypatch.setenv("FAKE_RANK1", rank1)
    job = make_job(tmp_path, experiment(["a"]), point_s=120)
    t0 = time.monotonic()
    run_batch(job)
    took = time.monotonic() - t0
    (rec,) = iter_records(job.output)
    assert rec["status"] == "failed"
    assert rec["error"].startswith(
        f"{first}: gicomm-bench-fakerank (under gicomm-emu-run) exited with code 1"
    ), rec["error"]
    assert words in rec["error"]
    bound = ranks.peer_timeout_ms(job.wait_ms) / 1000 + ranks.grace_s(job.wait_ms) + 15
    assert took < bound < 120, took  # never the point limit


def test_ranks_that_hang_together_are_cut_at_the_point_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("FAKE_RANK0", "hang")
    monkeypatch.setenv("FAKE_RANK1", "hang")
    job = make_job(tmp_path, experiment(["a"]), point_s=2)
    run_batch(job)
    (rec,) = iter_records(job.output)
    assert rec["status"] == "failed"
    assert (
        "gicomm-bench-fakerank (under gicomm-emu-run) did not finish within 2 s (the point limit)"
        in rec["error"]
    )


@pytest.mark.parametrize(
    ("provider", "status", "said"),
    [
        ("", "ok", "emulated"),  # a driver that notes no provider ran on the emulation all the same
        ("system rdma-core 50.0", "failed", "system rdma-core 50.0"),  # it contradicts how it ran
    ],
)
def test_a_record_of_an_emulated_run_never_passes_for_a_real_nics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, provider: str, status: str, said: str
):
    monkeypatch.setenv("FAKE_PROVIDER", provider)
    job = make_job(tmp_path, experiment(["a"]))
    run_batch(job)
    (rec,) = iter_records(job.output)
    assert (rec["status"], rec["rdma_provider"]) == (status, said)
    if status == "failed":
        assert rec["error"] == (
            "the driver ran over the emulated rdma-core (gicomm-emu-run), but its record says "
            "rdma_provider 'system rdma-core 50.0'"
        )


def test_without_the_key_a_nic_point_stays_not_measurable_here(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a"]), nic=ranks.NicSetup(False, "two-rank"))
    run_batch(job)
    (rec,) = iter_records(job.output)
    assert rec["status"] == "skipped"
    assert "needs an RDMA NIC (mlx5), found none" in rec["error"]
    assert not (job.partial.parent / "started.rank0.json").exists()


def test_the_emulation_asked_for_but_not_built_is_the_reason(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a"]), emu_run=False)
    run_batch(job)
    (rec,) = iter_records(job.output)
    assert rec["status"] == "skipped" and "no bin/gicomm-emu-run" in rec["error"]


def test_a_real_nic_is_used_as_it_is_and_one_rank_without_two_is_skipped(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a"]), hardware=WITH_NIC)
    run_batch(job)
    (rec,) = iter_records(job.output)
    assert rec["status"] == "ok" and rec["rdma_provider"] == "system rdma-core 50.0"
    assert started(job, 0)["wrapped"] is None
    nowhere = ranks.nic_setup({"topology": "auto"}, "local", {"nodes": {"per_job_max": 1}})
    job = make_job(tmp_path / "one", experiment(["a"]), hardware=WITH_NIC, nic=nowhere)
    run_batch(job)
    (rec,) = iter_records(job.output)
    assert rec["status"] == "skipped" and "nodes.local_ranks: 2" in rec["error"]


def test_loopback_is_one_process_that_says_so(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a"]), nic=ranks.NicSetup(True, "loopback"))
    run_batch(job)
    (rec,) = iter_records(job.output)
    assert rec["status"] == "ok" and rec["topology"] == "loopback"
    argv = started(job, 0)["argv"]
    assert "--rank" not in argv and argv[argv.index("--topology") + 1] == "loopback"
    assert started(job, 0)["sysfs"]  # the emulated port counters of its path proof


def test_a_failed_path_check_is_a_failed_point_never_aggregated(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a", "pathfail"]))
    run_batch(job)
    recs = {r["params"]["behave"]: r for r in iter_records(job.output)}
    assert recs["a"]["status"] == "ok" and recs["a"]["path_check"]["verdict"] == "ok"
    assert recs["pathfail"]["status"] == "failed"
    assert recs["pathfail"]["error"] == "path check failed: mlx5_0 port 1 sent 0 of 4096 bytes"
    tidy = tidy_frame(iter_records(job.output))
    assert list(tidy["path_check"]) == ["ok", "failed"]
    assert {"rdma_provider", "doorbell_target", "topology", "path_check_reason"} <= set(tidy)
    summary = summarize_runs(tidy)
    assert len(summary) == 1 and summary["path_check"].iloc[0] == "ok"
    assert summary[["rdma_provider", "topology"]].iloc[0].tolist() == ["emulated", "two-rank"]


def test_emulated_and_real_nic_values_are_never_one_series():
    recs = [
        check_record(make_record(nic_backend="mlx5", rdma_provider=p, run_index=r), "t")
        for p in ("emulated", "system rdma-core 50.0")
        for r in range(3)
    ]
    summary = summarize_runs(tidy_frame(recs))
    assert sorted(summary["rdma_provider"]) == ["emulated", "system rdma-core 50.0"]


def test_the_measure_key_changes_with_the_nic_and_the_topology(tmp_path: Path):
    job = make_job(tmp_path, experiment(["a"]))
    p = job.points[0]
    build = {"cuda": False}
    keys = {
        measure_key(job, p, Plan(program="gicomm-bench-fakerank", **kw), NO_NIC, build)
        for kw in (
            {"emulated": True, "topology": "two-rank"},
            {"emulated": False, "topology": "two-rank"},
            {"emulated": True, "topology": "loopback"},
        )
    }
    assert len(keys) == 3


def test_under_a_two_node_allocation_one_srun_starts_both_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    out = tmp_path / "b0.driver.jsonl"
    argv = ["drv", "--points", "p.jsonl"]
    (cmd,) = ranks.rank_commands([], argv, out, {}, "two-rank", emulated=False, wait_ms=2000)
    assert cmd.argv[:5] == ["srun", "--overlap", "--ntasks=2", "--ntasks-per-node=1", "--nodes=2"]
    assert cmd.argv[-2:] == ["--peer-timeout-ms", "10000"]
    # the per-task line: rank 0 writes the batch's output, rank 1 a file of its own
    script_at = cmd.argv.index("-c")
    shell = ["sh", "-c", *cmd.argv[script_at + 1 : script_at + 5], "echo"]
    for procid, want in (("0", out), ("1", ranks.rank_out(out, 1))):
        said = subprocess.run(shell, env={"SLURM_PROCID": procid}, capture_output=True, text=True)
        assert said.stdout.split() == ["--out", str(want)], said.stdout
    # the emulation's wire is local: emulated ranks stay two local processes under Slurm
    cmds = ranks.rank_commands([], argv, out, {}, "two-rank", emulated=True, wait_ms=2000)
    assert [c.rank for c in cmds] == [0, 1]


# ---- a campaign's own sweep, and the targets it builds -------------------------------------------
@pytest.mark.parametrize(
    ("sweeps", "named"),
    [
        ({"connection_scaling": {"active_qps": [64]}}, "'sweeps.connection_scaling': not an "
         "experiment of this campaign; allowed: proxy_msg_rate"),
        ({"proxy_msg_rate": {"qps": [1]}}, "'sweeps.proxy_msg_rate': unknown parameter 'qps'"),
        ({"proxy_msg_rate": {"nic_backend": ["mlx5"]}}, "'sweeps.proxy_msg_rate': parameter "
         "'nic_backend': value 'mlx5' is not allowed; allowed: 'softnic-cpu', 'none', 'verbs'"),
        ({"proxy_msg_rate": {"workers": 2}}, "'sweeps.proxy_msg_rate': 'workers': expected a "
         "non-empty list of values"),
        ({"proxy_msg_rate": []}, "'sweeps.proxy_msg_rate': value [] is not allowed; allowed: a "
         "mapping or a list"),
    ],
)  # fmt: skip
def test_a_campaign_sweep_is_checked_like_the_experiments_own(sweeps: dict, named: str):
    with pytest.raises(ConfigError) as err:
        load_campaign({**campaign(), "sweeps": sweeps})
    assert named in str(err.value), str(err.value)


def test_a_campaign_sweep_replaces_the_experiments_and_keeps_point_ids():
    from gicomm.experiments import point_id

    sweep = {"mode": ["rate"], "workers": [1], "rings": [1], "batch": [1], "nic_backend": ["verbs"]}
    c = load_campaign({**campaign({"emulated": True}), "sweeps": {"proxy_msg_rate": sweep}})
    (p,) = c.experiments["proxy_msg_rate"].points(c.sweep)
    assert p.point_id == point_id("proxy_msg_rate", {k: v[0] for k, v in sweep.items()})
    assert p.nic_backend == "verbs"


def test_only_the_targets_asked_for_are_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from gicomm import build

    calls: list[list[str]] = []

    def fake_run(argv, check=True, capture_output=False, text=False, **kw):
        calls.append(list(argv))
        listing = "The following are some of the valid targets:\n... all\n... gicomm_emu\n"
        return subprocess.CompletedProcess(argv, 0, stdout=listing if capture_output else "")

    monkeypatch.setattr(build.subprocess, "run", fake_run)
    build.build_native(Path("native"), tmp_path, False, "90", "Release", 4,
                       targets=["gicomm_emu", "gicomm-bench-baselines-nvshmem"])  # fmt: skip
    assert calls[-1][-5:] == ["--build", str(tmp_path), "-j", "4", "--target", "gicomm_emu"][-5:]
    assert "gicomm-bench-baselines-nvshmem" not in calls[-1]
