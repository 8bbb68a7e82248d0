"""Raw records: every line validated; a malformed, truncated or foreign line fails with file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_record, write_jsonl

from gicomm.errors import RecordError
from gicomm.records import append_records, iter_records, read_records


def test_valid_records_round_trip(tmp_path: Path):
    p = write_jsonl(tmp_path / "a.jsonl", [make_record(), make_record(point_id="p1")])
    assert [r["point_id"] for r in iter_records(p)] == ["p0", "p1"]


def test_blank_lines_are_allowed(tmp_path: Path):
    p = tmp_path / "a.jsonl"
    p.write_text(json.dumps(make_record()) + "\n\n" + json.dumps(make_record()) + "\n")
    assert len(list(iter_records(p))) == 2


def test_malformed_json_names_file_and_line(tmp_path: Path):
    p = tmp_path / "a.jsonl"
    p.write_text(json.dumps(make_record()) + "\n{not json\n")
    with pytest.raises(RecordError, match=r"a\.jsonl:2: malformed JSON"):
        list(iter_records(p))


def test_truncated_last_line_is_detected(tmp_path: Path):
    p = tmp_path / "a.jsonl"
    line = json.dumps(make_record())
    p.write_text(line + "\n" + line[: len(line) // 2])
    with pytest.raises(RecordError, match=r"a\.jsonl:2: truncated last line"):
        list(iter_records(p))


def test_other_schema_version_is_refused(tmp_path: Path):
    p = write_jsonl(tmp_path / "a.jsonl", [make_record(schema_version=2)])
    with pytest.raises(RecordError, match=r"a\.jsonl:1: record of schema_version 2"):
        list(iter_records(p))


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"nic_backend": "infiniband"}, "'nic_backend': value 'infiniband' is not allowed"),
        ({"extra_field": 1}, "unknown key(s) 'extra_field'"),
        ({"run_index": -1}, "'run_index': value -1 is out of range"),
        ({"params": {"nested": {"a": 1}}}, "'params.nested'"),
        ({"stats": None}, "'stats'"),
        ({"status": "failed"}, "'error' is a required property"),
    ],
)
def test_invalid_records_name_the_field(tmp_path: Path, change, fragment):
    p = write_jsonl(tmp_path / "a.jsonl", [make_record(), make_record(**change)])
    with pytest.raises(RecordError) as err:
        list(iter_records(p))
    assert "a.jsonl:2: invalid record" in str(err.value)
    assert fragment in str(err.value)


def test_ok_record_needs_stats(tmp_path: Path):
    r = make_record()
    del r["stats"]
    p = write_jsonl(tmp_path / "a.jsonl", [r])
    with pytest.raises(RecordError, match="'stats' is a required property"):
        list(iter_records(p))


def test_append_writes_whole_lines(tmp_path: Path):
    p = tmp_path / "out.jsonl"
    append_records(p, [make_record(point_id="a")])
    append_records(p, [make_record(point_id="b"), make_record(point_id="c")])
    assert [r["point_id"] for r in read_records([p])] == ["a", "b", "c"]
    assert p.read_text().endswith("\n")
