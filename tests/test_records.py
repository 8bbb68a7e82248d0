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
    p = write_jsonl(tmp_path / "a.jsonl", [make_record(schema_version=3)])
    with pytest.raises(RecordError, match=r"a\.jsonl:1: record of schema_version 3"):
        list(iter_records(p))


def test_version_1_records_are_read_as_version_2(tmp_path: Path):
    v1 = make_record(params={"transport": "mini-gda", "nic_backend": "softnic-cpu", "size": 8})
    (r,) = iter_records(write_jsonl(tmp_path / "a.jsonl", [v1]))
    assert r["schema_version"] == 2
    assert r["params"] == {"size": 8}
    assert (r["transport"], r["nic_backend"]) == ("mini-gda", "softnic-cpu")


def test_version_1_backend_spelling_leaves_params(tmp_path: Path):
    # The first drivers echoed the NIC backend as params.backend (archived h200x2-2026-11-30).
    v1 = make_record(params={"backend": "softnic-cpu", "size": 8})
    (r,) = iter_records(write_jsonl(tmp_path / "a.jsonl", [v1]))
    assert r["params"] == {"size": 8}
    bad = make_record(params={"backend": "softnic-gpu", "size": 8})
    with pytest.raises(RecordError, match="params.backend 'softnic-gpu' differs from nic_backend"):
        list(iter_records(write_jsonl(tmp_path / "b.jsonl", [bad])))


def test_a_version_1_record_naming_two_transports_is_refused(tmp_path: Path):
    v1 = make_record(params={"transport": "mini-proxy", "size": 8})
    p = write_jsonl(tmp_path / "a.jsonl", [v1])
    with pytest.raises(RecordError, match="params.transport 'mini-proxy' differs from transport"):
        list(iter_records(p))


def test_version_2_records_keep_transport_and_backend_out_of_params(tmp_path: Path):
    v2 = make_record(schema_version=2, params={"transport": "mini-gda", "size": 8})
    with pytest.raises(RecordError, match="params"):
        list(iter_records(write_jsonl(tmp_path / "a.jsonl", [v2])))
    ok = make_record(schema_version=2, params={"size": 8}, measure_key="0123456789abcdef",
                     topology="loopback", doorbell_target="uar-iomem", rdma_provider="emulated")  # fmt: skip
    (r,) = iter_records(write_jsonl(tmp_path / "b.jsonl", [ok]))
    assert r["topology"] == "loopback"


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ('"p50": 700.0, "p50": 1.0', "key 'p50' appears twice"),
        ('"p50": NaN', "NaN is not a number JSON allows"),
        ('"p50": Infinity', "Infinity is not a number JSON allows"),
    ],
)
def test_duplicate_keys_and_non_finite_numbers_are_refused(tmp_path: Path, line, fragment):
    """Python's json keeps the last of two keys and reads NaN; a record may do neither (a NaN p50
    was silently dropped from the aggregate)."""
    good = json.dumps(make_record())
    bad = good.replace('"p50": 700.0', line)
    p = tmp_path / "a.jsonl"
    p.write_text(good + "\n" + bad + "\n")
    with pytest.raises(RecordError, match=rf"a\.jsonl:2: malformed JSON: {fragment}"):
        list(iter_records(p))


def test_bad_lines_in_the_middle_are_each_named(tmp_path: Path):
    """The tolerant reader the batch runner repairs partial files with: every bad line is named
    with file:line, and the lines after it are still read."""
    from gicomm.records import scan_records

    good = json.dumps(make_record()).encode()
    p = tmp_path / "a.jsonl"
    p.write_bytes(b"\n".join([good, b"garbage", b"\xff\xfe", b"[[[" * 5000, good, good[:9]]))
    lines = list(scan_records(p))
    assert [(x.lineno, x.record is not None) for x in lines] == [
        (1, True), (2, False), (3, False), (4, False), (5, True), (6, False)
    ]  # fmt: skip
    assert "a.jsonl:3: not UTF-8 text" in str(lines[2].error)
    assert "a.jsonl:6: truncated last line" in str(lines[5].error)


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
