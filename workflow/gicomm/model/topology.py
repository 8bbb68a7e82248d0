"""Build the engine's input arrays from a readable description, run it, summarise the result."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gicomm.model import engine as E
from gicomm.model.parameters import NicParams


@dataclass
class Producer:
    q0: int
    t_build: float
    t_ring: float
    tail: float
    nmsg: int
    nq: int = 1
    batch: int = 1
    visit: int = 0  # messages per queue visit; 0 means one batch
    window: int = 1
    probe: bool = False
    random_order: bool = False
    pace: float = 0.0  # ns per message, 0 = unpaced
    start: float = 0.0


@dataclass
class Topology:
    """Producers, queues, workers; add them in order, then ``run`` with a NIC."""

    producers: list[Producer] = field(default_factory=list)
    queues: list[tuple[int, int, int, int]] = field(default_factory=list)  # depth kind worker conn
    workers: list[tuple[int, int, int, int, float, float, bool]] = field(default_factory=list)

    def add_queue(self, depth: int, kind: int = E.QK_NIC, worker: int = -1, conn: int = -1) -> int:
        q = len(self.queues)
        self.queues.append((int(depth), kind, worker, q if conn < 0 else conn))
        return q

    def add_queues(self, n: int, depth: int) -> int:
        """``n`` NIC send queues of ``depth``; returns the first index."""
        first = len(self.queues)
        for _ in range(n):
            self.add_queue(depth)
        return first

    def add_worker(
        self,
        ring0: int,
        nrings: int,
        qp: int,
        bmax: int,
        t0: float,
        tper: float,
        reap_per_pass: bool = False,
    ) -> int:
        w = len(self.workers)
        self.workers.append((ring0, nrings, qp, bmax, t0, tper, reap_per_pass))
        return w

    def add(self, p: Producer) -> int:
        self.producers.append(p)
        return len(self.producers) - 1

    def arrays(self, nic: NicParams, t_stop: float = 0.0, seed: int = 1) -> tuple[np.ndarray, ...]:
        n_p = len(self.producers)
        pi = np.zeros((n_p, E.PI_NCOL), dtype=np.int64)
        pf = np.zeros((n_p, E.PF_NCOL), dtype=np.float64)
        for i, p in enumerate(self.producers):
            pi[i] = (
                p.q0,
                p.nq,
                p.batch,
                p.visit if p.visit > 0 else p.batch,
                p.window,
                p.nmsg,
                int(p.probe),
                int(p.random_order),
            )
            pf[i] = (p.t_build, p.t_ring, p.pace, p.tail, p.start)
        qi = np.array(self.queues, dtype=np.int64).reshape(-1, E.QI_NCOL)
        wi = np.zeros((len(self.workers), E.WI_NCOL), dtype=np.int64)
        wf = np.zeros((len(self.workers), E.WF_NCOL), dtype=np.float64)
        for i, (r0, nr, qp, bmax, t0, tper, reap) in enumerate(self.workers):
            wi[i] = (r0, nr, qp, bmax, int(reap))
            wf[i] = (t0, tper)
            if qi[qp, E.QI_WORKER] < 0:
                qi[qp, E.QI_WORKER] = i
        n_conn = max(int(qi[:, E.QI_CONN].max()) + 1, 1) if len(qi) else 1
        ni = np.zeros(E.NI_N, dtype=np.int64)
        ni[E.NI_NPU] = nic.n_pu
        ni[E.NI_FETCH_MAX] = nic.fetch_max
        ni[E.NI_BURST_MAX] = nic.burst_max
        ni[E.NI_RX_MODE] = 0
        ni[E.NI_SETS] = nic.cache_sets
        ni[E.NI_WAYS] = nic.cache_ways
        ni[E.NI_RX_SHIFT] = n_conn // 2
        ni[E.NI_RX_MOD] = n_conn
        ni[E.NI_SEED] = seed
        nf = np.zeros(E.NF_N, dtype=np.float64)
        nf[E.NF_FETCH] = nic.t_fetch_ns
        nf[E.NF_WQE] = nic.t_wqe_ns
        nf[E.NF_RX] = nic.t_rx_ns
        nf[E.NF_MISS_TX] = nic.t_miss_tx_ns
        nf[E.NF_MISS_RX] = nic.t_miss_rx_ns
        nf[E.NF_T_STOP] = t_stop
        return pi, pf, qi, wi, wf, ni, nf

    def run(
        self, nic: NicParams, *, bidirectional: bool = False, t_stop: float = 0.0, seed: int = 1
    ) -> SimResult:
        pi, pf, qi, wi, wf, ni, nf = self.arrays(nic, t_stop=t_stop, seed=seed)
        if bidirectional:
            ni[E.NI_RX_MODE] = 1
        m_prod, m_t0, m_done, m_order, stats = E.simulate(pi, pf, qi, wi, wf, ni, nf)
        probe = np.array([p.probe for p in self.producers], dtype=bool)
        return SimResult(m_prod, m_t0, m_done, m_order, stats, probe)


@dataclass
class SimResult:
    m_prod: np.ndarray
    m_t0: np.ndarray
    m_done: np.ndarray
    m_order: np.ndarray
    stats: np.ndarray
    probe_producer: np.ndarray

    @property
    def events(self) -> int:
        return int(self.stats[E.S_EVENTS])

    @property
    def completed(self) -> int:
        return int(self.stats[E.S_DONE])

    def stat(self, idx: int) -> float:
        return float(self.stats[idx])

    def rate_mmsg(
        self, lo: float = 0.3, hi: float = 0.9, producers: np.ndarray | None = None
    ) -> float:
        """Steady-state completion rate (Mmsg/s) between the ``lo`` and ``hi`` quantiles."""
        done = self.m_done
        if producers is not None:
            done = done[np.isin(self.m_prod, producers)]
        done = np.sort(done[np.isfinite(done)])
        if done.size < 10:
            return float("nan")
        i, j = int(lo * (done.size - 1)), int(hi * (done.size - 1))
        span = done[j] - done[i]
        return (j - i) / span * 1e3 if span > 0 else float("nan")

    def probe_latencies(self, skip: float = 0.2) -> np.ndarray:
        """Completion latencies (ns) of probe messages, dropping the first ``skip`` fraction."""
        sel = self.probe_producer[self.m_prod] & np.isfinite(self.m_done)
        lat = (self.m_done - self.m_t0)[sel]
        return lat[int(skip * lat.size) :]

    def miss_rate(self) -> float:
        acc = self.stats[E.S_RX_HIT] + self.stats[E.S_RX_MISS]
        acc += self.stats[E.S_TX_HIT] + self.stats[E.S_TX_MISS]
        miss = self.stats[E.S_RX_MISS] + self.stats[E.S_TX_MISS]
        return float(miss / acc) if acc else 0.0
