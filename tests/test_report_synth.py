"""A small synthetic campaign for the report, figure, claim and browser tests.

Synthetic records live only in tests: they exercise the code paths (several runs, a clock sweep,
a connection sweep, a real-NIC and a software-NIC backend, a skipped experiment); they are never
measurements and never leave the test's tmp directory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from conftest import make_record, shared_dir, shared_lock, write_jsonl

from gicomm.aggregate import summarize_runs, transport_ratios
from gicomm.claims import check_claims
from gicomm.fits import clock_fits
from gicomm.records import check_record
from gicomm.tidy import tidy_frame

RUNS = 5  # claims are decided on five independent runs or more (config/claims.yaml)


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


# (experiment, transport, backend, metric, unit, params, p50) of every synthetic point.
def _points(backend: str) -> list[tuple]:
    pts: list[tuple] = []
    for be, comp in ((backend, 4030.0), ("mlx5", 8000.0)):  # mlx5 completion: far off on purpose
        for payload, extra in (("inline", 0.0), ("pointer", 610.0)):
            p = {"payload": payload, "size": 8}
            pts += [
                ("one_op", "mini-gda", be, "issue_ns", "ns", p, 700.0),
                ("one_op", "mini-gda", be, "completion_ns", "ns", p, comp + extra),
                ("one_op", "mini-gda", be, "rtt_ns", "ns", p, comp + extra + 2800.0),
            ]
    for enq, issue in (("tuned", 130.0), ("baseline", 2270.0)):
        pts.append(
            (
                "one_op",
                "mini-proxy",
                backend,
                "issue_ns",
                "ns",
                {"enqueue": enq, "state": "cold"},
                issue,
            )
        )
    for ordering, issue in (
        ("none", 190.0),
        ("gpu_fence", 700.0),
        ("threadfence", 1220.0),
        ("sys_release", 2370.0),
        ("sys_fence", 2620.0),
    ):
        pts.append(
            ("gda_one_op", "mini-gda", backend, "issue_ns", "ns", {"variant": ordering}, issue)
        )
    for transport, shared, reserved in (
        ("mini-proxy", 2.19e6, 1.15e5),
        ("nccl-gin-gdaki", 27300.0, 13900.0),
    ):
        for queue, v in (("shared", shared), ("reserved", reserved)):
            for ctas, scale in ((0, 0.1), (64, 1.0)):
                pts.append(
                    (
                        "loaded_rtt",
                        transport,
                        "mlx5",
                        "rtt_ns",
                        "ns",
                        {"queue": queue, "bulk_ctas": ctas},
                        v * scale,
                    )
                )
    for n in (256, 512, 1024, 2048, 4096, 8192):
        rate = 240.0 if n <= 1024 else 240.0 * (n / 1024) ** -0.8
        pts.append(
            (
                "connection_scaling",
                "mini-gda",
                "mlx5",
                "msg_rate",
                "Mmsg/s",
                {"active_qps": n, "direction": "send_recv"},
                rate,
            )
        )
    for metric, regs in (("registers_absent", 29.0), ("registers", 32.0)):
        pts.append(("kernel_cost", "mini-gda", backend, metric, "count", {"mode": "dormant"}, regs))
    pts.append(("kernel_cost", "mini-gda", backend, "throughput_loss_pct", "pct",
                {"mode": "dormant", "caller": "stream"}, 27.0))  # fmt: skip
    return pts  # fmt: skip


def synthetic_records(campaign: str = "synth", backend: str = "softnic-cpu") -> list[dict]:
    rng = np.random.default_rng(7)
    out: list[dict] = []
    for run in range(RUNS):
        for exp, transport, be, metric, unit, params, p50 in _points(backend):
            out.append(_rec(campaign, run, rng, p50, experiment=exp, transport=transport,
                            nic_backend=be, metric=metric, unit=unit, params=params))  # fmt: skip
        for f in (600.0, 1000.0, 1400.0, 1800.0):  # the clock sweep: T = 2000 cycles / f + 300 ns
            out.append(_rec(campaign, run, rng, 2000.0 * 1000.0 / f + 300.0, experiment="sm_clock",
                            metric="issue_ns", nic_backend=backend, sm_clock_mhz=f,
                            params={"sm_clock_mhz": f}))  # fmt: skip
        skipped = make_record(campaign=campaign, run_index=run, experiment="goodput",
                              metric="goodput", unit="GB/s", status="skipped",
                              error="needs an RDMA NIC (none found)", params={"size": 4096})  # fmt: skip
        skipped.pop("stats")
        out.append(skipped)
    for rec in out:
        check_record(rec, "synthetic")
    return out


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
    assert {"one_op", "gda_one_op", "sm_clock", "connection_scaling", "kernel_cost"} <= set(
        t["summary"]["experiment"]
    )
    assert "goodput" not in set(t["summary"]["experiment"])


def synthetic_model_tables() -> dict[str, pd.DataFrame]:
    """The model stage's CSVs, in the shapes workflow/gicomm/model writes them."""
    validation = pd.DataFrame(
        [
            ["msg rate 64 x 64", "headline", "table05", 260.0, 257.9, "Mmsg/s", "+-10%", True],
            ["blow-up mini-proxy", "headline", "table11", 19.0, 206.0, "ratio", "x/ 2.5", False],
            ["loaded RTT gdaki shared", "validation", "table11", 27.3, 24.3, "us", "+-30%", True],
            ["one op mini-gda rtt", "calibration", "table03", 6.85, 6.85, "us", "+-2%", True],
        ],
        columns=["check", "role", "paper_ref", "paper", "predicted", "unit", "tolerance",
                 "passed"],
    )  # fmt: skip
    calibration = pd.DataFrame(
        [
            ["synth", "nic.t_wqe_ns", 29.2, 29.2, "paper", "paper nic.ceiling_pib"],
            ["synth", "paths.mini-gda.issue_ns", 626.0, 700.0, "records", "records: one_op"],
        ],
        columns=["platform", "parameter", "value", "paper_value", "origin", "source"],
    )
    beside = pd.DataFrame(
        [
            ["one_op", "mini-gda", "softnic-gpu", "a", "rtt_ns", "ns", 10300.0, 10800.0],
            ["gda_msg_rate", "mini-gda", "softnic-gpu", "b", "msg_rate", "Mmsg/s", 232.0, 250.0],
        ],
        columns=["experiment", "transport", "nic_backend", "point_id", "metric", "unit", "p50",
                 "predicted"],
    )  # fmt: skip
    beside["ratio"] = beside["predicted"] / beside["p50"]
    rows = []
    for threads in (1, 64):
        for qps in (1, 64):
            for batch in (1, 16):
                rows.append({"sweep": "msg_rate", "path": "mini-gda", "threads": threads,
                             "qps": qps, "batch": batch, "metric": "msg_rate",
                             "value": float(threads * batch), "unit": "Mmsg/s"})  # fmt: skip
    for bg in (0, 64):
        for mode in ("shared", "reserved"):
            rows.append({"sweep": "loaded_rtt", "path": "gdaki", "bg_ctas": bg, "mode": mode,
                         "metric": "rtt_p50", "value": 10.0 + bg, "unit": "us"})  # fmt: skip
    for n in (16, 100_000):
        for traffic in ("send_only", "send_recv"):
            rows.append({"sweep": "connections", "path": "mini-gda", "connections": n,
                         "traffic": traffic, "metric": "msg_rate", "value": 240.0,
                         "unit": "Mmsg/s"})  # fmt: skip
    predictions = pd.DataFrame(rows).assign(platform="synth")
    from gicomm.model.blind import COLUMNS as BLIND_COLUMNS

    src = "Paper, Table 3 (https://example.org/paper, v1)"
    blind = pd.DataFrame(
        [
            ["paper_t3", "P-IB", "minigda.issue", "table03 mini-gda inline pib_issue_us",
             "issue", "us", 0.70, 0.70, 1.0, 0.0, "fitted", "minigda.issue", False,
             "model one op, mini-gda", src],
            ["paper_t3", "P-IB", "baseline.rtt", "table03 mini-proxy baseline pib_rtt_us",
             "rtt", "us", 14.59, 10.17, 0.697, -30.3, "blind", "", False,
             "model one op, mini-proxy with the multi-producer enqueue", src],
        ],
        columns=BLIND_COLUMNS,
    )  # fmt: skip
    return {"validation": validation, "calibration": calibration,
            "beside_measured": beside, "predictions": predictions, "blind": blind}  # fmt: skip


def write_synthetic_model(model_dir: Path, figures_dir: Path) -> dict[str, Path]:
    """The model stage's CSVs and figures of a campaign (as model.smk lays them out, the shared
    validation and predictions in the same folder here); returns the CSVs by name."""
    from gicomm.layout import MODEL_FIGURES
    from gicomm.model.figures import FIGURES

    tables = synthetic_model_tables()
    model_dir.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        frame.to_csv(model_dir / f"{name}.csv", index=False)
    for name in MODEL_FIGURES:
        plot, table = FIGURES[name]
        paths = [figures_dir / "model" / f"{name}.{ext}" for ext in ("png", "svg")]
        plot(pd.read_csv(model_dir / f"{table}.csv"), paths)
    return model_files(model_dir)


def model_files(model_dir: Path) -> dict[str, Path]:
    names = ("calibration", "beside_measured", "validation", "predictions", "blind")
    return {n: model_dir / f"{n}.csv" for n in names}


def render_synthetic_report(root: Path, campaigns: tuple[str, ...] = ("synth",)) -> Path:
    """Render the campaign reports and the cross-campaign page of synthetic campaigns under
    root/results (as the rules lay them out; the first campaign is the configured one and has the
    combined page); return root/results."""
    from gicomm.catalogue import FIGURE_IDS, PAPER_EXPERIMENTS
    from gicomm.paper_figures import plot_paper_figure
    from gicomm.plots import plot_comparison, plot_experiment
    from gicomm.report import CampaignReport, render_campaign_report, render_combined_report
    from gicomm.tables import write_tables

    results = root / "results"
    combined = results / campaigns[0] / "report" / "combined" / "index.html"
    summaries = []
    for c in campaigns:
        t = synthetic_tables(c)
        base = results / c
        out = base / "report"
        for name in ("records", "summary", "ratios", "fits", "claims"):
            (base / "data").mkdir(parents=True, exist_ok=True)
            t[name].to_csv(base / "data" / f"{name}.csv", index=False)
        hw = base / "hosts" / "h1" / "hardware.json"
        hw.parent.mkdir(parents=True, exist_ok=True)
        hw.write_text(json.dumps(hardware(c)))
        write_tables(t["summary"], t["records"], t["fits"], out / "tables")
        first = results / campaigns[0] / "report" / "figures"
        if c != campaigns[0]:  # same figures for the others: saves time, links still resolve
            shutil.copytree(first, out / "figures")
            shutil.copytree(results / campaigns[0] / "model", base / "model")
            files = model_files(base / "model")
        else:
            files = write_synthetic_model(base / "model", out / "figures")
        for f in FIGURE_IDS if c == campaigns[0] else ():
            paths = [out / "figures" / "paper" / f"{f}.{ext}" for ext in ("png", "svg")]
            plot_paper_figure(t["summary"], t["records"], c, f, paths,
                              beside=pd.read_csv(files["beside_measured"]))  # fmt: skip
        for e in PAPER_EXPERIMENTS if c == campaigns[0] else ():
            paths = [out / "figures" / f"{e}.{ext}" for ext in ("png", "svg")]
            plot_experiment(t["summary"], t["records"], c, e, paths)
        d = base / "data"
        render_campaign_report(
            CampaignReport(c, d / "records.csv", d / "summary.csv", d / "claims.csv",
                           d / "fits.csv", d / "ratios.csv", out / "tables", [hw],
                           out / "index.html", current=False, combined_index=combined,
                           model_tables=files)
        )  # fmt: skip
        summaries.append(t["summary"])
    all_summary = pd.concat(summaries, ignore_index=True)
    figs = []
    for e in PAPER_EXPERIMENTS:
        paths = [combined.parent / "figures" / f"{e}.{ext}" for ext in ("png", "svg")]
        plot_comparison(all_summary, e, paths)
        figs += paths
    render_combined_report(
        list(campaigns),
        [results / c / "data" / "claims.csv" for c in campaigns],
        [results / c / "data" / "summary.csv" for c in campaigns],
        figs,
        combined,
        hardware={c: [hardware(c)] for c in campaigns},
    )
    return results


def synthetic_report_copy(dst: Path) -> Path:
    """A copy at dst of the synthetic report of campaigns synth and other (render_synthetic_report),
    rendered once for every worker of the session (half a minute each time; three modules read it)
    and copied, so a test that writes beside it leaves the others' alone; return dst/results."""
    done = shared_dir() / "synthetic-report" / "rendered"
    with shared_lock("synthetic-report"):
        if not done.exists():
            shutil.rmtree(done.parent, ignore_errors=True)  # a render that failed half-way
            render_synthetic_report(done.parent, ("synth", "other"))
            done.touch()
    return shutil.copytree(done.parent / "results", dst / "results")
