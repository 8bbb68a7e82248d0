"""The paper's experiments expressed as topologies for the engine.

Every function takes a :class:`ModelParams` and returns plain numbers. Configuration choices the
paper does not state are module constants (``ASSUME_*``) and are listed in docs/model.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gicomm.model import engine as E
from gicomm.model.parameters import ModelParams, PathParams
from gicomm.model.topology import Producer, SimResult, Topology

ASSUME_BG_CTAS = 64  # Table 11: background CTAs
ASSUME_GDAKI_SHARED_POOL = 32  # NCCL GIN context pool when the probe shares (65 = reserved)
ASSUME_PROXY_WORKERS = 1  # Fig 7 loaded-probe configuration T=1
ASSUME_PROXY_RINGS = 8  # Fig 7 loaded-probe configuration R=8
ASSUME_F10_PRODUCERS = 64  # producers driving the connection-scaling NIC
ASSUME_F10_QP_DEPTH = 64


def _nic_single(p: ModelParams) -> float:
    return p.nic.t_fetch_ns + p.nic.t_wqe_ns


def _tail(p: ModelParams, path: PathParams, state: str = "cold") -> float:
    """Fixed time from WQE processed to completion seen, so that one idle op takes completion_ns."""
    t = path.completion_ns - path.issue_ns - _nic_single(p)
    if path.kind == "proxy":
        t -= path.worker_cost(1, "cold")
    return max(t, 0.0)


def _probe(
    p: ModelParams,
    path: PathParams,
    q: int,
    n: int,
    start: float,
    tail_extra: float = 0.0,
    shared_ring: bool = False,
) -> Producer:
    """One thread, one op outstanding; on a proxy ring shared with other producers its enqueue
    is the multi-producer one (``shared_enqueue_ns``) instead of the tuned single store."""
    ring = path.ring_cost(p.sm_clock_mhz) if path.kind == "gpu" else 0.0
    ring = min(ring, path.issue_ns)
    issue = path.issue_ns
    if path.kind == "proxy" and shared_ring:
        issue = path.enqueue_cost(p.sm_clock_mhz, multi_producer=True)
    return Producer(
        q0=q,
        t_build=issue - ring,
        t_ring=ring,
        tail=_tail(p, path) + tail_extra,
        nmsg=n,
        batch=1,
        window=1,
        probe=True,
        start=start,
    )


def _proxy_topology(
    p: ModelParams, path: PathParams, rings: int, workers: int, state: str
) -> tuple[Topology, int]:
    """Rings 0..rings-1 (split evenly over workers), one NIC queue per worker."""
    topo = Topology()
    first = len(topo.queues)
    per = -(-rings // workers)
    for r in range(rings):
        topo.add_queue(path.queue_depth, E.QK_RING, worker=r // per)
    for w in range(workers):
        qp = topo.add_queue(path.worker_qp_depth)
        r0 = w * per
        topo.add_worker(
            r0,
            min(per, rings - r0),
            qp,
            path.worker_bmax,
            path.worker_t0_ns[state],
            path.worker_tper_ns[state],
            path.worker_reap_per_pass,
        )
    return topo, first


@dataclass
class OneOp:
    issue_us: float
    completion_us: float
    rtt_us: float


def single_op(
    p: ModelParams, path_name: str, *, qps_polled: int = 1, state: str = "cold", n: int = 50
) -> OneOp:
    """One thread, one outstanding op. ``qps_polled`` > 1 models an all-QP quiet."""
    path = p.path(path_name)
    extra = p.poll_per_qp_ns * (qps_polled - 1)
    if path.kind == "proxy":
        topo, r0 = _proxy_topology(p, path, 1, 1, state)
        topo.add(_probe(p, path, r0, n, 0.0, extra))
        dworker = path.worker_cost(1, state) - path.worker_cost(1, "cold")
    else:
        topo = Topology()
        q = topo.add_queues(1, path.queue_depth)
        topo.add(_probe(p, path, q, n, 0.0, extra))
        dworker = 0.0
    res = topo.run(p.nic)
    lat = float(np.median(res.probe_latencies(0.0)))
    return OneOp(
        issue_us=path.issue_ns / 1e3,
        completion_us=lat / 1e3,
        rtt_us=(lat + path.rtt_ns - path.completion_ns + dworker) / 1e3,
    )


def message_rate(
    p: ModelParams,
    path_name: str = "mini-gda",
    *,
    threads: int = 1,
    qps: int = 1,
    batch: int = 1,
    msgs: int = 200_000,
    sm_clock_mhz: float | None = None,
    seed: int = 1,
) -> float:
    """GPU 8 B message rate (Mmsg/s); thread t posts ``batch`` WQEs per doorbell to QP t % qps."""
    path = p.path(path_name)
    f = sm_clock_mhz or p.sm_clock_mhz
    topo = Topology()
    q0 = topo.add_queues(qps, path.queue_depth)
    per_qp = -(-threads // qps)
    window = max(path.queue_depth // per_qp, batch)
    nmsg = max(msgs // threads, 4 * batch)
    for t in range(threads):
        topo.add(
            Producer(
                q0=q0 + t % qps,
                t_build=path.build_cost(f),
                t_ring=path.ring_cost(f),
                tail=_tail(p, path),
                nmsg=nmsg,
                batch=batch,
                window=window,
            )
        )
    return topo.run(p.nic, seed=seed).rate_mmsg()


def proxy_rate(
    p: ModelParams,
    *,
    workers: int = 1,
    rings: int = 32,
    batch: int = 16,
    producers: int = 32,
    state: str = "cold",
    msgs: int = 200_000,
) -> float:
    """CPU-proxy message rate (Mmsg/s): producers enqueue, workers chain up to ``batch``."""
    path = PathParams(**{**p.path("mini-proxy").__dict__})
    path.worker_bmax = batch
    topo, r0 = _proxy_topology(p, path, rings, workers, state)
    for i in range(producers):
        on_ring = len(range(i % rings, producers, rings))
        topo.add(
            Producer(
                q0=r0 + i % rings,
                t_build=path.enqueue_cost(p.sm_clock_mhz, multi_producer=on_ring > 1),
                t_ring=0.0,
                tail=_tail(p, path),
                nmsg=max(msgs // producers, 1),
                window=path.queue_depth,
            )
        )
    return topo.run(p.nic).rate_mmsg()


@dataclass
class LoadedRtt:
    rtt_p50_us: float
    carried_mmsg: float
    probes: int
    completion_p50_us: float  # the probe's put+completion, without the remote side


def loaded_rtt(
    p: ModelParams,
    path_name: str,
    mode: str,
    *,
    bg_ctas: int = ASSUME_BG_CTAS,
    probes: int = 24,
    bg_pace_ns: float = 0.0,
    state: str = "cold",
    bg_msgs: int | None = None,
    workers: int = ASSUME_PROXY_WORKERS,
    rings: int = ASSUME_PROXY_RINGS,
    chain: int | None = None,
    bg_enqueue: str | None = None,
) -> LoadedRtt:
    """Probe RTT p50 while ``bg_ctas`` unpaced (or paced) background CTAs load the path.

    ``mode`` is "shared" (the probe shares a queue with background CTAs) or "reserved".
    GPU path: one producer per CTA, one context (send queue) each when reserved, a pool of
    ``ASSUME_GDAKI_SHARED_POOL`` when shared. Proxy path: ``rings`` rings for the background
    served by ``workers`` workers chaining up to ``chain`` requests (default: the path's), the
    probe on ring 0 (shared) or on its own extra ring (reserved). A ring with more than one
    producer is enqueued with the multi-producer protocol (``PathParams.shared_enqueue_ns``);
    ``bg_enqueue`` "baseline" or "tuned" sets the background CTAs' enqueue whatever the count.
    """
    if mode not in ("shared", "reserved"):
        raise ValueError(f"mode must be shared or reserved, not {mode!r}")
    if bg_enqueue not in (None, "baseline", "tuned"):
        raise ValueError(f"bg_enqueue must be baseline, tuned or None, not {bg_enqueue!r}")
    path = p.path(path_name)
    if chain is not None:
        path = PathParams(**{**path.__dict__, "worker_bmax": chain})
    f = p.sm_clock_mhz
    on_queue: dict[int, int] = {}
    if path.kind == "gpu":
        n_ctx = ASSUME_GDAKI_SHARED_POOL if mode == "shared" else bg_ctas + 1
        topo = Topology()
        q0 = topo.add_queues(n_ctx, path.queue_depth)
        bg_q = [q0 + i % (n_ctx if mode == "shared" else bg_ctas) for i in range(bg_ctas)]
        probe_q = q0 if mode == "shared" else q0 + bg_ctas
        start = 50_000.0
        total = bg_msgs or 600_000
    else:
        topo, r0 = _proxy_topology(p, path, rings + (mode == "reserved"), workers, state)
        bg_q = [r0 + i % rings for i in range(bg_ctas)]
        probe_q = r0 if mode == "shared" else r0 + rings
        start = 3_000_000.0
        total = bg_msgs or 1_500_000
        for q in [*bg_q, probe_q]:
            on_queue[q] = on_queue.get(q, 0) + 1
    for q in bg_q:
        topo.add(
            Producer(
                q0=q,
                t_build=path.enqueue_cost(
                    f, on_queue[q] > 1 if bg_enqueue is None else bg_enqueue == "baseline"
                )
                if path.kind == "proxy"
                else path.build_cost(f),
                t_ring=path.ring_cost(f) if path.kind == "gpu" else 0.0,
                tail=_tail(p, path),
                nmsg=total // bg_ctas,
                window=path.queue_depth,
                pace=bg_pace_ns,
            )
        )
    topo.add(_probe(p, path, probe_q, probes, start, shared_ring=on_queue.get(probe_q, 1) > 1))
    res = topo.run(p.nic)
    lat = res.probe_latencies(0.25)
    bg = np.arange(bg_ctas)
    return LoadedRtt(
        rtt_p50_us=float(np.median(lat) + path.rtt_ns - path.completion_ns) / 1e3,
        carried_mmsg=_rate_before(res, bg, _probe_end(res)),
        probes=int(lat.size),
        completion_p50_us=float(np.median(lat)) / 1e3,
    )


def _probe_end(res: SimResult) -> float:
    sel = res.probe_producer[res.m_prod]
    return float(np.nanmax(res.m_done[sel])) if sel.any() else float(res.stats[E.S_T_END])


def _rate_before(res: SimResult, producers: np.ndarray, t_end: float) -> float:
    done = res.m_done[np.isin(res.m_prod, producers)]
    done = done[np.isfinite(done) & (done <= t_end)]
    if done.size < 10:
        return float("nan")
    t0 = done.min() + 0.25 * (t_end - done.min())
    k = np.count_nonzero(done >= t0)
    return k / (t_end - t0) * 1e3 if t_end > t0 else float("nan")


@dataclass
class ConnPoint:
    connections: int
    rate_mmsg: float
    miss_rate: float


def connection_scaling(
    p: ModelParams,
    connections: int,
    *,
    bidirectional: bool = True,
    writes_per_visit: int = 32,
    producers: int = ASSUME_F10_PRODUCERS,
    random_order: bool = False,
    cycles: float = 2.0,
    min_msgs: int = 150_000,
) -> ConnPoint:
    """NIC message rate with ``connections`` active RC connections (one send queue each).

    Producers own disjoint sets of connections and visit them in turn (round-robin unless
    ``random_order``), posting ``writes_per_visit`` writes per visit with one doorbell per 32.
    ``bidirectional`` adds the symmetric receive traffic (send+receive, all-to-all).
    """
    path = p.path("mini-gda")
    f = p.sm_clock_mhz
    n = int(connections)
    topo = Topology()
    batch = min(writes_per_visit, 32)
    # with fewer connections than producers, each sharing producer gets two batches of room
    depth = max(ASSUME_F10_QP_DEPTH, 2 * batch * -(-producers // n))
    q0 = topo.add_queues(n, depth)
    per = max(n // producers, 1)
    nmsg = max(int(cycles * per * writes_per_visit), min_msgs // producers)
    for i in range(producers):
        if n >= producers:
            first, count = q0 + i * per, per if i < producers - 1 else n - i * per
        else:
            first, count = q0 + i % n, 1
        topo.add(
            Producer(
                q0=first,
                nq=count,
                t_build=path.build_cost(f),
                t_ring=path.ring_cost(f),
                tail=_tail(p, path),
                nmsg=nmsg,
                batch=batch,
                visit=writes_per_visit,
                window=ASSUME_F10_QP_DEPTH,
                random_order=random_order,
            )
        )
    res = topo.run(p.nic, bidirectional=bidirectional)
    return ConnPoint(n, res.rate_mmsg(0.5, 0.95), res.miss_rate())
