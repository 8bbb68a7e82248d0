"""The doctor's own short run: the floors experiment (reduced sweep) and, where no campaign of this
host kind exists, the few reduced points the verdicts judge, each in independent process runs with
the drivers of a native build. Records land as a campaign's raw files would
(<campaign>/raw/<experiment>/<host>/run<i>.jsonl), so the same-run floor join applies. The NIC
floors are a step of their own: one process whose QPs loop back on its device, or two ranks (two
local processes, or srun across the two nodes of a Slurm allocation: gicomm.ranks starts them as
the pipeline does)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gicomm import REPO_ROOT, ranks
from gicomm.bench import point_line
from gicomm.experiments import Point, load_experiment, point_id
from gicomm.process import Command, first_failure, run_group

FLOORS_YAML = REPO_ROOT / "config" / "experiments" / "floors.yaml"
POINT_TIMEOUT_S = 120  # one driver process (a few points); every GPU wait inside is --timeout-ms
NIC_FLOORS = {"mlx5": ("nic_loopback",), "verbs": ("nic_verbs",)}  # what each NIC backend measures


@dataclass(frozen=True)
class Step:
    driver: str
    experiment: str
    points: tuple[Point, ...]
    iters: int


def _points(experiment: str, rows: Iterable[dict[str, Any]]) -> tuple[Point, ...]:
    return tuple(Point(point_id(experiment, r), r) for r in rows)


def floors_step(iters: int, nic_apart: bool = False) -> Step:
    """The floors experiment's reduced sweep; `nic_apart`: without its NIC points (measured by
    nic_floors_step). On a host without a NIC those are skipped records saying so."""
    points = load_experiment(FLOORS_YAML).points("reduced")
    if nic_apart:
        points = [p for p in points if p.nic_backend not in NIC_FLOORS]
    return Step("gicomm-bench-floors", "floors", tuple(points), iters)


def nic_floors_step(iters: int, nics: Sequence[str]) -> Step:
    """The NIC floors through each backend of `nics`: mlx5 (a GPU thread's writes through
    mini-gda, and the UAR doorbell's answer), verbs (a CPU thread's writes through rdma-core)."""
    rows: list[dict[str, Any]] = []
    for nic in nics:
        if nic not in NIC_FLOORS:
            raise ValueError(f"NIC backend {nic!r}: allowed {sorted(NIC_FLOORS)}")
        rows += [{"floor": f, "nic_backend": nic} for f in NIC_FLOORS[nic]]
        if nic == "mlx5":
            rows.append({"floor": "wqe_doorbell", "target": "uar", "nic_backend": nic})
    return Step("gicomm-bench-floors", "floors", _points("floors", rows), iters)


def proxy_step(numa_node: int, iters: int) -> Step:
    """mini-proxy's tuned enqueue: one op outstanding, and the round trip; the workers pinned to
    `numa_node`."""
    rows = [
        {"mode": "issue", "enqueue": "tuned", "workers": 1, "rings": 1, "state": "warm"},
        {"mode": "pingpong", "enqueue": "tuned", "workers": 2, "rings": 2, "state": "warm"},
    ]
    pts = _points("proxy_one_op", [r | {"numa_node": numa_node} for r in rows])
    return Step("gicomm-bench-proxy", "proxy_one_op", pts, iters)


def gda_step(iters: int) -> Step:
    """mini-gda's one op on the softnic cpu engine (one GPU is enough), gpu_fence, inline."""
    rows = [{"variant": "gpu_fence", "payload": "inline", "nic_backend": "softnic-cpu"}]
    return Step("gicomm-bench-gda", "gda_one_op", _points("gda_one_op", rows), iters)


def run_step(
    bin_dir: Path,
    step: Step,
    campaign_dir: Path,
    host: str,
    runs: int,
    timeout_ms: int = 5000,
    prefix: Sequence[str] = (),
    world: int = 1,
    name: str = "",
) -> list[Path]:
    """`runs` independent process runs of `step`, each under the command `prefix` (e.g.
    gicomm-emu-run, for the emulated rdma-core), as one process (NIC points loop back) or
    `world` = 2 ranks; the records files written (<name or experiment>/run<i>.jsonl)."""
    driver = bin_dir / step.driver
    if not driver.is_file():
        print(f"gicomm doctor: {driver} not built: {step.experiment} not measured", file=sys.stderr)
        return []
    label = name or step.experiment
    points = campaign_dir / "doctor" / f"{label}_points.jsonl"  # beside raw/, not in it
    points.parent.mkdir(parents=True, exist_ok=True)
    points.write_text("".join(point_line(p, "doctor") + "\n" for p in step.points))
    out_dir = campaign_dir / "raw" / step.experiment / host
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    emulated = any(Path(p).name == ranks.EMU_RUN for p in prefix)
    for run in range(runs):
        out = out_dir / (f"run{run}.jsonl" if not name else f"{name}.run{run}.jsonl")
        out.unlink(missing_ok=True)
        argv = [
            str(driver), "--experiment", step.experiment, "--points", str(points),
            "--campaign", campaign_dir.name, "--host", host,
            "--platform", "local", "--run-index", str(run), "--provenance-id", "doctor",
            "--iters", str(step.iters), "--warmup", "50", "--timeout-ms", str(timeout_ms),
        ]  # fmt: skip
        # one process: each NIC QP connected to a second one on its own device
        topology = "two-rank" if world == ranks.WORLD else "loopback"
        cmds = ranks.rank_commands(list(prefix), argv, out, {}, topology, emulated, timeout_ms)
        ended = first_failure(
            run_group(_named(cmds, step.driver), deadline_s=POINT_TIMEOUT_S,
                      grace_s=ranks.grace_s(timeout_ms))
        )  # fmt: skip
        for side in ranks.rank_side_files(out):
            ranks_remove(side)
        if not ended.ok:
            print(f"gicomm doctor: {step.driver} run {run}: {ended.describe()}", file=sys.stderr)
        if out.exists():
            files.append(out)
    return files


def _named(cmds: list[Command], driver: str) -> list[Command]:
    return [Command(c.argv, c.env, c.rank, driver) for c in cmds]


def ranks_remove(path: Path) -> None:
    """A rank's side file (rank 1's empty records, an emulated sysfs view)."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
