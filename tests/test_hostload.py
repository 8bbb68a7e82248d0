"""The host's load while each point ran (record field host_load, written by the native harness):
validated on read, carried to the tidy table and the summary, shown beside the spread in the claims
table and the page across campaigns, and a warning on a claim whose runs were taken under load.
Synthetic records only (tests/test_pipeline.py checks that real drivers write the field)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_record
from test_report_synth import hardware

from gicomm import hostload
from gicomm.aggregate import summarize_runs
from gicomm.claims import check_claims, decide_settings, load_claims
from gicomm.errors import RecordError
from gicomm.records import check_record
from gicomm.report import claim_rows, environment, render_combined_report
from gicomm.tidy import tidy_frame

CLAIM = "t3-tuned-proxy-enqueue"  # 0.13 us within 50%: five runs at 130 ns reproduce it


def load(busy: float | None, self_cpus: float = 1.0, ncpu: int = 8, avg: float = 1.0) -> dict:
    return {"loadavg_1m": avg, "cpu_busy": busy, "self_cpus": self_cpus, "ncpu": ncpu,
            "window_s": 2.0}  # fmt: skip


def runs(loads: list[dict | None]) -> pd.DataFrame:
    """Tidy records of the claim's point, one per run, each with its host_load (None: absent)."""
    return tidy_frame([
        make_record(experiment="proxy_one_op", transport="mini-proxy", metric="issue_ns",
                    schema_version=2, run_index=run, stats={"n": 5, "p50": 130.0 + run},
                    params={"mode": "issue", "enqueue": "tuned", "state": "cold"},
                    **({"host_load": h} if h is not None else {}))
        for run, h in enumerate(loads)
    ])  # fmt: skip


def verdict(records: pd.DataFrame) -> pd.DataFrame:
    claims = [c for c in load_claims() if c["id"] == CLAIM]
    return check_claims(
        summarize_runs(records), records, [hardware("c")], claims, decide_settings()
    )


def test_others_busy_is_the_share_of_the_free_cores():
    # 8 CPUs 50% busy = 4 busy CPUs, 1 of them the benchmark's: 3 of the 7 free ones.
    assert hostload.others_busy(0.5, 1.0, 8) == pytest.approx(3 / 7)
    assert hostload.others_busy(0.1, 1.0, 8) == 0.0  # clock-tick slack never goes below zero
    assert math.isnan(hostload.others_busy(None, 1.0, 8))  # a window too short to tell
    assert math.isnan(hostload.others_busy(1.0, 2.0, 2))  # the benchmark held every core
    assert decide_settings()["host_load_warning"] == 0.5


def test_records_are_validated_and_carried_to_tidy_and_summary():
    rec = make_record(schema_version=2, host_load=load(0.5))
    assert check_record(rec, "x:1")["host_load"]["ncpu"] == 8
    with pytest.raises(RecordError, match="host_load"):
        check_record(make_record(schema_version=2, host_load=load(1.5)), "x:1")
    with pytest.raises(RecordError, match="host_load"):
        check_record(make_record(schema_version=2, host_load={"loadavg_1m": 1.0}), "x:1")
    t = runs([load(0.2), load(0.5, avg=6.0), load(None), None, load(0.1)])
    assert list(t["host_loadavg_1m"].isna()) == [False, False, False, True, False]
    assert t["host_others_busy"].iloc[1] == pytest.approx(3 / 7)
    assert math.isnan(t["host_others_busy"].iloc[2])  # unknown busy fraction: no value, not 0
    s = summarize_runs(t)
    assert s["host_others_busy_max"].iloc[0] == pytest.approx(3 / 7)
    assert s["host_loadavg_max"].iloc[0] == 6.0
    # Records written before the field existed (the archived campaigns): no columns, no values.
    old = summarize_runs(runs([None] * 3))
    assert old["host_others_busy_max"].isna().all()


def test_a_claim_taken_under_host_load_warns_and_an_idle_one_does_not():
    idle = verdict(runs([load(0.15)] * 5)).iloc[0]
    assert idle["verdict"] == "reproduced"
    assert idle["host_busy"] == pytest.approx((0.15 * 8 - 1) / 7)
    assert "host load" not in idle["reason"]
    busy = verdict(runs([load(0.15)] * 4 + [load(0.9, avg=11.0)])).iloc[0]
    assert busy["verdict"] == "reproduced"  # the warning informs; the interval decides
    assert busy["host_busy"] == pytest.approx((0.9 * 8 - 1) / 7)
    assert busy["host_loadavg"] == 11.0
    assert "Taken under host load" in busy["reason"] and "89%" in busy["reason"]
    assert "load average up to 11.0" in busy["reason"]


def test_the_claims_table_shows_host_load_beside_the_spread():
    claims = pd.concat(
        [
            verdict(runs([load(0.15)] * 5)),
            verdict(runs([load(0.9)] * 5)).assign(id="loaded"),
            verdict(runs([None] * 5)).assign(id="old"),
        ]
    )
    rows = {r["id"]: r for r in claim_rows(claims)}
    assert rows[CLAIM]["runs_text"].endswith(
        "max/min 1.03x; host: others 3% of free cores, load 1.0"
    )
    assert "; HIGH host: others 89% of free cores" in rows["loaded"]["runs_text"]
    assert rows["old"]["runs_text"].endswith("; host load not recorded")
    page = (
        environment().get_template("_claims.html.j2").render(claims=list(rows.values()), link=False)
    )
    assert "spread, host load</th>" in page and "HIGH host: others 89%" in page
    assert "Taken under host load" in page


def test_the_page_across_campaigns_shows_host_load_per_claim(tmp_path: Path):
    records = runs([load(0.9)] * 5)
    d = tmp_path / "results" / "c" / "data"
    d.mkdir(parents=True)
    verdict(records).to_csv(d / "claims.csv", index=False)
    summarize_runs(records).to_csv(d / "summary.csv", index=False)
    index = tmp_path / "results" / "c" / "report" / "combined" / "index.html"
    render_combined_report(["c"], [d / "claims.csv"], [d / "summary.csv"], [], index)
    page = index.read_text()
    assert "HIGH host: others 89% of free cores" in page
