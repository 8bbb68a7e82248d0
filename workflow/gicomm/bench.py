"""Run one batch of sweep points through a native benchmark driver.

One Snakemake job = one batch of points of one experiment, one independent process run. The job
holds a lock of its own on the batch (a second live writer is refused, whatever Snakemake's locks
say), hands the driver the points file (native/bench/README.md) and a fresh output file, and moves
each finished point's records into the batch's partial file, stamped with the point's measure key.

When is a point measured? Snakemake decides when the job runs again: its output is missing, the
native build changed (the build summary is an input), the points, warm-up, iterations or timeouts
changed (the rule's params), or the user forces it (`--forcerun bench_batch`). Every such run
measures every point again; the records of the run before stay in the batch's history folder. A run
that finds an unfinished measurement (the job was killed) resumes it: a point measured `ok` under
the same measure key (driver binary, point, warm-up and iterations, timeouts, node) is kept, and
every other point is measured (gicomm.ledger). A point that hangs or crashes the driver is recorded
as failed with the driver's last words and the batch goes on; a point the host cannot run is
recorded as skipped with the reason; a driver missing from the build is a build error.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import sys
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from types import FrameType
from typing import Any

from gicomm import mps, ranks
from gicomm.baselines import dispatch
from gicomm.errors import BuildError, GicommError
from gicomm.experiments import Experiment, Point
from gicomm.fsutil import write_atomic
from gicomm.ledger import Expect, Ledger
from gicomm.locks import FileLock
from gicomm.needs import unmet_needs
from gicomm.probe import probe_node
from gicomm.process import Ended, first_failure, run_group
from gicomm.records import RecordIdentity, new_record

EXIT_MISSING_HARDWARE = 3
POINT_FIELDS = ("transport", "nic_backend")


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
    history: Path | None = None
    wait_ms: int = 2000
    point_s: int = 300
    max_nodes: int = 1
    may_lock_clocks: bool = False
    platform_spec: dict[str, Any] = field(default_factory=dict)
    nic: ranks.NicSetup = field(default_factory=ranks.NicSetup)

    @property
    def history_dir(self) -> Path:
        return self.history or self.partial.with_suffix(".history")

    def side_file(self, suffix: str) -> Path:
        """A file of the runner beside the partial file (batch3.jsonl -> batch3<suffix>)."""
        return self.partial.with_suffix(suffix)


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


# ---- points --------------------------------------------------------------------------------------
def point_parts(p: Point) -> tuple[str | None, str | None, dict[str, Any]]:
    """A point's transport, NIC backend (None: the experiment's default) and other params."""
    params = dict(p.params)
    transport, backend = (
        getattr(p, k, None) if getattr(p, k, None) is not None else params.get(k)
        for k in POINT_FIELDS
    )
    for k in POINT_FIELDS:
        params.pop(k, None)
    return (
        None if transport is None else str(transport),
        None if backend is None else str(backend),
        params,
    )


def point_line(p: Point, key: str) -> str:
    """The points file line a driver reads: {point_id, transport, nic_backend, params}."""
    transport, backend, params = point_parts(p)
    line: dict[str, Any] = {"point_id": p.point_id, "measure_key": key}
    if transport is not None:
        line["transport"] = transport
    if backend is not None:
        line["nic_backend"] = backend
    line["params"] = params
    return json.dumps(line, sort_keys=True, allow_nan=False)


# ---- what measures each point --------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """How one point is measured: a program of the build (with env, behind the emulation's
    wrapper where it runs on the emulated NIC, in its ranks' topology), the upstream runner, or
    not at all (`status` skipped/failed with the reason)."""

    program: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    one_transport: str | None = None  # a harness that serves one transport per process
    upstream: bool = False
    status: str | None = None
    reason: str = ""
    wrap: tuple[str, ...] = ()  # gicomm-emu-run in front of the program: the emulated NIC
    topology: str | None = None  # two-rank | loopback for NIC points the runner launches
    emulated: bool = False
    mps: bool = False  # two PEs share one GPU: run under a private MPS daemon (gicomm.mps)

    @property
    def group(self) -> tuple[Any, ...]:
        """Points of one group run in one process (or one pair of ranks)."""
        return (self.program, self.env, self.one_transport, self.wrap, self.topology, self.mps)


def nic_unmet(
    job: BatchJob, backend: str | None, node: dict[str, Any], emulated: bool
) -> list[str]:
    """Why a NIC point cannot run here beyond its declared needs: the emulation asked for but not
    built, or no two ranks to be had (the library harnesses start their own ranks)."""
    if emulated and not (job.build_dir / "bin" / ranks.EMU_RUN).is_file():
        return [
            "the campaign asks for the emulated NIC (nic.emulated: true), and the native build has "
            f"no bin/{ranks.EMU_RUN} (rdma-core's headers were missing when native/ was configured)"
        ]
    launches_ranks = job.experiment.driver != dispatch.DISPATCHER
    reachable = emulated or ranks.node_has_rdma(node)
    if launches_ranks and ranks.is_nic_point(backend) and reachable and not job.nic.topology:
        return [job.nic.why]
    return []


def plan_points(job: BatchJob, node: dict[str, Any], build: dict[str, Any]) -> dict[str, Plan]:
    e = job.experiment
    bin_dir = job.build_dir / "bin"
    nics = dispatch.scan_nics() if e.driver == dispatch.DISPATCHER else None
    plans: dict[str, Plan] = {}
    for p in job.points:
        transport, backend, params = point_parts(p)
        emulated = ranks.emulates(job.nic, backend, node)
        needs = ranks.needs_here(e.needs_of(p), job.nic, backend, node, transport)
        reasons = unmet_needs(needs, node, build, job.max_nodes, job.may_lock_clocks)
        reasons += nic_unmet(job, backend, node, emulated)
        if reasons:
            why = "not runnable on this host: " + "; ".join(reasons)
            plans[p.point_id] = Plan(status="skipped", reason=why)
            continue
        wrap = tuple(ranks.wrapper(bin_dir, transport)) if emulated else ()
        if nics is None:
            topology = job.nic.topology if ranks.is_nic_point(backend) else None
            plans[p.point_id] = Plan(
                program=e.driver, wrap=wrap, topology=topology, emulated=emulated
            )
            continue
        route = dispatch.route(transport or "", params, bin_dir, nics, emulated=emulated)
        env = {**ranks.emulation_env(transport, route.env), **route.env} if emulated else route.env
        plans[p.point_id] = Plan(
            program=route.program,
            env=tuple(sorted(env.items())),
            one_transport=transport if route.program else None,
            upstream=route.upstream,
            status=route.status,
            reason=route.reason,
            wrap=wrap if route.program else (),
            topology=ranks.library_topology(job.nic, transport, emulated)
            if route.program
            else None,
            emulated=emulated,
            mps=bool(route.program) and ranks.shares_one_gpu(job.nic, transport, backend, node),
        )
    for pid, plan in plans.items():
        if plan.program and not (bin_dir / plan.program).is_file():
            raise BuildError(
                f"{e.name}: point {pid} can run on this host, but its driver "
                f"{bin_dir / plan.program} does not exist: a build error (a misspelled `driver` "
                f"in {e.path}, or a native build that failed or was cut short; rebuild with "
                "`snakemake --forcerun build_native`)"
            )
    return plans


def file_digest(path: Path) -> str:
    st = path.stat()
    return _digest(str(path), st.st_mtime_ns, st.st_size)


@cache
def _digest(path: str, mtime_ns: int, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def node_identity(node: dict[str, Any]) -> dict[str, Any]:
    """What the node is for a measurement: its name, its GPUs and its RDMA devices."""
    gpus = node.get("gpus", {}).get("devices", [])
    return {
        "hostname": node.get("hostname"),
        "gpus": [g.get("uuid") or g.get("name") for g in gpus],
        "rdma": [d.get("name") for d in node.get("rdma", {}).get("devices", [])],
    }


def measure_key(
    job: BatchJob, p: Point, plan: Plan, node: dict[str, Any], build: dict[str, Any]
) -> str:
    """What point `p` is measured under, as 16 hex digits: the program (its binary's digest, or
    the upstream sources' description), the build, the point, warm-up and iterations, timeouts
    and the node. A point is kept from an unfinished measurement only under the same key."""
    if plan.upstream:
        program = dispatch.upstream_digest()
    elif plan.program:
        program = file_digest(job.build_dir / "bin" / plan.program)
    else:
        program = None
    transport, backend, params = point_parts(p)
    blob = {
        "program": program,
        "env": plan.env,
        "build": build,
        "experiment": job.experiment.name,
        "point": [p.point_id, transport, backend, params],
        "warmup": job.experiment.warmup,
        "iters": job.experiment.iters,
        "wait_ms": job.wait_ms,
        "point_s": job.point_s,
        "node": node_identity(node),
    }
    if ranks.is_nic_point(backend):  # which NIC answers and how the ranks are placed
        blob["nic"] = {
            "emulated": plan.emulated,
            "topology": plan.topology,
            "launcher": ranks.launcher_of(plan.topology, plan.emulated),
        }
        if plan.mps:  # two PEs on one GPU, under MPS
            blob["nic"]["mps"] = True
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


# ---- records -------------------------------------------------------------------------------------
def identity(job: BatchJob, p: Point) -> RecordIdentity:
    transport, backend, _ = point_parts(p)
    return RecordIdentity(
        campaign=job.campaign,
        host=job.host,
        platform=job.platform,
        experiment=job.experiment.name,
        transport=transport or "none",
        nic_backend=backend or "none",
        run_index=job.run_index,
        provenance_id=str(job.hardware.get("provenance_id", "unknown")),
        point_id=p.point_id,
    )


def status_records(job: BatchJob, point: Point, status: str, why: str) -> list[dict[str, Any]]:
    """Records saying why a point was not measured (one per metric, so every figure shows it)."""
    _, _, params = point_parts(point)
    return [
        new_record(identity(job, point), params=params, metric=m, unit="", status=status, error=why)
        for m in job.experiment.metrics
    ]


# ---- the batch -----------------------------------------------------------------------------------
def run_batch(job: BatchJob) -> None:
    job.partial.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(job.side_file(".lock")).acquire(
        what=f"the bench job of {job.output}",
        refusal=f"{job.output}: a second live writer of this batch is refused",
    )
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        _run_locked(job, lock)
    finally:
        signal.signal(signal.SIGTERM, previous)
        lock.release()


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(f"terminated by signal {signum}; finished points are kept")


def _run_locked(job: BatchJob, lock: FileLock) -> None:
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
    plans = plan_points(job, node, build)
    by_id = {p.point_id: p for p in job.points}
    keys = {pid: measure_key(job, by_id[pid], plan, node, build) for pid, plan in plans.items()}
    emulated = frozenset(pid for pid, plan in plans.items() if plan.emulated and plan.program)
    expect = Expect(job.campaign, job.host, job.experiment.name, job.run_index, keys, emulated)
    ledger = Ledger(job.partial, job.history_dir, expect)
    ledger.resume(job.side_file(".driver.jsonl"), job.side_file(".points.jsonl"))

    groups: dict[tuple[Any, ...], tuple[Plan, list[Point]]] = {}
    for p in job.points:
        plan = plans[p.point_id]
        if p.point_id in ledger.measured():
            continue
        if plan.status:
            log(f"{job.experiment.name} point {p.point_id}: {plan.status}: {plan.reason}")
            ledger.add(p.point_id, status_records(job, p, plan.status, plan.reason))
        elif plan.upstream:
            _measure_upstream(job, ledger, p)
        else:
            groups.setdefault(plan.group, (plan, []))[1].append(p)
    for plan, points in groups.values():
        _measure(job, ledger, lock, points, plan)
    n = ledger.publish(job.output, [p.point_id for p in job.points])
    log(f"{job.experiment.name} run {job.run_index}: {n} records of {len(job.points)} points")


def driver_argv(job: BatchJob, program: str, points_file: Path) -> list[str]:
    """A driver reads each point's transport and NIC backend from the points file; its --out
    (one per rank) is added by gicomm.ranks."""
    e = job.experiment
    return [
        str(job.build_dir / "bin" / program),
        "--experiment", e.name,
        "--points", str(points_file),
        "--campaign", job.campaign,
        "--host", job.host,
        "--platform", job.platform,
        "--run-index", str(job.run_index),
        "--provenance-id", str(job.hardware.get("provenance_id", "unknown")),
        "--warmup", str(e.warmup),
        "--iters", str(e.iters),
        "--timeout-ms", str(job.wait_ms),
    ]  # fmt: skip


def _measure(
    job: BatchJob,
    ledger: Ledger,
    lock: FileLock,
    points: list[Point],
    plan: Plan,
) -> None:
    """Run the plan's program over `points` until each has an outcome: a driver that dies (any
    of its ranks) is blamed on the first point it had not finished, which is recorded as failed,
    and started again on the rest."""
    program = str(plan.program)
    scratch, points_file = job.side_file(".driver.jsonl"), job.side_file(".points.jsonl")
    for _ in range(len(points) + 1):
        todo = [p for p in points if p.point_id not in ledger.measured()]
        if not todo:
            return
        log(
            f"{job.experiment.name} run {job.run_index}: {program}: {len(todo)} of "
            f"{len(points)} points to measure"
        )
        keys = ledger.expect.keys
        write_atomic(points_file, "".join(point_line(p, keys[p.point_id]) + "\n" for p in todo))
        scratch.unlink(missing_ok=True)
        name = program + (f" (under {ranks.EMU_RUN})" if plan.wrap else "")
        with mps.running(plan.mps, log) as mps_env:
            cmds = ranks.rank_commands(
                list(plan.wrap),
                driver_argv(job, program, points_file),
                scratch,
                {**dict(plan.env), **mps_env},
                plan.topology,
                plan.emulated,
                job.wait_ms,
            )
            ended = first_failure(
                run_group(
                    [replace(c, name=name) for c in cmds],
                    deadline_s=job.point_s * len(todo),
                    grace_s=ranks.grace_s(job.wait_ms),
                    pass_fds=[lock.fd] if lock.fd is not None else [],
                )
            )
        failures = ledger.harvest(scratch, {p.point_id: keys[p.point_id] for p in todo})
        points_file.unlink(missing_ok=True)
        for side in ranks.rank_side_files(scratch):
            remove(side)
        for pid, why in failures.items():
            ledger.add(pid, status_records(job, _point(todo, pid), "failed", why))
        _after_driver(job, ledger, todo, ended)
    raise GicommError(f"{job.experiment.name}: {program} made no progress; giving up")


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _point(points: list[Point], pid: str) -> Point:
    return next(p for p in points if p.point_id == pid)


def _after_driver(job: BatchJob, ledger: Ledger, todo: list[Point], ended: Ended) -> None:
    left = [p for p in todo if p.point_id not in ledger.measured()]
    if not left:
        return
    if ended.code == EXIT_MISSING_HARDWARE:
        why = "not runnable on this host: " + ended.describe()
        for p in left:
            ledger.add(p.point_id, status_records(job, p, "skipped", why))
        return
    if ended.ok:  # exited 0 without recording some points: each is a failure of its own
        for p in left:
            why = f"{ended.program} exited 0 without recording this point"
            ledger.add(p.point_id, status_records(job, p, "failed", why))
        return
    culprit = left[0]
    why = f"{ended.describe()} (while measuring this point; the job log has its output)"
    log(f"{job.experiment.name}: point {culprit.point_id} failed: {why}")
    ledger.add(culprit.point_id, status_records(job, culprit, "failed", why))


def _measure_upstream(job: BatchJob, ledger: Ledger, p: Point) -> None:
    """A library baseline that runs its project's own test program (gicomm.baselines)."""
    params = point_parts(p)[2]
    try:
        records = dispatch.run_upstream(identity(job, p), params, ledger.path)
    except (OSError, ValueError, KeyError, GicommError) as exc:
        records = status_records(job, p, "failed", f"{type(exc).__name__}: {exc}")
    ledger.add(p.point_id, records)
