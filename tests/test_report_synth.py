"""A small synthetic campaign for the report, figure, claim and browser tests.

Synthetic records live only in tests: they exercise the code paths (several runs, a clock sweep,
a connection sweep, a real-NIC and a software-NIC backend, a skipped experiment); they are never
measurements and never leave the test's tmp directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from conftest import make_record, write_jsonl

from gicomm.aggregate import summarize_runs, transport_ratios
from gicomm.claims import check_claims
from gicomm.fits import clock_fits
from gicomm.records import check_record
from gicomm.tidy import tidy_frame

RUNS = 3


def hardware(campaign: str, host: str = "h1", gpu: str = "NVIDIA H200") -> dict:
    return {
        "host": host, "hostname": f"{host}.example", "provenance_id": f"{host}-prov",
        "date": "2026-11-30T00:00:00Z", "kernel": "6.1.0",
        "cpu": {"model": "Test CPU", "logical_cores": 2, "numa_nodes": [0], "governor": None},
        "gpus": {"devices": [{"name": gpu, "sm_count": 132, "sm_clock_mhz": 1980,
                              "sm_clock_max_mhz": 1980}], "driver": "580", "cuda_driver_version": "13.0"},
        "rdma": {"devices": [], "note": "no RDMA device"},
        "tools": {"nvcc": "13.0"}, "git": {"commit": "abc123", "dirty": False},
        "campaign": campaign,
    }  # fmt: skip


def _rec(campaign: str, run: int, rng: np.random.Generator, p50: float, **kw: object) -> dict:
    noise = float(rng.normal(1.0, 0.01))
    v = p50 * noise
    params = kw.pop("params")
    pid = "-".join(f"{k}{v}" for k, v in sorted(params.items()))
    return make_record(
        campaign=campaign, run_index=run, params=params, point_id=pid,
        stats={"n": 100, "p50": v, "p99": v * 1.3, "min": v * 0.9, "max": v * 1.5},
        **kw,
    )  # fmt: skip


def synthetic_records(campaign: str = "synth", backend: str = "softnic-cpu") -> list[dict]:
    rng = np.random.default_rng(7)
    out: list[dict] = []
    for run in range(RUNS):

        def r(p50: float, run: int = run, **kw: object) -> None:
            kw.setdefault("nic_backend", backend)
            out.append(_rec(campaign, run, rng, p50, **kw))

        for payload, comp in (("inline", 4030.0), ("pointer", 4640.0)):
            r(700.0, experiment="one_op", metric="issue_ns", params={"payload": payload, "size": 8})
            r(
                comp,
                experiment="one_op",
                metric="completion_ns",
                params={"payload": payload, "size": 8},
            )
            r(
                comp + 2800,
                experiment="one_op",
                metric="rtt_ns",
                params={"payload": payload, "size": 8},
            )
        for enq, issue in (("tuned", 130.0), ("baseline", 2270.0)):
            r(
                issue,
                experiment="one_op",
                transport="mini-proxy",
                metric="issue_ns",
                params={"enqueue": enq, "size": 8},
            )
        for ordering, issue in (
            ("none", 190.0),
            ("gpu_fence", 700.0),
            ("threadfence", 1220.0),
            ("sys_release", 2370.0),
            ("sys_fence", 2620.0),
        ):
            r(issue, experiment="ordering", metric="issue_ns", params={"ordering": ordering})
        for f in (600.0, 1000.0, 1400.0, 1800.0):
            out.append(
                _rec(
                    campaign,
                    run,
                    rng,
                    2000.0 * 1000.0 / f + 300.0,
                    experiment="sm_clock",
                    metric="issue_ns",
                    nic_backend=backend,
                    sm_clock_mhz=f,
                    params={"sm_clock_mhz": f},
                )
            )
        for n in (256, 512, 1024, 2048, 4096, 8192):
            rate = 240.0 if n <= 1024 else 240.0 * (n / 1024) ** -0.8
            r(
                rate,
                experiment="connection_scaling",
                metric="msg_rate",
                unit="Mmsg/s",
                nic_backend="mlx5",
                params={"active_qps": n, "direction": "send_recv"},
            )
        for code, regs in (("absent", 29.0), ("dormant", 32.0)):
            r(
                regs,
                experiment="kernel_cost",
                metric="registers",
                unit="count",
                params={"code": code},
            )
        out.append(
            make_record(
                campaign=campaign,
                run_index=run,
                experiment="goodput",
                metric="goodput",
                unit="GB/s",
                status="skipped",
                stats=None,
                error="needs an RDMA NIC (none found)",
                params={"size": 4096},
            )
        )
    for rec in out:
        if rec.get("stats") is None:
            rec.pop("stats")
        check_record(rec, "synthetic")
    return out  # fmt: skip


def write_archived_campaign(root: Path, campaign: str = "synth") -> Path:
    """results/archive/<campaign>/{hosts,raw} under `root`, as the pipeline reads archives."""
    base = root / "results" / "archive" / campaign
    records = synthetic_records(campaign)
    hw = base / "hosts" / "h1" / "hardware.json"
    hw.parent.mkdir(parents=True, exist_ok=True)
    hw.write_text(json.dumps(hardware(campaign)))
    by_exp: dict[str, list[dict]] = {}
    for rec in records:
        by_exp.setdefault(rec["experiment"], []).append(rec)
    for exp, recs in by_exp.items():
        for run in range(RUNS):
            write_jsonl(base / "raw" / exp / "h1" / f"run{run}" / "batch0.jsonl",
                        [x for x in recs if x["run_index"] == run])  # fmt: skip
    return base


def synthetic_tables(campaign: str = "synth") -> dict[str, pd.DataFrame]:
    """records, summary, ratios, fits, claims of the synthetic campaign (as the rules make them)."""
    records = tidy_frame(synthetic_records(campaign))
    summary = summarize_runs(records)
    claims = check_claims(summary, records, [hardware(campaign)])
    return {
        "records": records, "summary": summary, "ratios": transport_ratios(records),
        "fits": clock_fits(summary), "claims": claims,
    }  # fmt: skip


def test_synthetic_campaign_is_valid_and_complete():
    t = synthetic_tables()
    assert set(t["summary"]["runs"]) == {RUNS}
    assert {"one_op", "ordering", "sm_clock", "connection_scaling", "kernel_cost"} <= set(
        t["summary"]["experiment"]
    )
    assert "goodput" not in set(t["summary"]["experiment"])
