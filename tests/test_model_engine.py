"""Invariants of the discrete-event engine. Small runs: the whole file takes seconds
once numba's cache is warm."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gicomm.model import engine as E
from gicomm.model import scenarios as S
from gicomm.model.cache import cache_access, new_cache
from gicomm.model.calibrate import from_paper
from gicomm.model.parameters import NicParams
from gicomm.model.topology import Producer, Topology


@pytest.fixture(scope="module")
def pib():
    return from_paper("P-IB")


@pytest.fixture(scope="module")
def ph100():
    return from_paper("P-H100")


def _shared_topology(n_prod: int, n_q: int, batch: int, nmsg: int = 400) -> Topology:
    topo = Topology()
    q0 = topo.add_queues(n_q, 64)
    for i in range(n_prod):
        topo.add(
            Producer(
                q0=q0 + i % n_q,
                t_build=50.0,
                t_ring=120.0,
                tail=2000.0,
                nmsg=nmsg,
                batch=batch,
                window=32,
            )
        )
    return topo


@settings(max_examples=12, deadline=None)
@given(
    threads=st.sampled_from([1, 4, 16, 64, 128]),
    qps=st.sampled_from([1, 2, 8, 32, 64]),
    batch=st.sampled_from([1, 4, 16, 32]),
)
def test_throughput_never_exceeds_ceiling(threads, qps, batch):
    p = from_paper("P-IB")
    rate = S.message_rate(p, threads=threads, qps=qps, batch=batch, msgs=20_000)
    assert rate <= p.nic.ceiling_mmsg() * 1.001


def test_nic_reaches_ceiling_when_offered_more(pib):
    rate = S.message_rate(pib, threads=128, qps=128, batch=32, msgs=100_000)
    assert rate == pytest.approx(pib.nic.ceiling_mmsg(), rel=0.02)


def test_every_message_completes_once_and_after_it_started():
    res = _shared_topology(24, 5, 4).run(NicParams())
    assert np.isfinite(res.m_done).all()
    assert (res.m_done > res.m_t0).all()
    assert res.completed == res.m_done.size
    assert sorted(res.m_order) == list(range(res.m_done.size))


def test_per_qp_order_is_kept():
    """Messages a producer posts to one queue are served in the order it posted them, and a
    queue's messages are served in the order their doorbells were rung (FIFO lock)."""
    topo = _shared_topology(16, 3, 8)
    res = topo.run(NicParams(n_pu=4))
    for p in range(len(topo.producers)):
        orders = res.m_order[res.m_prod == p]
        assert (np.diff(orders) > 0).all()
    # batches of one queue are never interleaved: each batch is a contiguous service run per queue
    q_of = np.array([pr.q0 for pr in topo.producers])[res.m_prod]
    for q in range(3):
        idx = np.argsort(res.m_order[q_of == q])
        t0 = res.m_t0[q_of == q][idx]
        prod = res.m_prod[q_of == q][idx]
        # within one producer the batch start times are non-decreasing in service order
        for p in np.unique(prod):
            assert (np.diff(t0[prod == p]) >= 0).all()


def test_deterministic():
    a = _shared_topology(8, 2, 4).run(NicParams())
    b = _shared_topology(8, 2, 4).run(NicParams())
    assert np.array_equal(a.m_done, b.m_done)


def test_loaded_rtt_monotone_in_load(pib):
    rtts = [
        S.loaded_rtt(pib, "gdaki", "reserved", bg_ctas=n, probes=10, bg_msgs=60_000).rtt_p50_us
        for n in (1, 8, 24, 64)
    ]
    assert all(b >= a - 1e-6 for a, b in zip(rtts, rtts[1:], strict=False))
    assert rtts[-1] > rtts[0]


def test_shared_queue_is_worse_than_reserved(pib):
    shared = S.loaded_rtt(pib, "mini-proxy", "shared", probes=6).rtt_p50_us
    reserved = S.loaded_rtt(pib, "mini-proxy", "reserved", probes=6).rtt_p50_us
    assert shared > 10 * reserved


def test_cache_lru_hits_below_capacity_and_thrashes_above():
    sets, ways = 16, 4
    for n, expect_miss in ((32, 0.0), (256, 1.0)):
        tags, stamps = new_cache(sets, ways)
        clock, miss = 0, 0
        for cycle in range(3):
            for c in range(n):
                clock += 1
                hit = cache_access(tags, stamps, sets, ways, c, clock)
                miss += (not hit) and cycle == 2
        assert miss / n == pytest.approx(expect_miss)


def test_cache_misses_grow_with_connections_beyond_capacity(ph100):
    cap = ph100.nic.cache_capacity
    pts = [S.connection_scaling(ph100, n, min_msgs=40_000) for n in (cap // 4, 2 * cap, 8 * cap)]
    miss = [pt.miss_rate for pt in pts]
    rate = [pt.rate_mmsg for pt in pts]
    assert miss[0] < miss[1] < miss[2]
    assert miss[1] > 0.3
    assert rate[0] > rate[1] > rate[2]


def test_send_only_is_flat_with_connections(ph100):
    a = S.connection_scaling(ph100, 256, bidirectional=False, min_msgs=40_000).rate_mmsg
    b = S.connection_scaling(ph100, 8192, bidirectional=False, min_msgs=40_000).rate_mmsg
    assert b == pytest.approx(a, rel=0.02)


def test_completion_scope_all_qps_costs_more(pib):
    used = S.single_op(pib, "mini-gda", qps_polled=1).completion_us
    allq = S.single_op(pib, "mini-gda", qps_polled=16).completion_us
    assert allq > used


def test_warm_proxy_is_faster_than_cold(pib):
    cold = S.proxy_rate(pib, batch=16, state="cold", msgs=40_000)
    warm = S.proxy_rate(pib, batch=16, state="warm", msgs=40_000)
    assert warm > cold
    assert (
        S.single_op(pib, "mini-proxy", state="warm").rtt_us < S.single_op(pib, "mini-proxy").rtt_us
    )


def test_t_stop_ends_early():
    topo = _shared_topology(4, 1, 1, nmsg=2000)
    pi, pf, qi, wi, wf, ni, nf = topo.arrays(NicParams(), t_stop=10_000.0)
    *_, stats = E.simulate(pi, pf, qi, wi, wf, ni, nf)
    assert stats[E.S_DONE] < 8000


def test_shared_proxy_ring_takes_the_multi_producer_enqueue(pib):
    mp = pib.path("mini-proxy")
    assert mp.shared_enqueue_ns == pytest.approx(2270.0)  # Table 3 mini-proxy baseline issue
    assert mp.enqueue_cost(pib.sm_clock_mhz, multi_producer=False) == pytest.approx(mp.issue_ns)
    assert mp.enqueue_cost(pib.sm_clock_mhz, multi_producer=True) == pytest.approx(2270.0)
    # one background CTA, unsaturated: sharing its ring costs the probe the slower enqueue only
    shared = S.loaded_rtt(pib, "mini-proxy", "shared", bg_ctas=1, probes=8).rtt_p50_us
    reserved = S.loaded_rtt(pib, "mini-proxy", "reserved", bg_ctas=1, probes=8).rtt_p50_us
    assert reserved == pytest.approx(mp.rtt_ns / 1e3, rel=0.1)
    assert shared - reserved == pytest.approx((2270.0 - mp.issue_ns) / 1e3, abs=0.5)


def test_private_probe_delay_is_bounded_by_one_worker_pass(pib):
    """The mechanism behind the Table 11 / Fig 7 gap (docs/model.md): a probe on its own ring
    waits at most one round-robin pass of its worker, whatever the chain length."""
    mp = pib.path("mini-proxy")
    for chain in (1, 16):
        r = S.loaded_rtt(pib, "mini-proxy", "reserved", probes=8, chain=chain)
        one_pass = (S.ASSUME_PROXY_RINGS + 1) * mp.worker_cost(chain) / 1e3
        assert r.rtt_p50_us <= mp.rtt_ns / 1e3 + one_pass + 1.0


def _reaping(pib, reap: bool):
    from dataclasses import replace

    p = type(pib).from_dict(pib.to_dict())
    p.paths["mini-proxy"] = replace(p.path("mini-proxy"), worker_reap_per_pass=reap)
    return p


@pytest.mark.parametrize("chain", [1, 16])
def test_per_pass_reaping_holds_completions_until_the_pass_ends(pib, chain):
    """A worker that reaps once per pass (gicomm's mini-proxy) publishes the probe's completion
    only at the end of the pass after its CQE: under load up to one more pass of delay, never
    less, and nothing changes when the worker is idle."""
    mp = pib.path("mini-proxy")
    one_pass = (S.ASSUME_PROXY_RINGS + 1) * mp.worker_cost(chain)
    kw = {"probes": 12, "chain": chain}
    now = S.loaded_rtt(_reaping(pib, False), "mini-proxy", "reserved", **kw).completion_p50_us
    held = S.loaded_rtt(_reaping(pib, True), "mini-proxy", "reserved", **kw).completion_p50_us
    assert now * 1e3 + 0.2 * one_pass < held * 1e3 <= now * 1e3 + 1.5 * one_pass
    idle_now = S.loaded_rtt(_reaping(pib, False), "mini-proxy", "reserved", bg_ctas=0, **kw)
    idle_held = S.loaded_rtt(_reaping(pib, True), "mini-proxy", "reserved", bg_ctas=0, **kw)
    assert idle_held.completion_p50_us == pytest.approx(idle_now.completion_p50_us)


def test_per_pass_reaping_keeps_every_completion_and_the_rate(pib):
    p = _reaping(pib, True)
    topo, r0 = S._proxy_topology(p, p.path("mini-proxy"), 8, 1, "cold")
    for i in range(8):
        topo.add(Producer(q0=r0 + i, t_build=130.0, t_ring=0.0, tail=1000.0, nmsg=3000, window=64))
    res = topo.run(p.nic)
    assert np.isfinite(res.m_done).all() and res.completed == 8 * 3000
    assert (res.m_done >= res.m_t0).all()
    rate_held = res.rate_mmsg()
    q = _reaping(pib, False)
    topo, r0 = S._proxy_topology(q, q.path("mini-proxy"), 8, 1, "cold")
    for i in range(8):
        topo.add(Producer(q0=r0 + i, t_build=130.0, t_ring=0.0, tail=1000.0, nmsg=3000, window=64))
    assert rate_held == pytest.approx(topo.run(q.nic).rate_mmsg(), rel=0.05)
