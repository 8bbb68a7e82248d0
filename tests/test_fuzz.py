"""Property-based tests: whatever a config or a record file holds, gicomm either accepts it or
fails with its own clear error (ConfigError / RecordError) naming where; never another exception,
and never a silently dropped record."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import yaml
from conftest import REPO, make_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gicomm.config import load_campaign
from gicomm.errors import ConfigError, RecordError
from gicomm.records import iter_records

DEFAULT = yaml.safe_load((REPO / "config/config.yaml").read_text())
KEYS = [*DEFAULT, "bogus", "native.cuda", ""]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=True),
    st.text(max_size=20), st.sampled_from(["all", "full", "reduced", "local", "one_op", "off", "auto"]),
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=6))
def test_any_config_is_accepted_or_refused_clearly(changes):
    cfg = {**DEFAULT, **changes}
    try:
        campaign = load_campaign(cfg)
    except ConfigError as exc:
        assert str(exc).strip()
        return
    assert campaign.name == cfg["campaign"]


@FUZZ
@given(st.lists(st.one_of(values, st.just(make_record())), min_size=1, max_size=5))
def test_any_json_lines_are_validated_never_dropped(objs):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "r.jsonl"
        p.write_text("".join(json.dumps(o) + "\n" for o in objs))
        try:
            got = list(iter_records(p))
        except RecordError as exc:
            assert "r.jsonl:" in str(exc)
            return
        assert len(got) == len(objs)


@FUZZ
@given(st.binary(max_size=300), st.integers(0, 2))
def test_corrupted_bytes_fail_with_file_and_line(noise, where):
    good = (json.dumps(make_record()) + "\n").encode()
    blob = [good, good, good]
    blob.insert(where, noise)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "r.jsonl"
        p.write_bytes(b"".join(blob))
        try:
            got = list(iter_records(p))
        except RecordError as exc:
            assert "r.jsonl:" in str(exc)
            return
        # Only noise that is itself blank or whole valid records can pass; the three good ones stay.
        assert len(got) >= 3


@FUZZ
@given(st.dictionaries(st.sampled_from(sorted(make_record())), values, max_size=4))
def test_any_field_change_is_accepted_or_named(changes):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "r.jsonl"
        p.write_text(json.dumps(make_record(**changes), default=str) + "\n")
        try:
            list(iter_records(p))
        except RecordError as exc:
            assert "r.jsonl:1:" in str(exc)
