"""The doctor's own short run: the floors experiment (reduced sweep) and, where no campaign of this
host kind exists, the few reduced points the verdicts judge, each in independent process runs with
the drivers of a native build. Records land as a campaign's raw files would
(<campaign>/raw/<experiment>/<host>/run<i>.jsonl), so the same-run floor join applies."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gicomm import REPO_ROOT
from gicomm.bench import point_line
from gicomm.experiments import Point, load_experiment, point_id

FLOORS_YAML = REPO_ROOT / "config" / "experiments" / "floors.yaml"
POINT_TIMEOUT_S = 120  # one driver process (a few points); every GPU wait inside is --timeout-ms


@dataclass(frozen=True)
class Step:
    driver: str
    experiment: str
    points: tuple[Point, ...]
    iters: int


def _points(experiment: str, rows: Iterable[dict[str, Any]]) -> tuple[Point, ...]:
    return tuple(Point(point_id(experiment, r), r) for r in rows)


def floors_step(iters: int, nic: str | None = None) -> Step:
    """The floors experiment's reduced sweep (plus the NIC floors through `nic`)."""
    points = list(load_experiment(FLOORS_YAML).points("reduced"))
    if nic:
        for extra in ({"floor": "nic_loopback"}, {"floor": "wqe_doorbell", "target": "uar"}):
            points += _points("floors", [extra | {"nic_backend": nic}])
    return Step("gicomm-bench-floors", "floors", tuple(points), iters)


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
) -> list[Path]:
    """`runs` independent process runs of `step`, each under the command `prefix` (e.g.
    gicomm-emu-run, for the emulated rdma-core); the records files written."""
    driver = bin_dir / step.driver
    if not driver.is_file():
        print(f"gicomm doctor: {driver} not built: {step.experiment} not measured", file=sys.stderr)
        return []
    points = campaign_dir / "doctor" / f"{step.experiment}_points.jsonl"  # beside raw/, not in it
    points.parent.mkdir(parents=True, exist_ok=True)
    points.write_text("".join(point_line(p, "doctor") + "\n" for p in step.points))
    out_dir = campaign_dir / "raw" / step.experiment / host
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for run in range(runs):
        out = out_dir / f"run{run}.jsonl"
        out.unlink(missing_ok=True)
        argv = [
            *prefix,
            str(driver), "--experiment", step.experiment, "--points", str(points),
            "--out", str(out), "--campaign", campaign_dir.name, "--host", host,
            "--platform", "local", "--run-index", str(run), "--provenance-id", "doctor",
            "--iters", str(step.iters), "--warmup", "50", "--timeout-ms", str(timeout_ms),
            # the doctor's NIC floors are one process, each QP connected to itself
            "--topology", "loopback",
        ]  # fmt: skip
        try:
            rc = subprocess.run(argv, check=False, timeout=POINT_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            rc = -1
        if rc != 0:
            print(f"gicomm doctor: {step.driver} run {run} exited {rc}", file=sys.stderr)
        if out.exists():
            files.append(out)
    return files
