"""Tidy tables: one row per record (aggregates over runs: tests/test_aggregate.py)."""

from __future__ import annotations

from pathlib import Path

from conftest import make_record, write_jsonl

from gicomm.tidy import tidy_from_files


def test_tidy_has_one_row_per_record_with_params_and_stats(tmp_path: Path):
    recs = [
        make_record(run_index=i, stats={"n": 10, "p50": 100.0 + i, "p99": 200.0}) for i in range(3)
    ]
    recs.append(
        make_record(point_id="p1", params={"payload": "pointer", "size": 8}, metric="rtt_ns")
    )
    df = tidy_from_files([write_jsonl(tmp_path / "r.jsonl", recs)])
    assert len(df) == 4
    assert {"param_payload", "param_size", "p50", "p99", "sm_clock_mhz"} <= set(df.columns)
    assert list(df["p50"][:3]) == [100.0, 101.0, 102.0]


def test_empty_inputs_give_empty_tables(tmp_path: Path):
    df = tidy_from_files([])
    assert df.empty and "p50" in df.columns
