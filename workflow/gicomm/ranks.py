"""How a NIC point runs: on which NIC (the node's RDMA device, or gicomm's emulated rdma-core when
the campaign asks for it and the node has none), in which topology (two ranks, or one process
whose QPs loop back), and the command lines that start its ranks.

A NIC point is one whose NIC backend is mlx5 or verbs (the library baselines over a NIC included).
The campaign's `nic` section decides (config/README.md):

- `nic.emulated: true`: on a node without an RDMA device the point runs under
  `bin/gicomm-emu-run` (the emulated libibverbs/libmlx5 first on LD_LIBRARY_PATH); its records say
  `rdma_provider: emulated`. Without it such points stay skipped ("needs an RDMA NIC").
- `nic.topology`: `two-rank` (two processes: `srun` over two nodes inside a Slurm allocation of
  two nodes, else two local processes talking over 127.0.0.1), `loopback` (one process), or `auto`:
  two-rank where the platform has two nodes per job, asks for two local ranks, or the NIC is
  emulated (each process is an emulated host of its own); otherwise the point is skipped with the
  reason. The emulation's wire is local (Unix-domain sockets), so emulated ranks are always two
  local processes, also under Slurm.

Rank 0 writes the records; rank 1 gets the same points file and an output file of its own.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gicomm.labels import REAL_NIC_BACKENDS
from gicomm.process import Command

EMU_RUN = "gicomm-emu-run"
WORLD = 2
RENDEZVOUS_HOST = "127.0.0.1"
# Libraries that resolve /sys/class/infiniband/<dev>/device (NVSHMEM) get one from the wrapper.
NEEDS_SYSFS_LINK = ("nvshmem-ibgda", "nvshmem-ibrc")
# Libraries whose harness runs both PEs on one GPU on the emulated NIC when the node has only one
# (NVSHMEM's limited multi-process per GPU, P2P off): their points need one GPU there, and the
# runner starts a private MPS daemon so that the two PEs' kernels run at the same time
# (gicomm.mps; docs/nvshmem-on-emulated-nic.md says why).
SHARE_ONE_GPU = ("nvshmem-ibgda", "nvshmem-ibrc")
# NVSHMEM's settings on the emulated NIC (docs/nvshmem-on-emulated-nic.md says why each): the GPU
# cannot map an emulated UAR, so NVSHMEM's CPU rings the doorbell; a point that sets the knob keeps
# its own value. Emulated PEs are local processes: the unique-id bootstrap meets over loopback, and
# one emulated InfiniBand HCA serves both (the set-up the emulation's NVSHMEM check runs).
NVSHMEM_ON_EMULATION = {
    "NVSHMEM_IBGDA_NIC_HANDLER": "cpu_host_memory",
    "NVSHMEM_DISABLE_DATA_DIRECT": "1",
    "NVSHMEM_IB_GID_INDEX": "0",
    "NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME": "lo",
    "GICOMM_EMU_DEVICES": "mlx5_0:ib",
    "CUDA_MODULE_LOADING": "EAGER",
}


@dataclass(frozen=True)
class NicSetup:
    """The campaign's answer for NIC points: emulate when the node has no RDMA device, and the
    topology (None: no two ranks can be had here, `why` says so)."""

    emulated: bool = False
    topology: str | None = None
    why: str = ""

    def as_params(self) -> dict[str, Any]:
        return {"emulated": self.emulated, "topology": self.topology, "why": self.why}

    @staticmethod
    def from_params(d: dict[str, Any] | None) -> NicSetup:
        d = d or {}
        return NicSetup(bool(d.get("emulated")), d.get("topology"), str(d.get("why") or ""))


def nic_setup(nic: dict[str, Any], platform: str, platform_spec: dict[str, Any]) -> NicSetup:
    """Resolve the campaign's `nic` section (schema-validated) against its platform."""
    emulated = bool(nic.get("emulated", False))
    asked = nic.get("topology", "auto")
    if asked != "auto":
        return NicSetup(emulated, asked)
    nodes = platform_spec.get("nodes") or {}
    if int(nodes.get("per_job_max") or 1) >= WORLD or int(nodes.get("local_ranks") or 1) >= WORLD:
        return NicSetup(emulated, "two-rank")
    if emulated:
        return NicSetup(emulated, "two-rank")
    return NicSetup(
        emulated,
        None,
        f"NIC points run between two ranks, and platform {platform} gives one node per job and "
        "one rank per node (set the platform's nodes.local_ranks: 2 for two local processes, or "
        "the campaign's nic.topology: loopback for one process looping back on its own device)",
    )


# Library harnesses that also run as one PE per rank process under the launcher the native
# drivers use (srun across the two nodes of an allocation); on one node they fork their own PEs.
LAUNCHED_LIBRARIES = ("nvshmem-ibgda", "nvshmem-ibrc")


def library_topology(setup: NicSetup, transport: str | None, emulated: bool) -> str | None:
    """How a library harness's ranks start: one srun task per node (`two-rank`) when the campaign
    runs NIC points between two ranks on a real NIC inside a two-node allocation; else None (the
    harness forks its two PEs on this node, as on the emulated NIC, whose wire is local)."""
    two_nodes = setup.topology == "two-rank" and in_two_node_allocation()
    return "two-rank" if transport in LAUNCHED_LIBRARIES and not emulated and two_nodes else None


def is_nic_point(nic_backend: str | None) -> bool:
    return nic_backend in REAL_NIC_BACKENDS


def node_has_rdma(node: dict[str, Any]) -> bool:
    return bool((node.get("rdma") or {}).get("devices"))


def emulates(setup: NicSetup, nic_backend: str | None, node: dict[str, Any]) -> bool:
    """Does this point run on the emulated rdma-core on this node?"""
    return setup.emulated and is_nic_point(nic_backend) and not node_has_rdma(node)


def needs_here(
    needs: dict[str, Any],
    setup: NicSetup,
    nic_backend: str | None,
    node: dict[str, Any],
    transport: str | None = None,
) -> dict[str, Any]:
    """A point's needs on this node: the emulation stands in for the RDMA NIC it needs, and a
    library whose PEs can share a GPU there needs one GPU."""
    if not emulates(setup, nic_backend, node):
        return needs
    if transport in SHARE_ONE_GPU:
        return {**needs, "rdma_nic": False, "gpus": min(int(needs.get("gpus") or 0), 1)}
    return {**needs, "rdma_nic": False}


def shares_one_gpu(
    setup: NicSetup, transport: str | None, nic_backend: str | None, node: dict[str, Any]
) -> bool:
    """Do this point's two PEs share one GPU (an emulated NIC point of such a library on a node
    with fewer GPUs than ranks)? The runner then puts them under a private MPS daemon."""
    gpus = (node.get("gpus") or {}).get("devices") or []
    return transport in SHARE_ONE_GPU and emulates(setup, nic_backend, node) and len(gpus) < WORLD


# ---- command lines -------------------------------------------------------------------------------
def wrapper(bin_dir: Path, transport: str | None) -> list[str]:
    """The emulation's wrapper in front of a driver (with the sysfs link NVSHMEM resolves)."""
    return [str(bin_dir / EMU_RUN), *(["--sysfs"] if transport in NEEDS_SYSFS_LINK else []), "--"]


def emulation_env(transport: str | None, knob_env: dict[str, str]) -> dict[str, str]:
    if transport not in NEEDS_SYSFS_LINK:
        return {}
    return {k: v for k, v in NVSHMEM_ON_EMULATION.items() if k not in knob_env}


def free_port(host: str = RENDEZVOUS_HOST) -> int:
    """A TCP port free on `host` now (rank 0 listens on it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def rank_out(out: Path, rank: int) -> Path:
    """Rank 0 writes the batch's records; every other rank a file of its own beside it."""
    return out if rank == 0 else out.with_name(f"{out.stem}.rank{rank}{out.suffix}")


def in_two_node_allocation(environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    nodes = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or "0"
    return bool(env.get("SLURM_JOB_ID")) and nodes.isdigit() and int(nodes) >= WORLD


def local_ranks(
    wrap: list[str],
    argv: list[str],
    out: Path,
    port: int,
    env: dict[str, str],
    emulated: bool,
    peer_ms: int,
) -> list[Command]:
    """Two processes on this node, meeting at 127.0.0.1:`port`. `argv` ends without --out."""
    cmds = []
    for rank in range(WORLD):
        flags = ["--rank", str(rank), "--world-size", str(WORLD)]
        flags += ["--rendezvous", RENDEZVOUS_HOST, "--rendezvous-port", str(port)]
        flags += ["--peer-timeout-ms", str(peer_ms)]
        rank_env = counters_env(env, out, rank, emulated)
        cmds.append(
            Command([*wrap, *argv, "--out", str(rank_out(out, rank)), *flags], rank_env, rank)
        )
    return cmds


def counters_env(env: dict[str, str], out: Path, rank: int, emulated: bool) -> dict[str, str]:
    """On the emulation, each process keeps its own sysfs-like view: the port counters its path
    proof reads (GICOMM_EMU_SYSFS_DIR)."""
    if not emulated:
        return env
    return {**env, "GICOMM_EMU_SYSFS_DIR": str(out.with_name(f"{out.stem}.rank{rank}.sysfs"))}


# srun gives every task the same command line: the task's rank picks its output file.
_PER_RANK_OUT = 'if [ "${SLURM_PROCID:-0}" = 0 ]; then o="$1"; else o="$2"; fi; shift 2; '
_PER_RANK_OUT += 'exec "$@" --out "$o"'


def srun_ranks(
    wrap: list[str], argv: list[str], out: Path, env: dict[str, str], peer_ms: int
) -> Command:
    """One task per node of the job's allocation; the drivers' launcher reads SLURM_PROCID,
    SLURM_NTASKS and SLURM_NODELIST (rank 0's node is the rendezvous)."""
    # --overlap: a step of its own beside the job's step that runs this runner
    srun = ["srun", "--overlap", f"--ntasks={WORLD}", "--ntasks-per-node=1", f"--nodes={WORLD}"]
    srun += ["--kill-on-bad-exit=1", "sh", "-c", _PER_RANK_OUT, "gicomm-rank"]
    srun += [str(rank_out(out, 0)), str(rank_out(out, 1))]
    return Command([*srun, *wrap, *argv, "--peer-timeout-ms", str(peer_ms)], env, None)


def rank_commands(
    wrap: list[str], argv: list[str], out: Path, env: dict[str, str], topology: str | None,
    emulated: bool, wait_ms: int, port: int | None = None,
) -> list[Command]:  # fmt: skip
    """The processes that run a batch's points in `topology` (`argv` is the driver's command line
    without --out): two ranks; one process whose NIC points loop back on its own device
    (--topology loopback); or one process (points without a NIC)."""
    peer_ms = peer_timeout_ms(wait_ms)
    if topology == "loopback":
        loop = [*wrap, *argv, "--out", str(out), "--topology", "loopback"]
        return [Command(loop, counters_env(env, out, 0, emulated), None)]
    if topology != "two-rank":
        return [Command([*wrap, *argv, "--out", str(out)], env, None)]
    if not emulated and in_two_node_allocation():
        return [srun_ranks(wrap, argv, out, env, peer_ms)]
    return local_ranks(wrap, argv, out, port or free_port(), env, emulated, peer_ms)


def peer_timeout_ms(wait_ms: int) -> int:
    """How long a rank waits for its peer to connect and answer (--peer-timeout-ms): the peer's
    start-up (CUDA, the NIC's queues) on top of the campaign's bound on every wait."""
    return max(10_000, 5 * wait_ms)


def grace_s(wait_ms: int) -> float:
    """How long the other rank may still run once one has ended: its teardown, or its own bounded
    wait for the peer that ended."""
    return 10.0 + peer_timeout_ms(wait_ms) / 1000.0


def rank_side_files(out: Path) -> list[Path]:
    """What the ranks leave beside rank 0's output: the other ranks' outputs, the emulated
    sysfs views."""
    return [rank_out(out, r) for r in range(1, WORLD)] + [
        out.with_name(f"{out.stem}.rank{r}.sysfs") for r in range(WORLD)
    ]


def launcher_of(topology: str | None, emulated: bool) -> str:
    """What starts the ranks, for the measure key (a point measured otherwise is measured again)."""
    if topology != "two-rank":
        return "one process"
    return "srun" if not emulated and in_two_node_allocation() else "local processes"
