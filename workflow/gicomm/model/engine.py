"""The discrete-event engine of the GPU-NIC submission path (numba, no Python objects inside).

Entities (plain numpy arrays, built by :mod:`gicomm.model.topology` for :mod:`.scenarios`):

* producers (GPU threads/warps, or GPU enqueuers of a CPU proxy) build ``batch`` WQEs or
  descriptors (``t_build`` each), take their queue's lock and ring once (``t_ring``, held under the
  lock, FIFO arbitration), and keep at most ``window`` messages outstanding; they visit ``nq``
  queues in turn (``visit`` messages per visit, round-robin or random order) and may be paced;
* queues are NIC send queues (kind 0) or proxy rings in host memory (kind 1), each with a finite
  depth; a producer that finds its queue full waits (FIFO) until slots are freed;
* proxy workers poll their rings round-robin, chain up to ``bmax`` requests per post
  (``t0 + n * tper``) and post them to their own NIC send queue; a worker with ``reap`` set
  publishes completions once per pass over its rings (at the pass end, or at once while it has
  nothing to post), as gicomm's mini-proxy does, instead of as soon as the CQE is written;
* the NIC has ``n_pu`` processing units. A unit takes the next ready send queue (one unit per
  queue at a time, so per-queue order is kept), fetches up to ``burst_max`` WQEs in DMA reads of
  ``fetch_max`` (``t_fetch`` each) and processes each (``t_wqe``). Received traffic (``rx_mode``)
  is served first at ``t_rx`` per message. Every work item touches its connection's context in a
  set-associative LRU cache; a miss costs ``t_miss_tx`` (send side) or ``t_miss_rx`` (receive side)
  of unit time;
* a message's completion becomes visible ``lat_tail`` after its WQE was processed (wire, ack, CQE
  write and the completion poll, whose scope is folded into ``lat_tail`` by the scenario).

Column layouts of the parameter arrays are the ``PI_*``, ``PF_*``, ``QI_*``, ``WI_*``, ``WF_*``,
``NI_*`` and ``NF_*`` constants below.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gicomm.model.cache import cache_access
from gicomm.model.events import (
    EV_MSG_DONE,
    EV_NIC_DONE,
    EV_P_BUILT,
    EV_P_RUNG,
    EV_P_START,
    EV_W_CQE,
    EV_W_DONE,
    EV_W_POLL,
    heap_pop,
    heap_push,
)

# producer integer columns
PI_Q0, PI_NQ, PI_BATCH, PI_VISIT, PI_WINDOW, PI_NMSG, PI_PROBE, PI_RANDOM = range(8)
PI_NCOL = 8
# producer float columns (ns)
PF_BUILD, PF_RING, PF_PACE, PF_TAIL, PF_START = range(5)
PF_NCOL = 5
# queue integer columns
QI_DEPTH, QI_KIND, QI_WORKER, QI_CONN = range(4)
QI_NCOL = 4
QK_NIC, QK_RING = 0, 1
# worker integer / float columns
WI_R0, WI_NR, WI_QP, WI_BMAX, WI_REAP = range(5)
WI_NCOL = 5
WF_T0, WF_TPER = range(2)
WF_NCOL = 2
# NIC integer / float fields
NI_NPU, NI_FETCH_MAX, NI_BURST_MAX, NI_RX_MODE, NI_SETS, NI_WAYS, NI_RX_SHIFT, NI_RX_MOD = range(8)
NI_SEED = 8
NI_N = 9
NF_FETCH, NF_WQE, NF_RX, NF_MISS_TX, NF_MISS_RX, NF_T_STOP = range(6)
NF_N = 6
# receive traffic of connection c arrives on connection (c * RX_MULT + shift) % n: the peer's
# schedule is a fixed pseudo-random permutation of ours (RX_MULT is a prime above any count used)
RX_MULT = 1000003
# statistics fields returned by simulate()
(
    S_EVENTS,
    S_T_END,
    S_NIC_BUSY,
    S_TX_ITEMS,
    S_TX_WQES,
    S_TX_HIT,
    S_TX_MISS,
    S_RX_ITEMS,
    S_RX_HIT,
    S_RX_MISS,
    S_DONE,
) = range(11)
S_N = 11


@njit(cache=True, inline="always")
def _work_for_idle(u_kind: np.ndarray, rdy_st: np.ndarray, rx_st: np.ndarray) -> bool:
    """Whether some unit is idle while work waits (skips a call to ``_nic_fill`` otherwise)."""
    if rdy_st[1] == 0 and rx_st[1] == 0:
        return False
    idle = False
    for u in range(u_kind.shape[0]):
        if u_kind[u] == 0:
            idle = True
            break
    return idle


@njit(cache=True)
def _reap(
    w: int,
    now: float,
    w_pend: np.ndarray,
    run_next: np.ndarray,
    run_id: np.ndarray,
    ht: np.ndarray,
    hs: np.ndarray,
    hk: np.ndarray,
    hi: np.ndarray,
    hst: np.ndarray,
) -> None:
    """Worker ``w`` publishes the completions of every run whose CQE it holds (in CQE order)."""
    r0 = w_pend[w, 0]
    while r0 >= 0:
        heap_push(ht, hs, hk, hi, hst, now, EV_MSG_DONE, run_id[r0])
        r0 = run_next[r0]
    w_pend[w, 0] = -1
    w_pend[w, 1] = -1


@njit(cache=True)
def _nic_fill(
    first: int,
    now: float,
    nf: np.ndarray,
    ni: np.ndarray,
    qi: np.ndarray,
    q_head: np.ndarray,
    q_cnt: np.ndarray,
    q_inserv: np.ndarray,
    q_inrdy: np.ndarray,
    rdy: np.ndarray,
    rdy_st: np.ndarray,
    rxc: np.ndarray,
    rxn: np.ndarray,
    rx_st: np.ndarray,
    u_kind: np.ndarray,
    u_q: np.ndarray,
    u_start: np.ndarray,
    u_n: np.ndarray,
    ctags: np.ndarray,
    cstamps: np.ndarray,
    stats: np.ndarray,
    ht: np.ndarray,
    hs: np.ndarray,
    hk: np.ndarray,
    hi: np.ndarray,
    hst: np.ndarray,
) -> None:
    """Give NIC units work: unit ``first`` (just finished; -1 for none) first, then every idle
    unit, while there is any. Received traffic is served before the oldest ready send queue."""
    sets = ni[NI_SETS]
    ways = ni[NI_WAYS]
    for k in range(-1, u_kind.shape[0]):
        u = first if k < 0 else k
        if u < 0 or (k >= 0 and u_kind[u] != 0):
            continue
        if rx_st[1] > 0:
            h = rx_st[0]
            conn = rxc[h]
            n = rxn[h]
            rx_st[0] = (h + 1) % rxc.shape[0]
            rx_st[1] -= 1
            cost = n * nf[NF_RX]
            stats[S_RX_ITEMS] += 1
            stamp = int(stats[S_TX_ITEMS] + stats[S_RX_ITEMS])  # one tick per context access
            if cache_access(ctags, cstamps, sets, ways, conn, stamp):
                stats[S_RX_HIT] += 1
            else:
                stats[S_RX_MISS] += 1
                cost += nf[NF_MISS_RX]
            u_kind[u] = 2
            u_q[u] = conn
            u_n[u] = n
            stats[S_NIC_BUSY] += cost
            heap_push(ht, hs, hk, hi, hst, now + cost, EV_NIC_DONE, u)
            continue
        if rdy_st[1] > 0:
            h = rdy_st[0]
            q = rdy[h]
            rdy_st[0] = (h + 1) % rdy.shape[0]
            rdy_st[1] -= 1
            q_inrdy[q] = 0
            n = q_cnt[q]
            if n > ni[NI_BURST_MAX]:
                n = ni[NI_BURST_MAX]
            fm = ni[NI_FETCH_MAX]
            cost = ((n + fm - 1) // fm) * nf[NF_FETCH] + n * nf[NF_WQE]
            stats[S_TX_ITEMS] += 1
            stats[S_TX_WQES] += n
            stamp = int(stats[S_TX_ITEMS] + stats[S_RX_ITEMS])
            if cache_access(ctags, cstamps, sets, ways, qi[q, QI_CONN], stamp):
                stats[S_TX_HIT] += 1
            else:
                stats[S_TX_MISS] += 1
                cost += nf[NF_MISS_TX]
            depth = qi[q, QI_DEPTH]
            u_kind[u] = 1
            u_q[u] = q
            u_start[u] = q_head[q]
            u_n[u] = n
            q_head[q] = (q_head[q] + n) % depth
            q_cnt[q] -= n
            q_inserv[q] = 1
            stats[S_NIC_BUSY] += cost
            heap_push(ht, hs, hk, hi, hst, now + cost, EV_NIC_DONE, u)
            continue
        u_kind[u] = 0
        break  # no work left for any unit


@njit(cache=True, inline="always")
def _nic_notify(
    q: int,
    now: float,
    q_cnt: np.ndarray,
    q_inserv: np.ndarray,
    q_inrdy: np.ndarray,
    rdy: np.ndarray,
    rdy_st: np.ndarray,
) -> None:
    """Queue ``q`` has visible WQEs: put it on the ready list unless it is listed or in service."""
    if q_cnt[q] > 0 and q_inserv[q] == 0 and q_inrdy[q] == 0:
        t = (rdy_st[0] + rdy_st[1]) % rdy.shape[0]
        rdy[t] = q
        rdy_st[1] += 1
        q_inrdy[q] = 1


@njit(cache=True, inline="always")
def _doorbell_wakes(
    q: int,
    q_cnt: np.ndarray,
    q_inserv: np.ndarray,
    q_inrdy: np.ndarray,
    rdy: np.ndarray,
    rdy_st: np.ndarray,
    u_kind: np.ndarray,
    rx_st: np.ndarray,
) -> bool:
    """A doorbell on NIC queue ``q``: list it as ready; whether an idle unit should now start."""
    _nic_notify(q, 0.0, q_cnt, q_inserv, q_inrdy, rdy, rdy_st)
    return _work_for_idle(u_kind, rdy_st, rx_st)


@njit(cache=True, inline="always")
def _wake_waiters(
    q: int,
    n: int,
    q_wh: np.ndarray,
    q_wt: np.ndarray,
    p_wnext: np.ndarray,
    ready_p: np.ndarray,
    n_ready_p: int,
) -> int:
    """Move up to ``n`` producers waiting (FIFO) for slots of queue ``q`` to the ready stack;
    returns the new stack size."""
    woken = 0
    while q_wh[q] >= 0 and woken < n:
        p = q_wh[q]
        q_wh[q] = p_wnext[p]
        if q_wh[q] < 0:
            q_wt[q] = -1
        ready_p[n_ready_p] = p
        n_ready_p += 1
        woken += 1
    return n_ready_p


@njit(cache=True)
def simulate(
    pi: np.ndarray,
    pf: np.ndarray,
    qi: np.ndarray,
    wi: np.ndarray,
    wf: np.ndarray,
    ni: np.ndarray,
    nf: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Run the model to completion, to ``nf[NF_T_STOP]`` when positive, or until every probe
    message (producers with ``PI_PROBE`` set) has completed.

    Returns ``(m_prod, m_t0, m_done, m_order, stats)``: per message its producer, the time its
    batch started, the time its completion became visible (NaN if never) and its NIC service
    order (-1 if never served); ``stats`` is indexed by the ``S_*`` constants.
    """
    n_p = pi.shape[0]
    n_q = qi.shape[0]
    n_w = wi.shape[0]
    n_pu = ni[NI_NPU]

    # messages
    p_off = np.zeros(n_p + 1, dtype=np.int64)
    for p in range(n_p):
        p_off[p + 1] = p_off[p] + pi[p, PI_NMSG]
    n_m = p_off[n_p]
    m_prod = np.empty(n_m, dtype=np.int32)
    for p in range(n_p):
        for m in range(p_off[p], p_off[p + 1]):
            m_prod[m] = p
    m_t0 = np.full(n_m, np.nan)
    m_done = np.full(n_m, np.nan)
    m_order = np.full(n_m, -1, dtype=np.int64)

    # queues
    q_off = np.zeros(n_q + 1, dtype=np.int64)
    for q in range(n_q):
        q_off[q + 1] = q_off[q] + qi[q, QI_DEPTH]
    q_buf = np.zeros(q_off[n_q], dtype=np.int64)
    q_head = np.zeros(n_q, dtype=np.int64)
    q_tail = np.zeros(n_q, dtype=np.int64)
    q_cnt = np.zeros(n_q, dtype=np.int64)
    q_occ = np.zeros(n_q, dtype=np.int64)
    q_lock = np.zeros(n_q, dtype=np.float64)
    q_inserv = np.zeros(n_q, dtype=np.int8)
    q_inrdy = np.zeros(n_q, dtype=np.int8)
    q_wh = np.full(n_q, -1, dtype=np.int64)
    q_wt = np.full(n_q, -1, dtype=np.int64)
    q_nprod = np.zeros(n_q, dtype=np.int64)  # producers that may post to each queue
    for p in range(n_p):
        for k in range(pi[p, PI_NQ]):
            q_nprod[pi[p, PI_Q0] + k] += 1
    rdy = np.zeros(n_q + 1, dtype=np.int64)
    rdy_st = np.zeros(2, dtype=np.int64)
    rx_cap = n_pu + n_w + 8
    rxc = np.zeros(rx_cap, dtype=np.int64)
    rxn = np.zeros(rx_cap, dtype=np.int64)
    rx_st = np.zeros(2, dtype=np.int64)

    # producers
    p_sent = np.zeros(n_p, dtype=np.int64)
    p_out = np.zeros(n_p, dtype=np.int64)
    p_idx = np.zeros(n_p, dtype=np.int64)
    p_vleft = pi[:, PI_VISIT].copy()
    p_b = np.zeros(n_p, dtype=np.int64)
    p_m0 = np.zeros(n_p, dtype=np.int64)
    p_waitwin = np.zeros(n_p, dtype=np.int8)
    p_next_ok = np.zeros(n_p, dtype=np.float64)
    p_wnext = np.full(n_p, -1, dtype=np.int64)
    p_rng = np.zeros(n_p, dtype=np.uint64)
    for p in range(n_p):
        p_rng[p] = np.uint64(ni[NI_SEED] * 1000003 + p * 7919 + 1)

    # workers and NIC units
    w_busy = np.zeros(n_w, dtype=np.int8)
    w_ptr = np.zeros(n_w, dtype=np.int64)
    w_ring = np.zeros(n_w, dtype=np.int64)
    w_start = np.zeros(n_w, dtype=np.int64)
    w_n = np.zeros(n_w, dtype=np.int64)
    # per-pass reaping: each worker's held runs as a list (first, last run start) through run_next
    w_pend = np.full((n_w, 2), -1, dtype=np.int64)
    run_next = np.full(max(n_m, 1), -1, dtype=np.int64)
    run_id = np.zeros(max(n_m, 1), dtype=np.int64)
    u_kind = np.zeros(n_pu, dtype=np.int64)
    u_q = np.zeros(n_pu, dtype=np.int64)
    u_start = np.zeros(n_pu, dtype=np.int64)
    u_n = np.zeros(n_pu, dtype=np.int64)
    n_cache = max(ni[NI_SETS], 1) * max(ni[NI_WAYS], 1)
    ctags = np.full(n_cache, -1, dtype=np.int64)
    cstamps = np.zeros(n_cache, dtype=np.int64)

    stats = np.zeros(S_N, dtype=np.float64)
    cap = n_m + 2 * n_p + 2 * n_w + n_pu + 64
    ht = np.zeros(cap, dtype=np.float64)
    hs = np.zeros(cap, dtype=np.int64)
    hk = np.zeros(cap, dtype=np.int32)
    hi = np.zeros(cap, dtype=np.int64)
    hst = np.zeros(2, dtype=np.int64)
    for p in range(n_p):
        if pi[p, PI_NMSG] > 0:
            heap_push(ht, hs, hk, hi, hst, pf[p, PF_START], EV_P_START, p)

    t_stop = nf[NF_T_STOP]
    probe_left = 0
    for p in range(n_p):
        if pi[p, PI_PROBE] == 1:
            probe_left += pi[p, PI_NMSG]
    has_probe = probe_left > 0
    cq = np.zeros(n_m, dtype=np.int64)  # message ids in NIC service order
    cq_n = 0
    order = 0
    now = 0.0
    # producers to (re)start at the current time: a stack instead of zero-delay heap events
    ready_p = np.zeros(2 * n_p + 16, dtype=np.int64)
    n_ready_p = 0
    while True:
        if n_ready_p > 0:
            n_ready_p -= 1
            kind = EV_P_START
            ident = ready_p[n_ready_p]
        elif hst[0] > 0:
            now, kind, ident = heap_pop(ht, hs, hk, hi, hst)
            if t_stop > 0.0 and now > t_stop:
                break
        else:
            break
        stats[S_EVENTS] += 1
        if kind == EV_P_START:
            p = ident
            if p_sent[p] >= pi[p, PI_NMSG]:
                continue
            if now < p_next_ok[p]:
                heap_push(ht, hs, hk, hi, hst, p_next_ok[p], EV_P_START, p)
                continue
            q = pi[p, PI_Q0] + p_idx[p]
            b = pi[p, PI_BATCH]
            b = min(b, pi[p, PI_NMSG] - p_sent[p])
            b = min(b, p_vleft[p])
            room = pi[p, PI_WINDOW] - p_out[p]
            if room <= 0:
                p_waitwin[p] = 1
                continue
            b = min(b, room)
            space = qi[q, QI_DEPTH] - q_occ[q]
            if space <= 0:
                # wait (FIFO) for slots in queue q
                p_wnext[p] = -1
                if q_wt[q] < 0:
                    q_wh[q] = p
                else:
                    p_wnext[q_wt[q]] = p
                q_wt[q] = p
                continue
            b = min(b, space)
            q_occ[q] += b
            m0 = p_off[p] + p_sent[p]
            for m in range(m0, m0 + b):
                m_t0[m] = now
            p_m0[p] = m0
            p_b[p] = b
            p_sent[p] += b
            p_out[p] += b
            if pf[p, PF_PACE] > 0.0:
                p_next_ok[p] = now + b * pf[p, PF_PACE]
            t_built = now + b * pf[p, PF_BUILD]
            if pf[p, PF_RING] == 0.0:
                # nothing held under a lock (a posted-store enqueue): visible once built
                heap_push(ht, hs, hk, hi, hst, t_built, EV_P_RUNG, p)
            elif q_nprod[q] == 1:
                # sole producer of the queue: the lock is free when it asks, skip EV_P_BUILT
                q_lock[q] = t_built + pf[p, PF_RING]
                heap_push(ht, hs, hk, hi, hst, q_lock[q], EV_P_RUNG, p)
            else:
                heap_push(ht, hs, hk, hi, hst, t_built, EV_P_BUILT, p)
        elif kind == EV_P_BUILT:
            p = ident
            q = pi[p, PI_Q0] + p_idx[p]
            start = max(now, q_lock[q])
            q_lock[q] = start + pf[p, PF_RING]
            heap_push(ht, hs, hk, hi, hst, q_lock[q], EV_P_RUNG, p)
        elif kind == EV_P_RUNG:
            p = ident
            q = pi[p, PI_Q0] + p_idx[p]
            b = p_b[p]
            depth = qi[q, QI_DEPTH]
            tail = q_tail[q]
            base = q_off[q]
            for k in range(b):
                q_buf[base + tail] = p_m0[p] + k
                tail += 1
                if tail == depth:
                    tail = 0
            q_tail[q] = tail
            q_cnt[q] += b
            if qi[q, QI_KIND] == QK_NIC:
                if _doorbell_wakes(q, q_cnt, q_inserv, q_inrdy, rdy, rdy_st, u_kind, rx_st):
                    _nic_fill(
                        -1, now, nf, ni, qi, q_head, q_cnt, q_inserv, q_inrdy, rdy, rdy_st,
                        rxc, rxn, rx_st, u_kind, u_q, u_start, u_n, ctags, cstamps,
                        stats, ht, hs, hk, hi, hst,
                    )  # fmt: skip
            else:
                w = qi[q, QI_WORKER]
                if w_busy[w] == 0:
                    w_busy[w] = 2  # poll scheduled
                    heap_push(ht, hs, hk, hi, hst, now, EV_W_POLL, w)
            # next visit
            p_vleft[p] -= b
            if p_vleft[p] <= 0:
                p_vleft[p] = pi[p, PI_VISIT]
                nq = pi[p, PI_NQ]
                if nq > 1:
                    if pi[p, PI_RANDOM] == 1:
                        x = p_rng[p]
                        x ^= x << np.uint64(13)
                        x ^= x >> np.uint64(7)
                        x ^= x << np.uint64(17)
                        p_rng[p] = x
                        p_idx[p] = np.int64(x % np.uint64(nq))
                    else:
                        p_idx[p] = (p_idx[p] + 1) % nq
            if p_next_ok[p] > now:
                heap_push(ht, hs, hk, hi, hst, p_next_ok[p], EV_P_START, p)
            else:
                ready_p[n_ready_p] = p
                n_ready_p += 1
        elif kind == EV_NIC_DONE:
            u = ident
            if u_kind[u] == 1:
                q = u_q[u]
                depth = qi[q, QI_DEPTH]
                n = u_n[u]
                # completions are logged in service order; one event per run of messages
                # with the same completion tail
                run0 = cq_n
                t_run = -1.0
                # a per-pass worker's completions wait for its reap (EV_W_CQE, the run id
                # times the worker count plus the worker); others become visible
                wq = qi[q, QI_WORKER]
                held = wq >= 0 and wi[wq, WI_REAP] == 1
                ev_done = EV_W_CQE if held else EV_MSG_DONE
                id_mul = n_w if held else 1
                id_add = wq if held else 0
                idx = u_start[u]
                base = q_off[q]
                for _k in range(n):
                    m = q_buf[base + idx]
                    idx += 1
                    if idx == depth:
                        idx = 0
                    m_order[m] = order
                    order += 1
                    t_done = now + pf[m_prod[m], PF_TAIL]
                    if t_done != t_run or cq_n - run0 >= 63:
                        if cq_n > run0:
                            heap_push(ht, hs, hk, hi, hst, t_run, ev_done,
                                      (run0 * 64 + (cq_n - run0)) * id_mul + id_add)  # fmt: skip
                        run0 = cq_n
                        t_run = t_done
                    cq[cq_n] = m
                    cq_n += 1
                if cq_n > run0:
                    heap_push(ht, hs, hk, hi, hst, t_run, ev_done,
                              (run0 * 64 + (cq_n - run0)) * id_mul + id_add)  # fmt: skip
                q_occ[q] -= n
                q_inserv[q] = 0
                _nic_notify(q, now, q_cnt, q_inserv, q_inrdy, rdy, rdy_st)
                # wake producers waiting for slots, and the worker feeding this queue
                n_ready_p = _wake_waiters(q, n, q_wh, q_wt, p_wnext, ready_p, n_ready_p)
                w = qi[q, QI_WORKER]
                if w >= 0 and w_busy[w] == 0:
                    w_busy[w] = 2
                    heap_push(ht, hs, hk, hi, hst, now, EV_W_POLL, w)
                if ni[NI_RX_MODE] == 1:
                    t = (rx_st[0] + rx_st[1]) % rxc.shape[0]
                    rxc[t] = (qi[q, QI_CONN] * RX_MULT + ni[NI_RX_SHIFT]) % ni[NI_RX_MOD]
                    rxn[t] = n
                    rx_st[1] += 1
            _nic_fill(
                u, now, nf, ni, qi, q_head, q_cnt, q_inserv, q_inrdy, rdy, rdy_st, rxc, rxn, rx_st,
                u_kind, u_q, u_start, u_n, ctags, cstamps, stats, ht, hs, hk, hi, hst,
            )  # fmt: skip
        elif kind == EV_MSG_DONE:
            c0 = ident >> 6
            cnt = ident & 63
            stats[S_DONE] += cnt
            for c in range(c0, c0 + cnt):
                m = cq[c]
                p = m_prod[m]
                m_done[m] = now
                p_out[p] -= 1
                if pi[p, PI_PROBE] == 1:
                    probe_left -= 1
                if p_waitwin[p] == 1:
                    p_waitwin[p] = 0
                    ready_p[n_ready_p] = p
                    n_ready_p += 1
            if probe_left == 0 and has_probe:
                break  # all probes answered: the background has served its purpose
        elif kind == EV_W_CQE:
            w = ident % n_w
            run = ident // n_w
            if w_busy[w] == 0:  # an idle worker spins on its CQ: published at once
                heap_push(ht, hs, hk, hi, hst, now, EV_MSG_DONE, run)
            else:
                r0 = run >> 6
                run_id[r0] = run
                run_next[r0] = -1
                if w_pend[w, 1] >= 0:
                    run_next[w_pend[w, 1]] = r0
                else:
                    w_pend[w, 0] = r0
                w_pend[w, 1] = r0
        elif kind == EV_W_POLL:
            w = ident
            w_busy[w] = 0
            nr = wi[w, WI_NR]
            found = -1
            base = w_ptr[w]  # 0..nr: the ring after the last one posted, unwrapped
            crossed = True  # the scan went past the last ring: a pass ended
            for k in range(nr):
                j = (base + k) % nr
                r = wi[w, WI_R0] + j
                if q_cnt[r] > 0:
                    found = r
                    crossed = base + k >= nr
                    w_ptr[w] = j + 1
                    break
            qp = wi[w, WI_QP]
            n = 0
            if found >= 0:
                n = min(q_cnt[found], wi[w, WI_BMAX])
                n = min(n, qi[qp, QI_DEPTH] - q_occ[qp])
            if (crossed or n <= 0) and w_pend[w, 0] >= 0:
                _reap(w, now, w_pend, run_next, run_id, ht, hs, hk, hi, hst)
            if n <= 0:
                continue  # idle, or woken again when the NIC frees slots of its queue
            q_occ[qp] += n
            w_ring[w] = found
            w_start[w] = q_head[found]
            w_n[w] = n
            q_head[found] = (q_head[found] + n) % qi[found, QI_DEPTH]
            q_cnt[found] -= n
            w_busy[w] = 1
            heap_push(ht, hs, hk, hi, hst, now + wf[w, WF_T0] + n * wf[w, WF_TPER], EV_W_DONE, w)
        elif kind == EV_W_DONE:
            w = ident
            r = w_ring[w]
            qp = wi[w, WI_QP]
            n = w_n[w]
            rdepth = qi[r, QI_DEPTH]
            depth = qi[qp, QI_DEPTH]
            src = w_start[w]
            dst = q_tail[qp]
            for _k in range(n):
                q_buf[q_off[qp] + dst] = q_buf[q_off[r] + src]
                src += 1
                if src == rdepth:
                    src = 0
                dst += 1
                if dst == depth:
                    dst = 0
            q_tail[qp] = dst
            q_cnt[qp] += n
            q_occ[r] -= n
            n_ready_p = _wake_waiters(r, n, q_wh, q_wt, p_wnext, ready_p, n_ready_p)
            if _doorbell_wakes(qp, q_cnt, q_inserv, q_inrdy, rdy, rdy_st, u_kind, rx_st):
                _nic_fill(
                    -1, now, nf, ni, qi, q_head, q_cnt, q_inserv, q_inrdy, rdy, rdy_st,
                    rxc, rxn, rx_st, u_kind, u_q, u_start, u_n, ctags, cstamps,
                    stats, ht, hs, hk, hi, hst,
                )  # fmt: skip
            w_busy[w] = 2
            heap_push(ht, hs, hk, hi, hst, now, EV_W_POLL, w)
    stats[S_T_END] = now
    return m_prod, m_t0, m_done, m_order, stats
