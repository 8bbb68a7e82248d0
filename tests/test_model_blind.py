"""Blind model check: published tables load strictly, fitted numbers are told from blind ones,
and the errors are the ones the inputs imply."""

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from gicomm.errors import ConfigError
from gicomm.model import blind
from gicomm.model.calibrate import from_paper
from gicomm.model.parameters import ModelParams

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "config" / "published"
PAPER_CSV = ROOT / "report" / "paper"

ONE_OP = """\
kind: one_op
system: test system
source: {reference: a table, url: https://example.org/t, revision: v1}
points:
  gda.issue: {ref: table03 mini-gda inline pib_issue_us, path: mini-gda, metric: issue, value: 0.70, unit: us}
  gda.rtt: {ref: somewhere else, path: mini-gda, metric: rtt, value: 8.0, unit: us}
  proxy.completion: {path: mini-proxy, metric: completion, value: 5.0, unit: us}
"""


def _write(tmp_path: Path, text: str, name: str = "t.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_known_values_give_known_errors(tmp_path: Path):
    table = blind.load_table(_write(tmp_path, ONE_OP))
    known = {"gda.issue": 0.70, "gda.rtt": 10.0, "proxy.completion": 4.0}
    df = blind.blind_table(
        from_paper("P-IB"), [table], predict=lambda p, t, pt: (known[pt.key], "stub")
    )
    by = df.set_index("key")
    assert by.loc["gda.rtt", "ratio"] == pytest.approx(1.25)
    assert by.loc["gda.rtt", "error_pct"] == pytest.approx(25.0)
    assert by.loc["proxy.completion", "ratio"] == pytest.approx(0.8)
    assert by.loc["proxy.completion", "error_pct"] == pytest.approx(-20.0)
    # the paper parameter set took Table 3's mini-gda issue: that row is fitted, not evidence
    assert by.loc["gda.issue", "role"] == "fitted"
    assert by.loc["gda.issue", "fitted_by"] == "minigda.issue"
    assert set(by.loc[["gda.rtt", "proxy.completion"], "role"]) == {"blind"}
    assert by.loc["gda.rtt", "source"] == "a table (https://example.org/t, v1)"
    s = blind.summary(df).iloc[0]
    assert (s["blind"], s["fitted"]) == (2, 1)
    assert s["worst_factor"] == pytest.approx(1.25)
    assert s["geomean_ratio"] == pytest.approx((1.25 * 0.8) ** 0.5)
    assert s["within_1.25x"] == 2


def test_a_number_the_records_replaced_is_blind(tmp_path: Path):
    table = blind.load_table(_write(tmp_path, ONE_OP))
    p = from_paper("P-IB")
    p.path("mini-gda").issue_ns = 640.0
    p.sources["paths.mini-gda.latency"] = "records: gda_one_op softnic-gpu, 3 rows"
    df = blind.blind_table(p, [table])
    row = df.set_index("key").loc["gda.issue"]
    assert row["role"] == "blind" and row["fitted_by"] == ""
    assert row["predicted"] == pytest.approx(0.64)  # the model's issue is the parameter itself
    assert row["ratio"] == pytest.approx(0.64 / 0.70)


def test_baseline_enqueue_one_op_is_built_from_the_multi_producer_cost():
    p = from_paper("P-IB")
    t = blind.Table("t", "one_op", "s", {"reference": "r", "url": "u", "revision": "v"})
    mk = lambda m: blind.Point("k", 1.0, "us", m, {"path": "mini-proxy-baseline"})  # noqa: E731
    issue, _ = blind.model_prediction(p, t, mk("issue"))
    comp, _ = blind.model_prediction(p, t, mk("completion"))
    tuned, _ = blind.model_prediction(p, t, blind.Point("k", 1.0, "us", "completion",
                                                        {"path": "mini-proxy"}))  # fmt: skip
    mp = p.path("mini-proxy")
    assert issue == pytest.approx(mp.shared_enqueue_ns / 1e3)
    assert comp - tuned == pytest.approx((mp.shared_enqueue_ns - mp.issue_ns) / 1e3)


def test_ep_prediction_is_wire_or_issue_plus_one_op(monkeypatch: pytest.MonkeyPatch):
    fake = SimpleNamespace(
        one=lambda path: SimpleNamespace(completion_us=5.0),
        rate=lambda path, t, q, b: 100.0,  # Mmsg/s
        proxy=lambda workers, producers: 10.0,
    )
    monkeypatch.setattr(blind, "_sim", lambda p: fake)
    setup = {"path": "gdaki", "tokens": 100, "topk": 10, "hidden": 1, "dispatch_bytes": 1000,
             "combine_bytes": 2000, "gpus_per_node": 8, "nic_GBps": 50.0, "nvlink_GBps": 100.0,
             "workers": None}  # fmt: skip
    t = blind.Table("ep", "ep_low_latency", "s", {}, setup)
    # 1000 messages; EP 16: half stay on the node. Wire: 500 * 1000 B / 50 GB/s = 10 us remote,
    # 500 * 1000 B / 100 GB/s = 5 us local; issue 1000 / 100 Mmsg/s = 10 us; plus 5 us latency
    v, how = blind.model_prediction(ModelParams(), t, blind.Point("d", 1, "us", "dispatch",
                                                                  {"ep": 16}))  # fmt: skip
    assert v == pytest.approx(15.0)
    assert "wire 10.0" in how
    # combine: 2000 B messages make the wire 20 us, longer than the issue
    v, _ = blind.model_prediction(ModelParams(), t, blind.Point("c", 1, "us", "combine",
                                                                {"ep": 16}))  # fmt: skip
    assert v == pytest.approx(25.0)
    # through the proxy: 1000 messages at 10 Mmsg/s = 100 us of issue
    t.setup = {**setup, "path": "mini-proxy"}
    v, _ = blind.model_prediction(ModelParams(), t, blind.Point("d", 1, "us", "dispatch",
                                                                {"ep": 16}))  # fmt: skip
    assert v == pytest.approx(105.0)


BAD = [
    ("kind: one_op\n", "missing key 'system'"),
    (ONE_OP.replace("value: 8.0, ", ""), "t.yaml:gda.rtt: missing key 'value'"),
    (ONE_OP.replace("value: 8.0", "value: fast"), "t.yaml:gda.rtt.value: 'fast' is not a"),
    (ONE_OP.replace("value: 8.0", "value: -1"), "t.yaml:gda.rtt.value: -1.0 must be a positive"),
    (ONE_OP.replace("metric: rtt", "metric: goodput"), "t.yaml:gda.rtt.metric: 'goodput' is not one of issue, completion, rtt"),
    (ONE_OP.replace("path: mini-proxy", "path: nvshmem"), "t.yaml:proxy.completion.path: 'nvshmem'"),
    (ONE_OP.replace("value: 8.0, unit: us", "value: 8.0, unit: ms"), "t.yaml:gda.rtt.unit: 'ms'; a one_op table is in us"),
    (ONE_OP.replace("value: 8.0,", "value: 8.0, threads: 4,"), "t.yaml:gda.rtt: unknown key(s) threads"),
    (ONE_OP.replace("url: https://example.org/t, ", ""), "t.yaml:source: missing key 'url'"),
    (ONE_OP.replace("kind: one_op", "kind: goodput"), "t.yaml:kind: 'goodput' is not one of"),
    ("kind: msg_rate\nsystem: s\nsource: {reference: r, url: u, revision: v}\npoints:\n"
     "  a: {path: mini-gda, threads: true, qps: 1, batch: 1, value: 1, unit: Mmsg/s}\n",
     "t.yaml:a.threads: True is not a int"),
    ("kind: ep_low_latency\nsystem: s\nsource: {reference: r, url: u, revision: v}\n"
     "setup: {path: gdaki, tokens: 128, hidden: 7168, topk: 8, dispatch_bytes: 7408,"
     " combine_bytes: 14336, gpus_per_node: 8, nic_GBps: 50}\n"
     "points:\n  d: {op: dispatch, ep: 8, value: 77, unit: us}\n",
     "t.yaml:setup: missing key 'nvlink_GBps'"),
    ("kind: one_op\nsystem: s\nsource: {reference: r, url: u, revision: v}\npoints: {}\n",
     "t.yaml:points: no points"),
    ("kind: [one_op\n", "malformed YAML"),
]  # fmt: skip


@pytest.mark.parametrize("text,message", BAD)
def test_malformed_published_table_is_refused_naming_file_and_key(
    tmp_path: Path, text: str, message: str
):
    with pytest.raises(ConfigError) as e:
        blind.load_table(_write(tmp_path, text))
    assert message in str(e.value)


def test_shipped_tables_load_and_name_their_sources():
    tables = blind.load_tables(sorted(PUBLISHED.glob("*.yaml")))
    assert len(tables) >= 4
    outside = [t for t in tables if "arxiv.org" not in t.source["url"]]
    assert len(outside) >= 2  # at least two public tables of other systems
    for t in outside:  # pinned to a commit, not a moving branch
        assert "/blob/" in t.source["url"] and "commit" in t.source["revision"]


@pytest.mark.parametrize(
    "name,csv",
    [
        ("paper_table03_pib", "table03_one_op_8B.csv"),
        ("paper_table05_pib", "table05_minigda_msgrate_8B_PIB.csv"),
    ],
)
def test_paper_numbers_match_the_transcribed_tables(name: str, csv: str):
    """Every copied paper number is a number of the paper's table as the report transcribes it."""
    t = blind.load_table(PUBLISHED / f"{name}.yaml")
    paper = pd.read_csv(PAPER_CSV / csv, dtype=str)
    values = {float(v) for col in paper.columns for v in paper[col].dropna() if _is_num(v)}
    for pt in t.points:
        assert pt.value in values, f"{name}:{pt.key}: {pt.value} is not in {csv}"


def test_table03_numbers_are_at_their_row_and_column():
    t = blind.load_table(PUBLISHED / "paper_table03_pib.yaml")
    paper = pd.read_csv(PAPER_CSV / "table03_one_op_8B.csv", dtype=str).set_index("path")
    for pt in t.points:
        words = pt.ref.split()
        assert words[0] == "table03", pt.key
        row, column = " ".join(words[1:-1]), words[-1]
        assert float(paper.loc[row, column]) == pt.value, f"{pt.key}: {row} / {column}"


def _is_num(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def test_paper_points_that_the_model_calibrates_on_are_found_fitted():
    """Every Table 3/5 number the paper calibration takes is flagged when predicted with it."""
    tables = [blind.load_table(PUBLISHED / f"{n}.yaml") for n in
              ("paper_table03_pib", "paper_table05_pib")]  # fmt: skip
    p = from_paper("P-IB")
    used = blind.calibration_keys_used(p)
    fitted = {k for t in tables for pt in t.points for k in blind.fitted_by(pt.ref, used)}
    expected = {k for k in used if blind.CALIBRATE[k].source.startswith(("table03", "table05"))}
    assert fitted == expected and len(expected) >= 10
