"""Blind check: the model predicts published numbers it was never fitted to.

Published tables live in ``config/published/*.yaml`` (one table a file, each number with its
source: the paper's table, row and column, or a repository's file at a commit). The model, with a
campaign's calibration (``from_records``: what this project measured, the paper's calibration set
for the rest), predicts every point; each row says whether the parameters it used were fitted to
that very number (``role`` ``fitted``, not evidence) or not (``blind``), and the error either way.

A point is ``fitted`` when its ``ref`` (row and column, spelled as ``paper.CALIBRATE`` spells its
sources) names a calibration number that the source of one of the set's parameters names: the
set took that number. Anything else, including every table from outside the paper, is ``blind``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from gicomm.errors import ConfigError
from gicomm.model.calibrate import calibration_table
from gicomm.model.paper import CALIBRATE, VALIDATE
from gicomm.model.parameters import ModelParams
from gicomm.yamlio import load_yaml

KINDS = ("one_op", "msg_rate", "ep_low_latency")
ONE_OP_PATHS = ("mini-gda", "gdaki", "mini-proxy", "mini-proxy-baseline")
ONE_OP_METRICS = ("issue", "completion", "rtt")
EP_PATHS = ("gdaki", "mini-gda", "mini-proxy")
EP_OPS = ("dispatch", "combine")
UNITS = {"one_op": "us", "msg_rate": "Mmsg/s", "ep_low_latency": "us"}
EP_SETUP_INTS = ("tokens", "hidden", "topk", "dispatch_bytes", "combine_bytes", "gpus_per_node")
EP_SETUP_NUMBERS = ("nic_GBps", "nvlink_GBps")
EP_PROXY_WORKERS = 4  # CPU proxy threads per GPU when a table's setup does not say (assumption)
SOURCE_KEYS = ("reference", "url", "revision")
COLUMNS = [
    "table", "system", "key", "ref", "metric", "unit", "published", "predicted", "ratio",
    "error_pct", "role", "fitted_by", "in_validation", "how", "source",
]  # fmt: skip


@dataclass(frozen=True)
class Point:
    key: str
    value: float
    unit: str
    metric: str
    coords: dict[str, Any]
    ref: str = ""
    note: str = ""


@dataclass
class Table:
    name: str  # file stem
    kind: str
    system: str
    source: dict[str, str]
    setup: dict[str, Any] = field(default_factory=dict)
    points: list[Point] = field(default_factory=list)

    def source_text(self) -> str:
        return f"{self.source['reference']} ({self.source['url']}, {self.source['revision']})"


# ---- loading -------------------------------------------------------------------------------------
def _at(where: str, key: str) -> str:
    """``file:key`` at the top of a file (``where`` ends with ':'), ``file:point.key`` inside."""
    return f"{where}{key}" if where.endswith(":") else f"{where}.{key}"


def _need(where: str, d: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in d:
        raise ConfigError(f"{where.rstrip(':')}: missing key '{key}'")
    v = d[key]
    ok = isinstance(v, kind) and not (isinstance(v, bool) and bool not in _tuple(kind))
    if not ok:
        names = "/".join(t.__name__ for t in _tuple(kind))
        raise ConfigError(f"{_at(where, key)}: {v!r} is not a {names}")
    return v


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _choice(where: str, d: dict[str, Any], key: str, allowed: Iterable[str]) -> str:
    v = _need(where, d, key, str)
    allowed = tuple(allowed)
    if v not in allowed:
        raise ConfigError(f"{_at(where, key)}: {v!r} is not one of {', '.join(allowed)}")
    return v


def _positive_int(where: str, d: dict[str, Any], key: str) -> int:
    v = _need(where, d, key, int)
    if v < 1:
        raise ConfigError(f"{_at(where, key)}: {v} must be a positive integer")
    return v


def _positive(where: str, d: dict[str, Any], key: str) -> float:
    v = float(_need(where, d, key, (int, float)))
    if not (math.isfinite(v) and v > 0):
        raise ConfigError(f"{_at(where, key)}: {v} must be a positive finite number")
    return v


def _point(kind: str, where: str, key: str, d: Any) -> Point:
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: a point is a mapping, got {type(d).__name__}")
    value = _positive(where, d, "value")
    unit = _need(where, d, "unit", str)
    if unit != UNITS[kind]:
        raise ConfigError(f"{where}.unit: {unit!r}; a {kind} table is in {UNITS[kind]}")
    ref = _need(where, d, "ref", str) if "ref" in d else ""
    note = _need(where, d, "note", str) if "note" in d else ""
    if kind == "one_op":
        coords = {"path": _choice(where, d, "path", ONE_OP_PATHS)}
        metric = _choice(where, d, "metric", ONE_OP_METRICS)
        known = {"path", "metric"}
    elif kind == "msg_rate":
        coords = {k: _positive_int(where, d, k) for k in ("threads", "qps", "batch")}
        coords["sms"] = _positive_int(where, d, "sms") if "sms" in d else None
        coords["path"] = _choice(where, d, "path", ("mini-gda", "gdaki"))
        metric = "msg_rate"
        known = {"threads", "qps", "batch", "sms", "path"}
    else:
        coords = {"ep": _positive_int(where, d, "ep")}
        metric = _choice(where, d, "op", EP_OPS)
        known = {"ep", "op"}
    extra = set(d) - known - {"value", "unit", "ref", "note"}
    if extra:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(map(str, extra)))}")
    return Point(key, value, unit, metric, coords, ref, note)


def load_table(path: str | Path) -> Table:
    """One published table; a malformed one fails naming file:key and what is allowed."""
    path = Path(path)
    doc = load_yaml(path)
    name = f"{path}:"
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: a published table is a mapping: kind, system, source, points")
    kind = _choice(name, doc, "kind", KINDS)
    system = _need(name, doc, "system", str)
    src = _need(name, doc, "source", dict)
    source = {k: str(_need(f"{path}:source", src, k, str)) for k in SOURCE_KEYS}
    setup: dict[str, Any] = {}
    if kind == "ep_low_latency":
        raw = _need(name, doc, "setup", dict)
        w = f"{path}:setup"
        setup = {k: _positive_int(w, raw, k) for k in EP_SETUP_INTS}
        setup |= {k: _positive(w, raw, k) for k in EP_SETUP_NUMBERS}
        setup["path"] = _choice(w, raw, "path", EP_PATHS)
        setup["workers"] = _positive_int(w, raw, "workers") if "workers" in raw else None
    points = _need(name, doc, "points", dict)
    if not points:
        raise ConfigError(f"{path}:points: no points")
    out = [_point(kind, f"{path}:{k}", str(k), v) for k, v in points.items()]
    return Table(path.stem, kind, system, source, setup, out)


def load_tables(paths: Iterable[str | Path]) -> list[Table]:
    return [load_table(p) for p in sorted(map(Path, paths))]


# ---- was the model fitted to it? -----------------------------------------------------------------
_PAPER_KEY = re.compile(r"paper (\S+) =")


def calibration_keys_used(p: ModelParams) -> set[str]:
    """The ``paper.CALIBRATE`` keys this parameter set took: those named by the source of a
    parameter it holds (a source a campaign's records replaced names no paper key). Where one
    source sets several parameters, all its keys count: a number is never called blind while
    any parameter still comes from it."""
    sources = calibration_table(p)["source"].astype(str)
    used = {m for s in sources for m in _PAPER_KEY.findall(s)}
    return used & set(CALIBRATE)


def fitted_by(ref: str, used: set[str]) -> list[str]:
    return sorted(k for k in used if ref and CALIBRATE[k].source == ref)


def in_validation(ref: str) -> bool:
    return bool(ref) and any(n.source == ref for n in VALIDATE.values())


# ---- predictions ---------------------------------------------------------------------------------
Predictor = Callable[[ModelParams, Table, Point], tuple[float, str]]


class _Sim:
    """Simulations of one parameter set, each run once however many points need it."""

    def __init__(self, p: ModelParams) -> None:
        from gicomm.model import scenarios as S  # numba: only where a prediction is made

        self.p = p
        self.one = lru_cache(maxsize=None)(lambda path: S.single_op(p, path))
        self.rate = lru_cache(maxsize=None)(
            lambda path, t, q, b: S.message_rate(p, path, threads=t, qps=q, batch=b)
        )
        self.proxy = lru_cache(maxsize=None)(
            lambda workers, producers: S.proxy_rate(
                p, workers=workers, rings=producers, producers=producers, batch=16
            )
        )


_SIMS: dict[int, _Sim] = {}


def _sim(p: ModelParams) -> _Sim:
    s = _SIMS.get(id(p))
    if s is None or s.p is not p:
        s = _SIMS[id(p)] = _Sim(p)
    return s


def _one_op(sim: _Sim, pt: Point) -> tuple[float, str]:
    path = pt.coords["path"]
    if path != "mini-proxy-baseline":
        one = sim.one(path)
        v = {"issue": one.issue_us, "completion": one.completion_us, "rtt": one.rtt_us}
        return v[pt.metric], f"model one op, {path}"
    # the multi-producer enqueue in place of the single store, once per direction of a round trip
    mp = sim.p.path("mini-proxy")
    one = sim.one("mini-proxy")
    extra = (mp.shared_enqueue_ns - mp.issue_ns) / 1e3
    v = {
        "issue": mp.shared_enqueue_ns / 1e3,
        "completion": one.completion_us + extra,
        "rtt": one.rtt_us + 2 * extra,
    }
    return v[pt.metric], "model one op, mini-proxy with the multi-producer enqueue"


def _ep(sim: _Sim, t: Table, pt: Point) -> tuple[float, str]:
    """Wire time at the stated line rates beside the model's issue time, plus one op's latency.

    The model has no payload bandwidth: every message's bytes cross the NIC (remote ranks) or
    NVLink (ranks of the same node) at the table's stated rate, in parallel with the model's
    issue of ``tokens * topk`` messages; the model's idle put+completion closes the operation.
    """
    s, ep = t.setup, pt.coords["ep"]
    msgs = s["tokens"] * s["topk"]
    size = s["dispatch_bytes"] if pt.metric == "dispatch" else s["combine_bytes"]
    local = min(1.0, s["gpus_per_node"] / ep)
    wire_us = (
        max(msgs * size * (1 - local) / s["nic_GBps"], msgs * size * local / s["nvlink_GBps"]) / 1e3
    )
    peers = min(ep, 64)
    if s["path"] == "mini-proxy":
        workers = s["workers"] or EP_PROXY_WORKERS
        rate = sim.proxy(workers, peers)
        rate_how = f"proxy {workers} workers, {peers} producers"
    else:
        rate = sim.rate(s["path"], peers, peers, 1)
        rate_how = f"{peers} threads x {peers} QPs"
    issue_us = msgs / rate
    lat_us = sim.one(s["path"]).completion_us
    how = (
        f"put+completion {lat_us:.2f} + max(wire {wire_us:.1f}, issue of {msgs} msgs "
        f"{issue_us:.1f} at {rate:.1f} Mmsg/s, {rate_how}) us"
    )
    return lat_us + max(wire_us, issue_us), how


def model_prediction(p: ModelParams, t: Table, pt: Point) -> tuple[float, str]:
    """The model's value at a published point and how it was computed."""
    sim = _sim(p)
    if t.kind == "one_op":
        return _one_op(sim, pt)
    if t.kind == "msg_rate":
        c = pt.coords
        v = sim.rate(c["path"], c["threads"], c["qps"], c["batch"])
        how = f"model msg rate, {c['threads']} threads x {c['qps']} QPs, {c['batch']} WQEs/doorbell"
        return v, how + ("" if not pt.note else f"; {pt.note}")
    return _ep(sim, t, pt)


def blind_table(
    p: ModelParams, tables: Iterable[Table], predict: Predictor = model_prediction
) -> pd.DataFrame:
    """Every published point with the model's prediction, the ratio and whether it was fitted."""
    used = calibration_keys_used(p)
    rows = []
    for t in tables:
        for pt in t.points:
            value, how = predict(p, t, pt)
            by = fitted_by(pt.ref, used)
            ratio = value / pt.value
            rows.append(
                {
                    "table": t.name,
                    "system": t.system,
                    "key": pt.key,
                    "ref": pt.ref,
                    "metric": pt.metric,
                    "unit": pt.unit,
                    "published": pt.value,
                    "predicted": value,
                    "ratio": ratio,
                    "error_pct": (ratio - 1.0) * 100.0,
                    "role": "fitted" if by else "blind",
                    "fitted_by": ";".join(by),
                    "in_validation": in_validation(pt.ref),
                    "how": how,
                    "source": t.source_text(),
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per table, over its blind points: how many, the geometric mean ratio, the median and worst
    factor off (max(r, 1/r)), and how many are within x1.25 and x2."""
    rows = []
    for name, d in df.groupby("table", sort=False):
        b = d[d["role"] == "blind"]
        r = b["ratio"].astype(float)
        factor = r.where(r >= 1, 1 / r)
        rows.append(
            {
                "table": name,
                "points": len(d),
                "blind": len(b),
                "fitted": len(d) - len(b),
                "geomean_ratio": float(math.exp(r.map(math.log).mean())) if len(b) else math.nan,
                "median_factor": float(factor.median()) if len(b) else math.nan,
                "worst_factor": float(factor.max()) if len(b) else math.nan,
                "within_1.25x": int((factor <= 1.25).sum()),
                "within_2x": int((factor <= 2.0).sum()),
            }
        )
    return pd.DataFrame(rows)
