"""The software NIC engine's ceiling per WQE shape, from the driver to the report: a CPU run of a
rate experiment on softnic-cpu writes its rate records with `engine_ceiling` (Mmsg/s) and
`engine_ceiling_shape`, the record reader accepts them, tidy and the summary over runs keep them,
and the report marks a point within 2x of its ceiling "model-NIC bound" and a point far below it
not. Every step fails when the field goes missing on the way. The engine_ceiling experiment's new
`size` parameter leaves the archived campaigns' point ids valid."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, current_build_with, make_record, write_jsonl

from gicomm.aggregate import summarize_runs
from gicomm.experiments import load_experiment
from gicomm.labels import model_nic_bound
from gicomm.records import read_records
from gicomm.report import with_intervals
from gicomm.tidy import tidy_frame

COMMON = ["--campaign", "c", "--host", "h", "--platform", "local", "--provenance-id", "p"]


@pytest.fixture(scope="module")
def soak(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = current_build_with(tmp_path_factory, "gicomm-bench-soak")
    return build / "bin" / "gicomm-bench-soak"


def test_a_cpu_rate_run_carries_the_ceiling_of_its_shape(soak: Path, tmp_path: Path):
    # The soak's rings target: mini-proxy workers post 8-byte inline writes to the cpu engine
    # (two workers, two QPs, one engine thread); half a second, a few kills.
    point = {"point_id": "rings", "params": {
        "target": "rings", "duration_s": 0.5, "producers": 2, "workers": 2,
        "engine_threads": 1, "window_ms": 100}}  # fmt: skip
    pts = tmp_path / "points.jsonl"
    pts.write_text(json.dumps(point) + "\n")
    outs = [tmp_path / f"run{i}.jsonl" for i in range(2)]  # two independent process runs
    for run_index, out in enumerate(outs):
        proc = subprocess.run(
            [str(soak), "--experiment", "soak", "--points", str(pts), "--out", str(out),
             *COMMON, "--run-index", str(run_index)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "engine ceiling softnic-cpu, inline 8 B, 2 QPs, 1 engine thread:" in proc.stderr
    records = read_records(outs)  # validated against the record schema
    rates = [r for r in records if r["metric"] == "msg_rate"]
    assert len(rates) == 2
    for r in rates:
        assert r["status"] == "ok", r.get("error")
        assert r["engine_ceiling"] > 0, r
        assert r["engine_ceiling_shape"] == "inline 8 B, 2 QPs, 1 engine thread"
    others = [r for r in records if r["metric"] != "msg_rate"]
    assert others and not any("engine_ceiling" in r for r in others), "only rate records carry it"
    summary = summarize_runs(tidy_frame(records))
    row = summary[summary["metric"] == "msg_rate"].iloc[0]
    assert row["engine_ceiling"] == pytest.approx(
        pd.Series([r["engine_ceiling"] for r in rates]).median()
    )
    assert row["engine_ceiling_shape"] == "inline 8 B, 2 QPs, 1 engine thread"
    bound = model_nic_bound(summary[summary["metric"] == "msg_rate"])
    assert bound.notna().all(), "the report can decide once the ceiling is there"


def rate_records(p50: float, ceiling: float | None, **kw: object) -> list[dict]:
    extra = {} if ceiling is None else {
        "engine_ceiling": ceiling, "engine_ceiling_shape": "inline 8 B, 16 QPs"}  # fmt: skip
    base = {
        "experiment": "gda_msg_rate", "nic_backend": "softnic-gpu-same", "metric": "msg_rate",
        "unit": "Mmsg/s", "stats": {"n": 3, "p50": p50}, "sm_clock_mhz": 1980.0,
    }  # fmt: skip
    return [make_record(**{**base, **kw, **extra, "run_index": r}) for r in range(3)]


def summary_of(tmp_path: Path, records: list[dict]) -> pd.DataFrame:
    # Through the reader (schema), tidy and the summary, as the pipeline goes.
    path = write_jsonl(tmp_path / "raw.jsonl", records)
    read = read_records([path])
    return with_intervals(summarize_runs(tidy_frame(read)), tidy_frame(read))


def test_the_report_marks_points_within_2x_of_their_ceiling(tmp_path: Path):
    near = rate_records(14.0, 20.0, point_id="near", params={"qps": 16, "batch": 16})
    far = rate_records(1.0, 20.0, point_id="far", params={"qps": 16, "batch": 1})
    # goodput: 40 GB/s of 4096 B writes is 9.8 M WQE/s, within 2x of 15 Mmsg/s
    goodput = rate_records(40.0, 15.0, point_id="gp", experiment="goodput", metric="goodput_gbps",
                           unit="GB/s", params={"size": 4096, "ctas": 16})  # fmt: skip
    s = summary_of(tmp_path, near + far + goodput)
    marks = dict(zip(s["p50"], s["model_nic_bound"], strict=True))  # a point per value
    assert marks == {14.0: "yes", 1.0: "no", 40.0: "yes"}


def test_a_rate_point_without_its_ceiling_is_not_marked(tmp_path: Path):
    s = summary_of(tmp_path, rate_records(14.0, None, point_id="bare"))
    assert "model_nic_bound" not in s or s["model_nic_bound"].isna().all()
    assert s["engine_ceiling"].isna().all()


def test_real_nic_points_are_never_model_nic_bound(tmp_path: Path):
    recs = rate_records(14.0, None, point_id="nic", nic_backend="mlx5")
    d = summary_of(tmp_path, recs).assign(engine_ceiling=20.0)
    assert model_nic_bound(d).isna().all()


@pytest.mark.parametrize("name", ["engine_ceiling", "gda_msg_rate", "inline_payload", "goodput"])
def test_archived_point_ids_stay_valid(name: str):
    # The pipeline campaigns' points, measured before `size`, `gpu-same` and softnic-gpu-same
    # existed, are points of today's sweeps: a rerun skips them and their reports still render.
    exp = load_experiment(REPO / f"config/experiments/{name}.yaml")
    ids = {p.point_id for mode in ("full", "reduced") for p in exp.points(mode)}
    archived = sorted((REPO / "results/archive").glob(f"*-pipeline/raw/{name}/*/run*/*.jsonl"))
    assert archived
    for f in archived:
        got = {json.loads(line)["point_id"] for line in f.read_text().splitlines() if line.strip()}
        assert got <= ids, f"{f}: {sorted(got - ids)}"


def test_one_gpu_measures_the_same_gpu_engine_points():
    # softnic-gpu-same needs one GPU; softnic-gpu (the engine on the peer) two.
    for name in ("gda_msg_rate", "inline_payload", "goodput"):
        exp = load_experiment(REPO / f"config/experiments/{name}.yaml")
        gpus = {p.nic_backend: exp.needs_of(p)["gpus"] for p in exp.points("reduced")}
        assert gpus["softnic-gpu-same"] == 1 and gpus["softnic-gpu"] == 2, (name, gpus)


def run_tool(script: str, *paths: Path) -> subprocess.CompletedProcess[str]:
    """A tools/ script over records files, as the device scripts run it."""
    import sys

    return subprocess.run(
        [sys.executable, str(REPO / "tools" / script), *map(str, paths)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def run_summary(path: Path) -> subprocess.CompletedProcess[str]:
    return run_tool("ceiling_summary.py", path)


def test_the_device_summary_flags_a_softnic_rate_without_its_ceiling(tmp_path: Path):
    # tools/ceiling_summary.py, run after the device script: rate beside ceiling, and exit 1 when a
    # softnic rate record came back without one.
    near = rate_records(14.0, 20.0, point_id="near")[0]
    bare = rate_records(1.0, None, point_id="bare")[0]
    for records, code, text in (([near], 0, "yes"), ([near, bare], 1, "MISSING")):
        path = write_jsonl(tmp_path / f"{code}.jsonl", records)
        proc = run_summary(path)
        assert proc.returncode == code, proc.stdout + proc.stderr
        assert text in proc.stdout


def test_the_device_summary_sets_the_cpu_engine_ceilings_beside_mini_proxy(tmp_path: Path):
    # tools/device-ceiling.sh with CEILING_STEPS=cpu: the earlier ceiling (method window, its
    # median round), the steady one (its best round) and the one the goodput run's hook attached,
    # beside mini-proxy's goodput; exit 1 when a rate is above its steady ceiling.
    def ceiling(method: str, p50: float, best: float) -> dict:
        return make_record(
            experiment="engine_ceiling", transport="softnic", metric="engine_wqe_rate",
            unit="Mmsg/s", point_id=f"ec-{method}", stats={"n": 5, "p50": p50, "max": best},
            engine_ceiling_shape="pointer 64 B, 2 QPs, 2 engine threads",
            params={"engine": "cpu", "qps": 2, "threads": 2, "payload": "pointer", "size": 64,
                    "method": method},
        )  # fmt: skip

    def goodput(rate: float, hook: float) -> dict:
        return make_record(
            experiment="goodput", transport="mini-proxy", metric="msg_rate", unit="Mmsg/s",
            point_id="gp", stats={"n": 10, "p50": rate}, engine_ceiling=hook,
            engine_ceiling_shape="pointer 64 B, 2 QPs, 2 engine threads",
            params={"ctas": 16, "size": 64, "batch": 16},
        )  # fmt: skip

    old, new = ceiling("window", 14.7, 15.0), ceiling("steady", 60.0, 80.0)
    cases = (
        ([old, new, goodput(24.1, 75.0)], 0, "new ceiling >= rate: PASS (1 goodput points"),
        ([old, new, goodput(24.1, 20.0)], 1, "2 engine threads: hook 20.00 < rate 24.10"),
        ([old, ceiling("steady", 10.0, 12.0), goodput(24.1, 75.0)], 1, "new 12.00 < rate 24.10"),
        ([old, new], 1, "no mini-proxy goodput record on softnic-cpu"),
    )
    for i, (records, code, text) in enumerate(cases):
        path = write_jsonl(tmp_path / f"{i}.jsonl", records)
        proc = run_summary(path)
        assert proc.returncode == code, proc.stdout + proc.stderr
        assert text in proc.stdout, proc.stdout
        if code == 0:  # the old ceiling is the median round, the new one the best round
            assert "14.70     80.00     75.00     24.10" in proc.stdout, proc.stdout


def test_the_bound_comparison_counts_bound_records_per_shape_and_side(tmp_path: Path):
    # tools/bound_comparison.py, how an archive's comparison.txt is made: per shape, median rate /
    # median ceiling and bound records, a goodput record's rate taken as WQEs/s, records without a
    # ceiling or not ok left out; totals with the gpu engine's share.
    def goodput(gbps: float, ceiling: float, **kw: object) -> dict:
        return make_record(
            experiment="goodput", nic_backend="softnic-gpu-same", metric="goodput_gbps",
            unit="GB/s", stats={"n": 3, "p50": gbps}, engine_ceiling=ceiling,
            engine_ceiling_shape="pointer 4096 B, 16 QPs", params={"size": 4096, "ctas": 16}, **kw,
        )  # fmt: skip

    # 40.96 GB/s of 4 KiB writes is 10 Mmsg/s: bound against 15, not against 25.
    old = rate_records(14.0, 20.0) + [goodput(40.96, 15.0), rate_records(1.0, None)[0]]
    failed = {**goodput(99.0, 1.0), "status": "error"}
    new = rate_records(8.0, 20.0) + [goodput(40.96, 25.0), failed]
    write_jsonl(tmp_path / "old/raw/goodput/run0/batch0.jsonl", old)
    new_file = write_jsonl(tmp_path / "new.jsonl", new)
    proc = run_tool("bound_comparison.py", tmp_path / "old", new_file)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if not line.startswith("#")}
    assert "(3/3)" in rows["gda_msg_rate"] and "(0/3)" in rows["gda_msg_rate"]
    assert "10/      15 (1/1)" in rows["goodput"] and "10/      25 (0/1)" in rows["goodput"]
    assert "old: 4 of 4 records bound (4 of 4 on the gpu engine)" in proc.stdout
    assert "new: 0 of 4 records bound (0 of 4 on the gpu engine)" in proc.stdout
    missing = run_tool("bound_comparison.py", tmp_path / "nope", new_file)
    assert missing.returncode != 0 and "nope does not exist" in missing.stderr
