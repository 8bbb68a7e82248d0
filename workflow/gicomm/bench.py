"""Run one batch of sweep points through a native benchmark driver.

One Snakemake job = one batch of points of one experiment, one independent process run. The driver
(native/bench/README.md) appends each finished point to a partial file that lives outside
Snakemake's outputs, so a killed job keeps its finished points and the rerun measures only what is
missing. A point that hangs or crashes the driver is recorded as failed and the batch goes on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gicomm.errors import GicommError, RecordError
from gicomm.experiments import Experiment, Point
from gicomm.fsutil import write_atomic
from gicomm.needs import unmet_needs
from gicomm.probe import probe_node
from gicomm.records import append_records, iter_records, new_record

EXIT_MISSING_HARDWARE = 3


@dataclass(frozen=True)
class BatchJob:
    experiment: Experiment
    points: list[Point]
    campaign: str
    host: str
    platform: str
    run_index: int
    build_dir: Path
    hardware: dict[str, Any]
    partial: Path
    output: Path
    wait_ms: int = 2000
    point_s: int = 300
    max_nodes: int = 1
    may_lock_clocks: bool = False
    platform_spec: dict[str, Any] = field(default_factory=dict)


class HardwareMismatch(GicommError):
    """A job landed on a node without the hardware its platform declares."""


def declared_but_missing(spec: dict[str, Any], node: dict[str, Any]) -> list[str]:
    """What a (non-template) platform declares per node that this node does not have."""
    if not spec or spec.get("template"):
        return []
    reasons = []
    want_gpus = (spec.get("gpu") or {}).get("per_node") or 0
    gpus = node.get("gpus", {}).get("devices", [])
    if len(gpus) < want_gpus:
        reasons.append(f"the platform declares {want_gpus} GPU(s) per node, found {len(gpus)}")
    want_nics = len(spec.get("nics") or [])
    nics = node.get("rdma", {}).get("devices", [])
    if len(nics) < want_nics:
        reasons.append(f"the platform declares {want_nics} RDMA NIC(s) per node, found {len(nics)}")
    return reasons


def log(msg: str) -> None:
    print(f"[gicomm] {msg}", file=sys.stderr, flush=True)


def status_records(job: BatchJob, point: Point, status: str, error: str) -> list[dict[str, Any]]:
    """Records saying why a point was not measured (one per metric, so every figure shows it)."""
    return [
        new_record(
            campaign=job.campaign,
            host=job.host,
            platform=job.platform,
            experiment=job.experiment.name,
            transport=str(point.params.get("transport", "none")),
            nic_backend=str(point.params.get("nic_backend", "none")),
            params=point.params,
            metric=metric,
            unit="",
            run_index=job.run_index,
            provenance_id=job.hardware.get("provenance_id", "unknown"),
            status=status,
            error=error,
            point_id=point.point_id,
        )
        for metric in job.experiment.metrics
    ]


def finished_points(partial: Path) -> set[str]:
    if not partial.exists():
        return set()
    try:
        return {r["point_id"] for r in iter_records(partial) if "point_id" in r}
    except RecordError as exc:
        # A torn last line: keep the whole points before it, drop the torn one (it reruns).
        log(f"{exc}; keeping the complete lines before it")
        data = partial.read_bytes()
        write_atomic(partial, data[: data.rfind(b"\n") + 1].decode())
        return finished_points(partial)


def driver_path(job: BatchJob) -> Path:
    return job.build_dir / "bin" / job.experiment.driver


def driver_argv(job: BatchJob, points_file: Path, backend: str | None = None) -> list[str]:
    e = job.experiment
    backend_flag = ["--nic-backend", backend] if backend else []
    return [
        str(driver_path(job)),
        "--experiment", e.name,
        "--points", str(points_file),
        "--out", str(job.partial),
        "--campaign", job.campaign,
        "--host", job.host,
        "--platform", job.platform,
        "--run-index", str(job.run_index),
        "--provenance-id", str(job.hardware.get("provenance_id", "unknown")),
        "--warmup", str(e.warmup),
        "--iters", str(e.iters),
        "--timeout-ms", str(job.wait_ms),
        *backend_flag,
    ]  # fmt: skip


def run_batch(job: BatchJob) -> None:
    job.partial.parent.mkdir(parents=True, exist_ok=True)
    build = json.loads((job.build_dir / "gicomm_build.json").read_text())
    # On a described platform the job may land on any node: check this node, and fail early (the
    # scheduler retries elsewhere) when it lacks what the platform declares.
    node = job.hardware if job.platform_spec.get("template", True) else probe_node()
    missing = declared_but_missing(job.platform_spec, node)
    if missing:
        raise HardwareMismatch(
            f"job landed on node {node.get('hostname')} without the declared hardware of platform "
            f"{job.platform}: {'; '.join(missing)}"
        )
    done = finished_points(job.partial)
    runnable = []
    for p in job.points:
        reasons = unmet_needs(
            job.experiment.needs_of(p), node, build, job.max_nodes, job.may_lock_clocks
        )
        if not reasons and not driver_path(job).exists():
            reasons = [f"driver {job.experiment.driver} is not built on this host"]
        if not reasons:
            runnable.append(p)
        elif p.point_id not in done:
            why = "not runnable on this host: " + "; ".join(reasons)
            log(f"{job.experiment.name} point {p.point_id}: {why}")
            append_records(job.partial, status_records(job, p, "skipped", why))
    # The NIC backend is chosen per process (--nic-backend): one driver run per backend.
    by_backend: dict[str | None, list[Point]] = {}
    for p in runnable:
        backend = p.params.get("nic_backend")
        by_backend.setdefault(None if backend is None else str(backend), []).append(p)
    for backend, points in by_backend.items():
        _measure(job, points, backend)
    _publish(job)


def _measure(job: BatchJob, points: list[Point], backend: str | None) -> None:
    attempts = 0
    while True:
        done = finished_points(job.partial)
        todo = [p for p in points if p.point_id not in done]
        if not todo:
            return
        attempts += 1
        if attempts > len(points) + 1:
            raise RuntimeError(f"{job.experiment.name}: driver made no progress; giving up")
        log(
            f"{job.experiment.name} run {job.run_index}: {len(todo)} of {len(points)} points "
            f"to measure ({len(done)} already finished)"
        )
        points_file = job.partial.with_suffix(".points.jsonl")
        write_atomic(points_file, "".join(p.to_json() + "\n" for p in todo))
        t0 = time.monotonic()
        limit = job.point_s * len(todo)
        try:
            argv = driver_argv(job, points_file, backend)
            proc = subprocess.run(argv, timeout=limit, check=False)
            code: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            code = f"timeout after {limit} s"
        if code == 0:
            continue  # loop re-reads the partial file; every point should now be there
        if code == EXIT_MISSING_HARDWARE:
            why = "driver found the required hardware missing (see the job log)"
            for p in todo:
                append_records(job.partial, status_records(job, p, "skipped", why))
            return
        # The driver died: blame the first point it had not finished, record it, go on.
        done_now = finished_points(job.partial)
        culprit = next(p for p in todo if p.point_id not in done_now)
        elapsed = time.monotonic() - t0
        why = (
            f"driver {job.experiment.driver} exited ({code}) while measuring this point "
            f"after {elapsed:.1f} s"
        )
        log(f"{job.experiment.name}: point {culprit.point_id} failed: {why}")
        append_records(job.partial, status_records(job, culprit, "failed", why))


def _publish(job: BatchJob) -> None:
    """Write this batch's records (validated) to the job's declared output, atomically."""
    wanted = {p.point_id for p in job.points}
    kept = [r for r in iter_records(job.partial) if r.get("point_id") in wanted]
    write_atomic(job.output, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
