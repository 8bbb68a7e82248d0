"""Prediction sweeps for a platform: one long table, one row per predicted number.

Columns: ``sweep`` (one_op | msg_rate | loaded_rtt | connections | proxy_rate |
completion_scope), ``path``, the sweep coordinates (``threads``, ``qps``, ``batch``, ``workers``,
``bg_ctas``, ``mode``, ``connections``, ``traffic``, ``clock_state``), ``metric``, ``value``,
``unit`` and ``platform``. Coordinates a sweep does not use are empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from gicomm.columns import PARAM_PREFIX, param_column
from gicomm.model import scenarios as S
from gicomm.model.calibrate import from_paper
from gicomm.model.parameters import ModelParams, apply_platform

THREADS = (1, 4, 16, 64, 256, 1024)
QPS = (1, 4, 16, 64)
BATCHES = (1, 4, 16, 32)
BG_CTAS = (0, 1, 2, 4, 8, 16, 32, 64)
CONNECTIONS = (16, 64, 256, 1024, 1350, 2048, 3000, 4096, 8192, 16384, 32768, 65536, 100_000)
WORKERS = (1, 2, 4, 8)
PROXY_BATCHES = (1, 4, 16)
SCOPE_QPS = (1, 2, 4, 8, 16, 32)
FULL: dict[str, tuple[int, ...]] = {
    "threads": THREADS,
    "qps": QPS,
    "batches": BATCHES,
    "bg_ctas": BG_CTAS,
    "connections": CONNECTIONS,
    "workers": WORKERS,
    "proxy_batches": PROXY_BATCHES,
    "scope_qps": SCOPE_QPS,
}
QUICK: dict[str, tuple[int, ...]] = {
    "threads": (1, 16, 64),
    "qps": (1, 16),
    "batches": (1, 16),
    "bg_ctas": (0, 8, 64),
    "connections": (64, 1350, 3000, 8192),
    "workers": (1, 4),
    "proxy_batches": (1, 16),
    "scope_qps": (1, 16),
}

PAPER_PLATFORMS = {"h200": "P-IB", "b200": "P-RoCE", "h100": "P-H100", "gb200": "P-GB200"}


def base_params(platform: dict[str, Any] | None) -> ModelParams:
    """Paper-calibrated parameters for the paper platform a config names (P-IB otherwise)."""
    platform = platform or {}
    spec = platform.get("platform_spec", platform)
    name = str(spec.get("paper_name") or PAPER_PLATFORMS.get(str(platform.get("platform")), "P-IB"))
    return from_paper(name if name in ("P-IB", "P-H100") else "P-IB")


def _row(
    sweep: str, path: str, metric: str, value: float, unit: str, **coords: Any
) -> dict[str, Any]:
    return {"sweep": sweep, "path": path, **coords, "metric": metric, "value": value, "unit": unit}


def sweep_msg_rate(
    p: ModelParams, threads: Iterable[int], qps: Iterable[int], batches: Iterable[int]
) -> list[dict[str, Any]]:
    rows = []
    for q in qps:
        for t in threads:
            if t < q:
                continue
            for b in batches:
                rate = S.message_rate(p, threads=t, qps=q, batch=b, msgs=max(100_000, 64 * t))
                rows.append(
                    _row(
                        "msg_rate",
                        "mini-gda",
                        "msg_rate",
                        rate,
                        "Mmsg/s",
                        threads=t,
                        qps=q,
                        batch=b,
                    )
                )
    return rows


def sweep_loaded_rtt(
    p: ModelParams, bg_ctas: Iterable[int], probes: int = 16
) -> list[dict[str, Any]]:
    rows = []
    for path in ("gdaki", "mini-proxy"):
        for mode in ("shared", "reserved"):
            for n in bg_ctas:
                if n == 0:
                    one = S.single_op(p, path)
                    rtt, carried = one.rtt_us, 0.0
                else:
                    r = S.loaded_rtt(p, path, mode, bg_ctas=n, probes=probes)
                    rtt, carried = r.rtt_p50_us, r.carried_mmsg
                rows.append(_row("loaded_rtt", path, "rtt_p50", rtt, "us", bg_ctas=n, mode=mode))
                rows.append(
                    _row(
                        "loaded_rtt", path, "carried_load", carried, "Mmsg/s", bg_ctas=n, mode=mode
                    )
                )
    return rows


def sweep_connections(p: ModelParams, connections: Iterable[int]) -> list[dict[str, Any]]:
    rows = []
    for traffic, bidir in (("send_only", False), ("send_recv", True)):
        for n in connections:
            r = S.connection_scaling(p, n, bidirectional=bidir)
            rows.append(
                _row(
                    "connections",
                    "mini-gda",
                    "msg_rate",
                    r.rate_mmsg,
                    "Mmsg/s",
                    connections=n,
                    traffic=traffic,
                )
            )
            rows.append(
                _row(
                    "connections",
                    "mini-gda",
                    "context_miss_rate",
                    r.miss_rate,
                    "ratio",
                    connections=n,
                    traffic=traffic,
                )
            )
    return rows


def sweep_proxy(
    p: ModelParams, workers: Iterable[int], batches: Iterable[int]
) -> list[dict[str, Any]]:
    rows = []
    for state in ("cold", "warm"):
        for w in workers:
            for b in batches:
                rate = S.proxy_rate(
                    p, workers=w, rings=32, batch=b, producers=32, state=state, msgs=100_000
                )
                rows.append(
                    _row(
                        "proxy_rate",
                        "mini-proxy",
                        "msg_rate",
                        rate,
                        "Mmsg/s",
                        workers=w,
                        batch=b,
                        clock_state=state,
                    )
                )
    return rows


def sweep_scope(p: ModelParams, qps: Iterable[int]) -> list[dict[str, Any]]:
    rows = []
    for q in qps:
        for scope, polled in (("used_qp", 1), ("all_qps", q)):
            one = S.single_op(p, "mini-gda", qps_polled=polled)
            rows.append(
                _row(
                    "completion_scope",
                    "mini-gda",
                    "completion",
                    one.completion_us,
                    "us",
                    qps=q,
                    mode=scope,
                )
            )
    return rows


def sweep_one_op(p: ModelParams) -> list[dict[str, Any]]:
    rows = []
    for path in p.paths:
        states = ("cold", "warm") if p.paths[path].kind == "proxy" else ("",)
        for st in states:
            one = S.single_op(p, path, state=st or "cold")
            for metric, v in (
                ("issue", one.issue_us),
                ("completion", one.completion_us),
                ("rtt", one.rtt_us),
            ):
                rows.append(_row("one_op", path, metric, v, "us", clock_state=st))
    return rows


def predict(
    params: ModelParams | None = None,
    platform: dict[str, Any] | None = None,
    *,
    quick: bool = False,
) -> pd.DataFrame:
    """All sweeps for ``platform`` (a config dict, see parameters.PLATFORM_FIELDS).

    ``params`` (e.g. calibrated from a campaign) override the paper calibration; the platform's
    fields are applied on top. ``quick`` runs a small subset (tests).
    """
    p = params or base_params(platform)
    if platform:
        p = apply_platform(p, platform)
    g = QUICK if quick else FULL
    rows = sweep_one_op(p)
    rows += sweep_msg_rate(p, g["threads"], g["qps"], g["batches"])
    rows += sweep_loaded_rtt(p, g["bg_ctas"], probes=8 if quick else 16)
    rows += sweep_connections(p, g["connections"])
    rows += sweep_proxy(p, g["workers"], g["proxy_batches"])
    rows += sweep_scope(p, g["scope_qps"])
    df = pd.DataFrame(rows)
    for col in ("threads", "qps", "batch", "workers", "bg_ctas", "connections"):
        if col in df:
            df[col] = df[col].astype("Int64")
    df["platform"] = p.platform
    cols = [
        "platform",
        "sweep",
        "path",
        "threads",
        "qps",
        "batch",
        "workers",
        "bg_ctas",
        "mode",
        "connections",
        "traffic",
        "clock_state",
        "metric",
        "value",
        "unit",
    ]
    return df.reindex(columns=cols)


# ----------------------------------------------------------------------------------------------
# the model at a campaign's own measured points, for plots of predicted beside measured

_ALIASES = {
    "threads": (param_column("threads"),),
    "qps": (param_column("qps"), param_column("qps_per_peer")),
    "batch": (param_column("batch"), param_column("wqes_per_doorbell")),
    "bg_ctas": (
        param_column("bg_ctas"),
        param_column("background_ctas"),
        param_column("bulk_ctas"),
    ),
    "mode": (param_column("queue"), param_column("mode"), param_column("sharing")),
    "connections": (param_column("connections"), param_column("active_qps")),
    "workers": (param_column("workers"),),
    "rings": (param_column("rings"),),
    "bg_enqueue": (param_column("bulk_enqueue"),),
}
# gicomm-bench-loaded-rtt's mini-proxy layout where a record leaves it to the driver's defaults
# (native/bench/kernel_cost/loaded_rtt.cu): 2 workers, rings min(32, 2 + max(1, bulk CTAs)), of
# which rings 0 and 1 are the probe's and the responder's; the bulk CTAs take the baseline
# enqueue unless bulk_enqueue=tuned.
_LOADED_RTT_WORKERS = 2
_LOADED_RTT_OWN_RINGS = 2
_PATHS = {"mini-gda": "mini-gda", "mini-proxy": "mini-proxy", "nccl-gin-gdaki": "gdaki"}


def _coord(row: pd.Series, name: str) -> Any:
    for col in _ALIASES[name]:
        if col in row and pd.notna(row[col]):
            return row[col]
    return None


def _loaded(p: ModelParams, row: pd.Series, path: str, bg: int, metric: str) -> float:
    """The probe of a loaded-RTT record (rtt_ns or completion_ns) under ``bg`` background CTAs,
    in the record's queue mode and, for the proxy, its workers, bulk rings, chain and enqueue."""
    mode = str(_coord(row, "mode") or "reserved")
    mode = "shared" if mode.startswith("shar") else "reserved"
    kw: dict[str, Any] = {}
    if p.path(path).kind == "proxy":
        rings = int(_coord(row, "rings") or min(32, _LOADED_RTT_OWN_RINGS + max(1, bg)))
        # shared: every bulk CTA on the probe's ring; reserved: the bulk rings beside it
        bulk_rings = 1 if mode == "shared" else rings - _LOADED_RTT_OWN_RINGS
        workers = int(_coord(row, "workers") or _LOADED_RTT_WORKERS)
        enqueue = str(_coord(row, "bg_enqueue") or "baseline")
        kw = {
            "workers": min(workers, bulk_rings + (mode == "reserved")),
            "rings": bulk_rings,
            "chain": int(_coord(row, "batch") or p.path(path).worker_bmax),
            "bg_enqueue": enqueue,
            "state": _clock_state(row),
        }
    r = memo(S.loaded_rtt, p, path, mode, bg_ctas=bg, probes=12, **kw)
    return (r.rtt_p50_us if metric == "rtt_ns" else r.completion_p50_us) * 1e3


# Many measured points are the same scenario to the model (a sweep parameter it does not model):
# each scenario is simulated once per parameter set (the simulations are deterministic).
_MEMO: dict[tuple[Any, ...], Any] = {}


def memo(fn: Any, p: ModelParams, *args: Any, **kw: Any) -> Any:
    key = (fn.__name__, id(p), args, tuple(sorted(kw.items())))
    if key not in _MEMO:
        _MEMO[key] = fn(p, *args, **kw)
    return _MEMO[key]


def _predict_row(p: ModelParams, row: pd.Series, path: str) -> float | None:
    metric = str(row["metric"])
    if metric in ("issue_ns", "completion_ns", "rtt_ns"):
        bg = _coord(row, "bg_ctas")
        if bg is not None and int(bg) > 0 and metric != "issue_ns":
            return _loaded(p, row, path, int(bg), metric)
        one = memo(S.single_op, p, path, state=_clock_state(row))
        return {"issue_ns": one.issue_us, "completion_ns": one.completion_us, "rtt_ns": one.rtt_us}[
            metric
        ] * 1e3
    if metric == "msg_rate":
        conns = _coord(row, "connections")
        if conns is not None:
            return memo(S.connection_scaling, p, int(conns)).rate_mmsg
        b = int(_coord(row, "batch") or 1)
        if path == "mini-proxy":
            return memo(S.proxy_rate, p, batch=b, state=_clock_state(row))
        t, q = int(_coord(row, "threads") or 1), int(_coord(row, "qps") or 1)
        return memo(S.message_rate, p, path, threads=t, qps=q, batch=b, msgs=max(50_000, 32 * t))
    return None


def _clock_state(row: pd.Series) -> str:
    """The proxy workers' clock state of a measured row: the record's cpu_clock_state, else the
    swept `state` parameter, else cold (an empty CSV cell reads as NaN, never as a state)."""
    for key in ("cpu_clock_state", param_column("state")):
        value = row.get(key)
        if isinstance(value, str) and value in ("cold", "warm"):
            return value
    return "cold"


def beside_measured(p: ModelParams, tidy: pd.DataFrame, max_points: int = 5000) -> pd.DataFrame:
    """The model evaluated at each measured point of ``tidy`` it can represent.

    Columns: the record identity (experiment, transport, nic_backend, point_id, metric, unit), the
    measured ``p50`` (median over runs), ``predicted`` in the same unit and ``ratio``.
    """
    cols = ["experiment", "transport", "nic_backend", "point_id", "metric", "unit"]
    if tidy.empty or not set(cols) <= set(tidy.columns):
        return pd.DataFrame(columns=[*cols, "p50", "predicted", "ratio"])
    ok = tidy[tidy["status"] == "ok"] if "status" in tidy else tidy
    ok = ok[ok["transport"].isin(list(_PATHS))]
    ok = ok[ok["metric"].isin(["issue_ns", "completion_ns", "rtt_ns", "msg_rate"])]
    if param_column("size") in ok:  # the model's messages are 8 bytes (docs/model.md, Limits)
        size = pd.to_numeric(ok[param_column("size")], errors="coerce")
        ok = ok[size.isna() | (size <= 8)]
    keep = [
        c for c in ok.columns if c in cols or c.startswith(PARAM_PREFIX) or c == "cpu_clock_state"
    ]
    # one row per point and metric: the median over runs of that metric's p50
    points = (
        ok.groupby(["point_id", "metric"], dropna=False)
        .agg({**{c: "first" for c in keep if c not in ("point_id", "metric")}, "p50": "median"})
        .reset_index(level="metric")
    )
    rows = []
    _MEMO.clear()  # keyed by the parameters object: valid for this call only
    for pid, row in points.head(max_points).iterrows():
        path = _PATHS[str(row["transport"])]
        pred = _predict_row(p, row, path)
        if pred is None:
            continue
        rows.append(
            {
                **{c: row.get(c) for c in cols if c != "point_id"},
                "point_id": pid,
                "p50": row["p50"],
                "predicted": pred,
                "ratio": pred / row["p50"] if row["p50"] else float("nan"),
            }
        )
    return pd.DataFrame(rows, columns=[*cols, "p50", "predicted", "ratio"])
