"""Tidy tables: one row per record (aggregates over runs: tests/test_aggregate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, make_record, write_jsonl

from gicomm.errors import RecordError
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


# ---- a campaign holds each point of each run once, and nothing foreign ----------------------------
def raw(tmp_path: Path, campaign: str = "c1", run: int = 0, batch: int = 0) -> Path:
    return tmp_path / f"results/{campaign}/raw/one_op/h1/run{run}/batch{batch}.jsonl"


def test_a_duplicated_record_is_refused_with_both_places(tmp_path: Path):
    f = write_jsonl(raw(tmp_path), [make_record(), make_record(point_id="p1"), make_record()])
    with pytest.raises(RecordError, match=r"batch0\.jsonl:3: duplicate of .*batch0\.jsonl:1"):
        tidy_from_files([f])


def test_a_record_copied_into_another_batch_is_refused(tmp_path: Path):
    a = write_jsonl(raw(tmp_path), [make_record()])
    b = write_jsonl(raw(tmp_path, batch=1), [make_record(point_id="p1"), make_record()])
    with pytest.raises(RecordError, match=r"batch1\.jsonl:2: duplicate of .*batch0\.jsonl:1"):
        tidy_from_files([a, b])


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"campaign": "c2"}, "a record of campaign 'c2' in a raw file of campaign 'c1'"),
        ({"run_index": 1}, "a record of run_index 1 in a raw file of run_index 0"),
        ({"experiment": "gda_rtt"}, "a record of experiment 'gda_rtt'"),
        ({"host": "h2"}, "a record of host 'h2'"),
    ],
)
def test_another_runs_or_campaigns_record_in_a_raw_file_is_refused(tmp_path, change, fragment):
    f = write_jsonl(raw(tmp_path), [make_record(), make_record(point_id="p1", **change)])
    with pytest.raises(RecordError) as err:
        tidy_from_files([f])
    assert "batch0.jsonl:2: " + fragment in str(err.value)


def test_an_emptied_batch_file_is_refused(tmp_path: Path):
    keep = write_jsonl(raw(tmp_path), [make_record()])
    emptied = raw(tmp_path, run=1)
    emptied.parent.mkdir(parents=True)
    emptied.write_text("")
    with pytest.raises(RecordError, match=r"run1/batch0\.jsonl: holds no record"):
        tidy_from_files([keep, emptied])


def test_a_batch_file_missing_a_point_or_holding_another_is_refused(tmp_path: Path):
    f = write_jsonl(raw(tmp_path), [make_record()])
    with pytest.raises(RecordError, match=r"no record of point\(s\) p1 of this batch"):
        tidy_from_files([f], points={str(f): ["p0", "p1"]})
    with pytest.raises(RecordError, match=r"point 'p0' is not a point of this batch"):
        tidy_from_files([f], points={str(f): ["p1"]})


ARCHIVE = REPO / "results/archive"


@pytest.mark.skipif(not ARCHIVE.is_dir(), reason="no archived campaigns")
def test_archived_campaigns_pass_the_campaign_checks():
    for campaign in sorted(p for p in ARCHIVE.iterdir() if (p / "raw").is_dir()):
        df = tidy_from_files(sorted((campaign / "raw").rglob("*.jsonl")))
        assert not df.empty
        assert (df["campaign"] == campaign.name).all()
        # Version 1 records arrive as version 2: no point identity among the parameters.
        assert not {"param_transport", "param_nic_backend"} & set(df.columns)
