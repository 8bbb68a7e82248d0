"""The two-rank launcher and out-of-band exchange (native/src/net) as a cluster starts them.

gicomm-pair-check --nic none runs the launcher and the exchange without RDMA, so every path can be
exercised here: a two-node srun step simulated on this host (the environment srun gives each task
of `srun -N2 -n2 --ntasks-per-node=1`, both node names resolving to this machine: the same code
path as two nodes), a real `srun -n2` on the one-node test cluster (tests/slurm/setup.sh), the
expansion of Slurm host lists against `scontrol show hostnames`, and the two-node sbatch options
the platform files produce, by `sbatch --test-only` (accepted but for the second node this cluster
does not have). The RDMA half runs against Soft-RoCE in tools/softroce (make test's last step).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, current_build_with

TARGET = "gicomm-pair-check"


@pytest.fixture(scope="module")
def pair_check(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return current_build_with(tmp_path_factory, TARGET) / "bin" / TARGET


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def srun_task_env(rank: int, nodes: list[str], job_id: int = 777) -> dict[str, str]:
    """What srun -N2 -n2 --ntasks-per-node=1 sets in task `rank` (the variables the launcher reads)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "OMPI_", "GICOMM_"))}
    env.update(
        SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_STEP_NUM_TASKS="2",
        SLURM_JOB_NODELIST=",".join(nodes), SLURM_STEP_NODELIST=",".join(nodes),
        SLURM_STEP_TASKS_PER_NODE="1(x2)", SLURM_JOB_ID=str(job_id), SLURM_STEP_ID="0",
        SLURMD_NODENAME=nodes[rank],
    )  # fmt: skip
    return env


def run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> Any:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_two_node_srun_step_resolves_rank0_host_and_port(pair_check: Path):
    for rank in (0, 1):
        out = run([str(pair_check), "--print-launch"], srun_task_env(rank, ["gpu-a07", "gpu-b12"]))
        assert out.returncode == 0, out.stderr
        (launch,) = json_lines(out.stdout)
        assert launch["launcher"] == "slurm" and launch["rank"] == rank and launch["world"] == 2
        assert launch["rendezvous"] == f"gpu-a07:{15000 + (777 * 16) % 15000}"
        assert launch["rank_hosts"] == ["gpu-a07", "gpu-b12"]


def test_two_node_code_path_on_one_host(pair_check: Path):
    """Both ranks through the Slurm path of a two-node step, node names that reach this host."""
    nodes = ["localhost", socket.gethostname().split(".")[0]]
    cmd = [str(pair_check), "--nic", "none", "--rendezvous-port", str(free_port())]
    procs = [
        subprocess.Popen(
            cmd,
            env=srun_task_env(rank, nodes),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        (line,) = json_lines(out)
        assert line["ok"] and line["launcher"] == "slurm"
    assert json_lines(outs[1][0])[0]["rendezvous"].startswith("localhost:")


def test_rank0_refuses_a_nodelist_that_puts_it_elsewhere(pair_check: Path):
    env = srun_task_env(0, ["nodea", "nodeb"])
    env["SLURMD_NODENAME"] = "nodeb"
    out = run([str(pair_check), "--print-launch"], env)
    assert out.returncode == 2
    assert "Slurm placed rank 0 on nodeb" in out.stderr and "--rendezvous HOST" in out.stderr


def test_mpirun_environment_needs_a_rendezvous(pair_check: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "GICOMM_"))}
    env.update(OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="2")
    out = run([str(pair_check), "--print-launch"], env)
    assert out.returncode == 2 and "mpirun -x GICOMM_RENDEZVOUS" in out.stderr
    env["GICOMM_RENDEZVOUS"] = "node01:18000"
    out = run([str(pair_check), "--print-launch"], env)
    (launch,) = json_lines(out.stdout)
    assert launch["launcher"] == "openmpi" and launch["rendezvous"] == "node01:18000"


# ---------------------------------------------------------------- on the one-node Slurm cluster
def test_srun_two_tasks_meet(slurm_cluster: str, pair_check: Path):
    out = run(
        ["srun", "-N1", "-n2", "--account=gicomm", str(pair_check), "--nic", "none", "--timeout-ms", "30000"],
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    lines = sorted(json_lines(out.stdout), key=lambda r: r["rank"])
    assert [r["rank"] for r in lines] == [0, 1]
    assert all(r["ok"] and r["launcher"] == "slurm" and r["world"] == 2 for r in lines)
    assert lines[0]["rendezvous"] == lines[1]["rendezvous"]
    assert lines[0]["peer_pid"] != lines[1]["peer_pid"]


HOSTLISTS = [
    "node1",
    "gpu[01-03,7],login1",
    "n[8-10]",
    "r[1-2]n[1-2]",
    "x-[0001-0002],y[3]",
    "c[1-2,4]-[5-6]",
]


@pytest.mark.parametrize("hostlist", HOSTLISTS)
def test_hostlist_expansion_matches_scontrol(slurm_cluster: str, pair_check: Path, hostlist: str):
    expected = run(["scontrol", "show", "hostnames", hostlist]).stdout.split()
    env = srun_task_env(0, ["a", "b"])
    env.update(SLURM_STEP_NODELIST=hostlist, SLURM_STEP_TASKS_PER_NODE=f"1(x{len(expected)})",
               SLURM_NTASKS=str(len(expected)), SLURM_STEP_NUM_TASKS=str(len(expected)),
               SLURMD_NODENAME=expected[0])  # fmt: skip
    out = run([str(pair_check), "--print-launch"], env)
    assert out.returncode == 0, out.stderr
    assert json_lines(out.stdout)[0]["rank_hosts"] == expected


def test_two_node_sbatch_options_dry_run(slurm_cluster: str, tmp_path: Path):
    """The sbatch line a two-node point's job gets (a paper platform's file adapted to this cluster,
    built by the Slurm executor plugin) passes `sbatch --test-only` except for the second node."""
    from test_profiles import sbatch_call

    from gicomm.slurm import slurm_resources

    spec = yaml.safe_load((REPO / "config/platforms/h200.yaml").read_text())["platform_spec"]
    spec["slurm"] = dict(
        spec["slurm"], partition="debug", account="gicomm", constraint=None, gpu_resource="none",
        cpus_per_task=1, mem_mb=500,
    )  # fmt: skip
    args = shlex.split(sbatch_call(slurm_resources(spec, "gpu", nodes=2)))
    assert args[0] == "sbatch" and "--nodes=2" in args and "--ntasks-per-node=1" in args
    args = [a for a in args[1:] if a != "--parsable"]
    args[args.index("-D") + 1] = str(tmp_path)
    args[args.index("--output") + 1] = str(tmp_path / "%j.log")
    wrap = ["--test-only", f"--wrap=srun {TARGET} --nic none"]
    two = run(["sbatch", *args, *wrap])
    assert two.returncode != 0
    assert "Requested node configuration is not available" in two.stderr, two.stderr
    one_node = {"--nodes=2": "--nodes=1", "--ntasks-per-node=1": "--ntasks-per-node=2"}
    one = [one_node.get(a, a) for a in args]  # the same job on the one node there is
    assert "to start at" in run(["sbatch", *one, *wrap]).stderr
