"""Intervals over independent process runs: each run gives one value (its p50 of a point, or its
value of a claim's check), and the interval is the 95% Student-t interval of their mean. Unlike a
bootstrap of three or five values (which returns their min..max), it widens with few runs and
narrows only when runs agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from gicomm.columns import PARAM_PREFIX, SERIES_KEYS, as_text, param_columns

# Two-sided 95% quantiles of Student's t (t_0.975) by degrees of freedom; 1.96 beyond.
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120,
        17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000,
        120: 1.980}  # fmt: skip
LEVEL = 0.95


def t_quantile(df: int) -> float:
    """t_0.975 for `df` degrees of freedom (the next smaller tabulated df: conservative)."""
    if df < 1:
        return float("nan")
    known = [k for k in T975 if k <= df]
    return T975[max(known)] if df <= 120 else 1.96


def t_interval(values: Iterable[float]) -> tuple[float, float]:
    """95% interval of the mean of independent values; (nan, nan) with fewer than two."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size < 2:
        return (float("nan"), float("nan"))
    half = t_quantile(v.size - 1) * float(np.std(v, ddof=1)) / np.sqrt(v.size)
    m = float(np.mean(v))
    return (m - half, m + half)


def spread(values: Sequence[float]) -> float:
    """max/min of positive values (how far apart the runs are); nan otherwise."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size < 2 or (v <= 0).any():
        return float("nan")
    return float(v.max() / v.min())


def per_run_summaries(
    records: pd.DataFrame, experiments: Sequence[str] | None = None
) -> dict[int, pd.DataFrame]:
    """One summary per independent run: each point's p50 and p99 of that run alone (a point a
    run wrote twice, after a retried batch, counts once: the median), keyed like the aggregate
    summary, with runs = 1."""
    if records.empty or "run_index" not in records:
        return {}
    d = records if experiments is None else records[records["experiment"].isin(experiments)]
    d = d[(d["status"] == "ok") & d["p50"].notna()] if "status" in d else d
    if d.empty:
        return {}
    keys = [k for k in SERIES_KEYS if k in d] + param_columns(d)
    t = d.copy()
    t[keys] = as_text(t[keys])
    clocks = "sm_clock_mhz" if "sm_clock_mhz" in t else "p50"
    g = (
        t.groupby([*keys, "run_index"], sort=False, dropna=False)
        .agg(p50=("p50", "median"), p99=("p99", "median"), sm_clock_mhz=(clocks, "median"))
        .reset_index()
    )
    for k in keys:  # text keys back to what the summary holds: numbers, and NaN for missing
        nonempty = g[k][g[k] != ""]
        num = pd.to_numeric(nonempty, errors="coerce")
        g[k] = (
            pd.to_numeric(g[k].replace("", np.nan), errors="coerce")
            if not nonempty.empty and num.notna().all() and k.startswith(PARAM_PREFIX)
            else g[k].replace("", np.nan)
        )
    g["runs"] = 1
    return {int(r): f.drop(columns="run_index") for r, f in g.groupby("run_index")}


def point_intervals(records: pd.DataFrame) -> pd.DataFrame:
    """Per point and metric: how many runs, the 95% t-interval of their p50s, and their spread
    (max/min), keyed like the aggregate summary."""
    runs = per_run_summaries(records)
    if not runs:
        return pd.DataFrame()
    long = pd.concat([s.assign(_run=r) for r, s in runs.items()], ignore_index=True)
    keys = [k for k in SERIES_KEYS if k in long] + param_columns(long)
    rows = []
    for key, g in long.groupby(keys, dropna=False, sort=False):
        lo, hi = t_interval(g["p50"])
        rows.append(
            dict(zip(keys, key, strict=True))
            | {"ci95_lo": lo, "ci95_hi": hi, "run_spread": spread(list(g["p50"]))}
        )
    return pd.DataFrame(rows)
