"""NVSHMEM's library baselines on the emulated NIC with two PEs on one GPU: what they need there
(one GPU), the private MPS daemon the runner starts for them (started before the harness, listening
while it runs, stopped and removed after, bounded when it will not start or will not quit), the
measure key that keeps MPS runs apart, and the campaign that runs them."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from test_baselines import point, run_library_points

from gicomm import mps, ranks
from gicomm.ranks import NicSetup

REPO = Path(__file__).resolve().parents[1]
EMULATED = NicSetup(emulated=True, topology="two-rank")
NO_NIC_ONE_GPU = {"gpus": {"devices": [{"name": "H200"}]}}
NO_NIC_TWO_GPUS = {"gpus": {"devices": [{"name": "H200"}, {"name": "H200"}]}}

# A stand-in for nvidia-cuda-mps-control: `-f` is the daemon (its pid noted in FAKE_MPS_PIDS, a
# control FIFO in its pipe directory, a line in its log, until `quit` arrives); without arguments
# it reads a command on stdin. FAKE_MPS_DEAF: the daemon ignores quit; FAKE_MPS_MUTE: it never
# makes its control pipe.
FAKE_MPS = """#!/usr/bin/env python3
import os, sys, time
pipe = os.environ["CUDA_MPS_PIPE_DIRECTORY"]
if sys.argv[1:] == ["-f"]:
    with open(os.environ["FAKE_MPS_PIDS"], "a") as f:
        f.write(f"{os.getpid()}\\n")
    if not os.environ.get("FAKE_MPS_MUTE"):
        os.mkfifo(os.path.join(pipe, "control"))
    with open(os.path.join(os.environ["CUDA_MPS_LOG_DIRECTORY"], "control.log"), "w") as f:
        f.write("fake daemon up\\n")
    while not os.path.exists(os.path.join(pipe, "quit")):
        time.sleep(0.02)
    sys.exit(0)
if sys.stdin.read().strip() == "quit" and not os.environ.get("FAKE_MPS_DEAF"):
    open(os.path.join(pipe, "quit"), "w").close()
"""


@pytest.fixture
def fake_mps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in first on PATH; returns the file of the daemons' pids."""
    bin_dir = tmp_path / "mps-bin"
    bin_dir.mkdir()
    (bin_dir / mps.CONTROL).write_text(FAKE_MPS)
    (bin_dir / mps.CONTROL).chmod(0o755)
    pids = tmp_path / "mps.pids"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MPS_PIDS", str(pids))
    return pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
    except (OSError, IndexError):
        return "Z"


# ---- what the points need, and when the runner wants MPS ---------------------------------------
def test_nvshmem_needs_one_gpu_only_on_the_emulated_nic():
    needs = {"gpus": 2, "rdma_nic": True, "cuda_build": True}
    for t in ranks.SHARE_ONE_GPU:
        assert ranks.needs_here(needs, EMULATED, "mlx5", NO_NIC_ONE_GPU, t) == {
            "gpus": 1, "rdma_nic": False, "cuda_build": True}  # fmt: skip
    # other libraries keep their two GPUs; a real NIC keeps everything
    assert ranks.needs_here(needs, EMULATED, "mlx5", NO_NIC_ONE_GPU, "nccl-gin-gdaki")["gpus"] == 2
    real = {**NO_NIC_ONE_GPU, "rdma": {"devices": [{"name": "mlx5_0"}]}}
    assert ranks.needs_here(needs, EMULATED, "mlx5", real, "nvshmem-ibgda") == needs
    assert ranks.needs_here(needs, NicSetup(), "mlx5", NO_NIC_ONE_GPU, "nvshmem-ibgda") == needs


def test_mps_only_where_two_pes_share_one_gpu():
    assert ranks.shares_one_gpu(EMULATED, "nvshmem-ibrc", "mlx5", NO_NIC_ONE_GPU)
    assert not ranks.shares_one_gpu(EMULATED, "nvshmem-ibrc", "mlx5", NO_NIC_TWO_GPUS)
    assert not ranks.shares_one_gpu(EMULATED, "nccl-gin-proxy", "mlx5", NO_NIC_ONE_GPU)
    assert not ranks.shares_one_gpu(NicSetup(), "nvshmem-ibgda", "mlx5", NO_NIC_ONE_GPU)


# ---- the daemon --------------------------------------------------------------------------------
def test_the_daemon_listens_in_a_private_directory_and_is_gone_after(fake_mps):
    d = mps.start()
    assert d.proc is not None, d.why
    pipe = Path(d.env["CUDA_MPS_PIPE_DIRECTORY"])
    assert (pipe / "control").exists() and pipe.parent.name.startswith("gicomm-mps-")
    assert Path(d.env["CUDA_MPS_LOG_DIRECTORY"]).parent == pipe.parent
    assert mps.stop(d) == ""  # it quit when told
    assert not pipe.parent.exists() and not alive(d.proc.pid)


def test_a_daemon_that_will_not_quit_is_killed_within_the_bound(fake_mps, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_DEAF", "1")
    d = mps.start()
    assert d.proc is not None
    assert mps.stop(d, timeout_s=0.5) == "did not quit within 0.5 s: killed"
    assert not alive(d.proc.pid) and d.root is not None and not d.root.exists()


def test_a_daemon_that_never_listens_is_given_up_and_stopped(fake_mps, monkeypatch):
    monkeypatch.setenv("FAKE_MPS_MUTE", "1")
    d = mps.start(timeout_s=0.5)
    assert d.proc is None
    assert "made no control pipe" in d.why and "within 0.5 s" in d.why
    assert "control.log: fake daemon up" in d.why
    (pid,) = [int(x) for x in fake_mps.read_text().split()]
    assert not alive(pid)


def test_without_the_control_program_the_block_runs_without_mps(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there
    said: list[str] = []
    with mps.running(True, said.append) as env:
        assert env == {}
    assert said and "nvidia-cuda-mps-control is not on PATH" in said[0]
    assert "records: mps off" in said[0]


# ---- through the batch runner ------------------------------------------------------------------
def run_emulated(tmp_path, monkeypatch, points, hardware):
    seen = tmp_path / "env.seen"
    recs = run_library_points(tmp_path, monkeypatch, points, None, {"FAKE_ENV_SEEN": str(seen)},
                              True, EMULATED, hardware)  # fmt: skip
    return recs, [json.loads(line) for line in seen.read_text().splitlines()]


def test_the_runner_puts_two_pes_on_one_gpu_under_a_private_mps_daemon(
    tmp_path, monkeypatch, fake_mps
):
    points = [point("nvshmem-ibgda", op="put", size=8), point("nvshmem-ibrc", op="p", size=8)]
    recs, runs = run_emulated(tmp_path, monkeypatch, points, NO_NIC_ONE_GPU)
    assert [r["status"] for r in recs] == ["ok", "ok"], recs
    assert {r["rdma_provider"] for r in recs} == {"emulated"}
    # one harness process per transport, each under its own daemon, listening while it ran
    assert len(runs) == 2
    assert all(r["mps_control_listening"] is True for r in runs), runs
    dirs = {r["CUDA_MPS_PIPE_DIRECTORY"] for r in runs}
    assert len(dirs) == 2
    # stopped and removed after: no daemon, no directory left
    pids = [int(x) for x in fake_mps.read_text().split()]
    assert len(pids) == 2 and not any(alive(p) for p in pids)
    assert not any(Path(d).exists() for d in dirs)


def test_one_pe_per_gpu_needs_no_mps(tmp_path, monkeypatch, fake_mps):
    recs, runs = run_emulated(
        tmp_path, monkeypatch, [point("nvshmem-ibgda", op="put", size=8)], NO_NIC_TWO_GPUS
    )
    assert [r["status"] for r in recs] == ["ok"]
    assert runs and all("CUDA_MPS_PIPE_DIRECTORY" not in r for r in runs)
    assert not fake_mps.exists()  # no daemon was started


def test_mps_is_part_of_what_a_point_is_measured_under(tmp_path):
    from test_nic_ranks import experiment, make_job

    from gicomm.bench import Plan, measure_key

    job = make_job(tmp_path, experiment(["ok"]))
    p = job.points[0]
    build = {"cuda": True}
    plain = Plan(program="gicomm-bench-fakerank", emulated=True)
    under_mps = replace(plain, mps=True)
    assert measure_key(job, p, plain, {}, build) != measure_key(job, p, under_mps, {}, build)


# ---- the report's NIC paths and the claims, from synthetic records of such a run ------------------
def path_check(verdict: str = "ok", moved: int = 300_000) -> dict:
    """The path proof as gicomm-bench-baselines-nvshmem records it (support/path_proof.cpp): rank
    0's port and what it moved against the point's claim, rank 1's bytes, why that device."""
    reason = "" if verdict == "ok" else (
        "path check failed: the point claims ... on the configured mlx5_0 port 1, whose counters "
        "moved 1000 tx bytes (claimed at least 224704); no other port carried it either")  # fmt: skip
    return {
        "device": "mlx5_0",
        "port": 1,
        "verdict": verdict,
        "expected_bytes": 224_704,
        "expected_packets": 28_088,
        "tx_bytes": moved,
        "rx_bytes": 1_760,
        "peer_tx_bytes": 1_760,
        "peer_rx_bytes": moved,
        "reason": reason,
        "device_choice": "the first device rdma-core lists whose name begins with "
        "NVSHMEM_HCA_PREFIX mlx5, port 1; NVSHMEM_HCA_LIST=mlx5_0:1 set so that NVSHMEM uses it",
        "nic": {"host": "h1", "device": "mlx5_0", "port": 1, "fw_ver": "gicomm-emu 1.0"},
        "local": {"ok": verdict == "ok", "device": "mlx5_0", "port": 1, "claim": {}, "moved": []},
    }


def nvshmem_records(runs: int = 5, failed_path: tuple[str, str] | None = None):
    """Tidy records of the campaign's library_baselines points as the harness writes them on the
    emulation: NVSHMEM IBGDA and IBRC, put and p of 8 B, two PEs on one GPU under MPS, each with
    its path proof (and peer); `failed_path` (transport, op): that point's counters fell short.
    Read as the pipeline reads records (schema-checked; a failed path check fails the point)."""
    from conftest import make_record

    from gicomm.records import parse_line
    from gicomm.tidy import tidy_frame

    recs = []
    for run in range(runs):
        for t, rtt in (("nvshmem-ibgda", 120_000.0), ("nvshmem-ibrc", 90_000.0)):
            for op in ("put", "p"):
                short = failed_path == (t, op)
                for metric, v in (
                    ("issue_ns", 3800.0),
                    ("completion_ns", 52_000.0),
                    ("rtt_ns", rtt),
                ):
                    check = path_check("failed" if short else "ok", 1_000 if short else 300_000)
                    line = make_record(
                        experiment="library_baselines", transport=t, nic_backend="mlx5",
                        point_id=f"{t}-{op}", metric=metric, run_index=run, rdma_provider="emulated",
                        topology="two-rank", stats={"n": 2000, "p50": v},
                        params={"op": op, "size": 8, "pes_per_gpu": 2, "mps": "on"},
                        path_check=check,
                        peer={"rank": 1, "host": "h1", "nic": None, "path": {"ok": True}},
                    )  # fmt: skip
                    if short:  # the harness fails the point itself, keeping its values
                        line |= {"status": "failed", "error": f"path check: {check['reason']}"}
                    recs.append(
                        parse_line(json.dumps(line).encode(), f"rank0.jsonl:{len(recs) + 1}")
                    )
    return tidy_frame(recs)


def test_the_nic_paths_page_shows_nvshmem_ran_on_the_emulated_nic_with_its_numbers():
    from gicomm.aggregate import summarize_runs
    from gicomm.nicpaths import emulated_values, nic_paths

    records = nvshmem_records(runs=1)
    paths = nic_paths(records).set_index("transport")
    for t in ("nvshmem-ibgda", "nvshmem-ibrc"):
        row = paths.loc[t]
        assert (row["ran on"], row["rdma_provider"], row["topology"]) == (
            "emulated NIC", "emulated", "two-rank")  # fmt: skip
        # the harness's own path proof, no longer "not recorded"
        assert (row["points ok"], row["points failed"], row["counter check"]) == (2, 0, "2 ok")
    values = emulated_values(summarize_runs(records))
    assert set(values["where"]) == {
        "ran on the emulated NIC (emulated rdma-core: not real-NIC numbers)"
    }
    rtt = values[(values["transport"] == "nvshmem-ibgda") & (values["metric"] == "rtt_ns")]
    assert set(rtt["op"]) == {"put", "p"} and set(rtt["p50"]) == {120_000.0}
    # how the PEs were placed is shown beside each value
    assert set(values["pes_per_gpu"]) == {2} and set(values["mps"]) == {"on"}


def test_a_library_point_whose_counters_fell_short_is_failed_and_never_averaged_in():
    from gicomm.aggregate import summarize_runs
    from gicomm.nicpaths import nic_paths

    records = nvshmem_records(runs=1, failed_path=("nvshmem-ibrc", "put"))
    bad = records[records["point_id"] == "nvshmem-ibrc-put"]
    assert set(bad["status"]) == {"failed"}
    assert all(
        e.startswith("path check: path check failed: the point claims") for e in bad["error"]
    )
    assert set(bad["path_check_device"]) == {"mlx5_0"}
    row = nic_paths(records).set_index("transport").loc["nvshmem-ibrc"]
    assert (row["points ok"], row["points failed"], row["counter check"]) == (
        1,
        1,
        "1 failed, 1 ok",
    )
    summary = summarize_runs(records)
    assert summary[(summary["transport"] == "nvshmem-ibrc") & (summary["param_op"] == "put")].empty


def test_emulated_nvshmem_values_never_decide_the_papers_nvshmem_claims():
    from test_claims import _verdict

    from gicomm.claims import NOT_MEASURABLE

    records = nvshmem_records(runs=5)  # enough runs: only the NIC keeps them from a verdict
    for claim in ("t3-nvshmem-rtt", "t3-nvshmem-vs-minigda-issue"):
        row = _verdict(records, claim)
        assert row["verdict"] == NOT_MEASURABLE, (claim, row["reason"])
    row = _verdict(records, "t3-nvshmem-rtt")
    assert "needs an mlx5 NIC" in row["reason"] and "mlx5 (emulated NIC)" in row["reason"]


# ---- on two nodes: one srun task per node, each a PE of its own ----------------------------------
def test_nvshmem_runs_one_pe_per_node_under_a_two_node_allocation(monkeypatch):
    two = NicSetup(emulated=False, topology="two-rank")
    # one node: the harness forks its two PEs there
    assert ranks.library_topology(two, "nvshmem-ibgda", emulated=False) is None
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    for t in ("nvshmem-ibgda", "nvshmem-ibrc"):
        assert ranks.library_topology(two, t, emulated=False) == "two-rank"
    # the emulation's wire is local, other libraries start their own ranks, loopback is one node
    assert ranks.library_topology(two, "nvshmem-ibgda", emulated=True) is None
    assert ranks.library_topology(two, "nccl-gin-gdaki", emulated=False) is None
    loop = NicSetup(emulated=False, topology="loopback")
    assert ranks.library_topology(loop, "nvshmem-ibgda", emulated=False) is None


def test_the_runner_plans_nvshmem_points_as_srun_ranks_on_two_nodes(tmp_path, monkeypatch):
    from test_baselines import HARNESS, LIBRARY_BASELINES, fake_sysfs

    from gicomm.bench import BatchJob, plan_points
    from gicomm.experiments import load_experiment

    e = replace(load_experiment(LIBRARY_BASELINES), needs={"gpus": 0}, needs_when=())
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    (build / "bin" / HARNESS).write_text("")
    monkeypatch.setenv("GICOMM_SYSFS_ROOT", str(fake_sysfs(tmp_path / "sys", {"mlx5_0": "ACTIVE"})))
    monkeypatch.setenv("GICOMM_BASELINES_DIR", str(tmp_path / "no-builds"))
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    ibgda = point("nvshmem-ibgda", op="put", size=8)
    job = BatchJob(
        experiment=e, points=[ibgda], campaign="c", host="h", platform="local", run_index=0,
        build_dir=build, hardware={"provenance_id": "p", "hostname": "h"},
        partial=tmp_path / "partial/b0.jsonl", output=tmp_path / "raw/b0.jsonl",
        nic=NicSetup(emulated=False, topology="two-rank"),
    )  # fmt: skip
    node = {"rdma": {"devices": [{"name": "mlx5_0"}]}, "gpus": {"devices": [{"name": "H200"}]}}
    plan = plan_points(job, node, {"cuda": True})[ibgda.point_id]
    assert (plan.program, plan.topology, plan.emulated) == (HARNESS, "two-rank", False), plan
    (cmd,) = ranks.rank_commands([], [plan.program], job.output, {}, plan.topology, False, 2000)
    assert cmd.argv[0] == "srun" and "--ntasks-per-node=1" in cmd.argv
    assert ranks.launcher_of(plan.topology, plan.emulated) == "srun"
