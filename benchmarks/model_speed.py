"""Simulation speed of the performance model: simulated operations per second, one core.

Usage: .venv/bin/python benchmarks/model_speed.py [--reuse-cache] [--msgs N]

By default numba compiles into a fresh temporary cache, so the compile time printed is a real
compile; --reuse-cache loads the project's cache instead. A simulated operation is one 8-byte
message taken from issue through NIC processing to its completion. Speed is reported per wall
second and per CPU second of the simulating thread (the verdict uses CPU time, so that other
processes sharing the core do not count against the model).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reuse-cache", action="store_true", help="use the existing numba cache")
    ap.add_argument("--msgs", type=int, default=2_000_000, help="messages per workload")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per workload (best kept)")
    args = ap.parse_args()
    if not args.reuse_cache:
        os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="gicomm-numba-")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

    t0 = time.perf_counter()
    from gicomm.model import engine as E
    from gicomm.model import scenarios as S
    from gicomm.model.calibrate import from_paper
    from gicomm.model.topology import Producer, Topology

    t_import = time.perf_counter() - t0
    pib, ph100 = from_paper("P-IB"), from_paper("P-H100")

    def gpu_rate() -> Topology:
        topo = Topology()
        q0 = topo.add_queues(64, 1024)
        mg = pib.path("mini-gda")
        for i in range(64):
            topo.add(
                Producer(
                    q0=q0 + i,
                    t_build=mg.build_cost(1980),
                    t_ring=mg.ring_cost(1980),
                    tail=3000.0,
                    nmsg=args.msgs // 64,
                    batch=16,
                    window=1024,
                )
            )
        return topo

    def connections() -> Topology:
        topo = Topology()
        q0 = topo.add_queues(3000, 64)
        for i in range(64):
            topo.add(
                Producer(
                    q0=q0 + i * 46,
                    nq=46,
                    t_build=96.0,
                    t_ring=369.0,
                    tail=3000.0,
                    nmsg=args.msgs // 64,
                    batch=32,
                    visit=32,
                    window=64,
                )
            )
        return topo

    def proxy() -> Topology:
        topo = Topology()
        for r in range(8):
            topo.add_queue(4096, E.QK_RING, worker=r // 2)
        for w in range(4):
            qp = topo.add_queue(4096)
            topo.add_worker(2 * w, 2, qp, 16, 124.0, 27.0)
        for i in range(64):
            topo.add(
                Producer(
                    q0=i % 8,
                    t_build=130.0,
                    t_ring=0.0,
                    tail=3500.0,
                    nmsg=args.msgs // 64,
                    window=4096,
                )
            )
        return topo

    workloads = {
        "gpu 64 QPs x 16 WQEs/doorbell (P-IB)": (gpu_rate, pib, False),
        "3000 connections, send+recv, context cache (P-H100)": (connections, ph100, True),
        "CPU proxy, 4 workers, 8 rings (P-IB)": (proxy, pib, False),
    }

    # compile: the first call of the engine (tiny run)
    t0, c0 = time.perf_counter(), time.process_time()
    S.single_op(pib, "mini-gda", n=2)
    t_compile, c_compile = time.perf_counter() - t0, time.process_time() - c0
    what = "compile or cache load" if args.reuse_cache else "fresh compile"
    print(
        f"numba: import {t_import:.2f} s, first call ({what}) {t_compile:.2f} s wall, "
        f"{c_compile:.2f} s CPU"
    )
    worst = float("inf")
    for name, (build, params, bidir) in workloads.items():
        topo = build()
        arrays = topo.arrays(params.nic)
        if bidir:
            arrays[5][E.NI_RX_MODE] = 1
        best, best_cpu = float("inf"), float("inf")
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.thread_time()
            *_, stats = E.simulate(*arrays)
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.thread_time() - c0)
        done = stats[E.S_DONE]
        ops, ops_cpu = done / best, done / best_cpu
        worst = min(worst, ops_cpu)
        print(
            f"{name}: {int(done):,} ops ({int(stats[E.S_EVENTS]):,} events); "
            f"wall {best:.3f} s = {ops / 1e6:.2f} M ops/s; "
            f"CPU {best_cpu:.3f} s = {ops_cpu / 1e6:.2f} M ops/s"
        )
    verdict = "PASS" if worst >= 1e6 else "FAIL"
    print(
        f"slowest workload: {worst / 1e6:.2f} M simulated ops per CPU-second, one core "
        f"(target >= 1.00): {verdict}"
    )
    return 0 if worst >= 1e6 else 1


if __name__ == "__main__":
    raise SystemExit(main())
