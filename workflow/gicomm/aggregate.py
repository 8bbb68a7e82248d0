"""Aggregation across independent process runs, and ratios between transports of the same run.

Input: the tidy table (one row per record: one metric at one sweep point of one process run).
Output tables (results/<campaign>/aggregate/):

- summary.csv: one row per (campaign, host, experiment, transport, NIC backend, how a NIC point
  ran (rdma_provider, doorbell_target, topology), CPU clock state, sweep point, metric): the
  median over runs of the per-run p50 and p99, their min and max over runs, the 95% Student-t
  interval of the per-run p50s (gicomm.intervals, as the verdicts use; empty with fewer than
  two runs), the median over runs of the overhead above the same-run floor (overhead_ns, where
  one applies), the path checks of the runs aggregated, and the worst host load over the runs
  (host_others_busy_max, host_loadavg_max: gicomm.hostload).
- ratios.csv: for every pair of transports measured at the same point in the same process run,
  the per-run ratio of their p50, then its median, min and max over runs.

Only records with status ok are aggregated; a metric that is absent simply has no rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gicomm.columns import (
    RATIO_COLUMNS,
    SERIES_KEYS,
    SUMMARY_STATS,
    key_text,
    observed_columns,
    param_columns,
)
from gicomm.hostload import over_runs as host_load_over_runs
from gicomm.intervals import t_interval

REAL_NIC_BACKENDS = ("mlx5", "verbs")


def ok_records(df: pd.DataFrame) -> pd.DataFrame:
    """The ok records. An ok record always has a p50 (the record reader refuses NaN and an ok
    record without stats), so one without is an error here, never a silently dropped value."""
    if df.empty or "status" not in df:
        return df.iloc[0:0]
    ok = df[df["status"] == "ok"]
    if ok["p50"].isna().any():
        bad = ok[ok["p50"].isna()].iloc[0]
        raise ValueError(
            f"an ok record without a p50 in the tidy table: {bad['experiment']} point "
            f"{bad.get('point_id')} metric {bad['metric']} run {bad['run_index']}"
        )
    return ok


def _group_keys(df: pd.DataFrame) -> list[str]:
    return [k for k in SERIES_KEYS if k in df.columns] + param_columns(df)


def _stringify_keys(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Group keys as strings ('' for missing) so NaN never splits or drops a group."""
    out = df.copy()
    for k in keys:
        out[k] = out[k].map(key_text)
    return out


def summarize_runs(df: pd.DataFrame) -> pd.DataFrame:
    """One row per point and metric with the spread over independent process runs."""
    ok = ok_records(df)
    keys = _group_keys(df)
    observed = observed_columns(df)
    if ok.empty:
        return pd.DataFrame(columns=keys + SUMMARY_STATS + observed)
    ok = _stringify_keys(ok, keys)
    rows = []
    for key, g in ok.groupby(keys, sort=True, dropna=False):
        # One value per run: a run that wrote a point twice (a retried batch) counts once.
        per_run = g.assign(overhead_ns=_numeric(g, "overhead_ns")).groupby("run_index").agg(
            p50=("p50", "median"), p99=("p99", "median"), n=("n", "sum"),
            overhead_ns=("overhead_ns", "median"),
        )  # fmt: skip
        overhead = per_run["overhead_ns"].dropna()
        lo, hi = t_interval(per_run["p50"].to_numpy())
        clocks = _numeric(g, "sm_clock_mhz")
        cpu = _numeric(g, "cpu_clock_mhz")
        ceiling = _numeric(g, "engine_ceiling")
        p99 = per_run["p99"].dropna()
        rows.append(
            dict(zip(keys, key, strict=True))
            | {
                "runs": int(per_run.shape[0]),
                "p50": float(per_run["p50"].median()),
                "p50_min": float(per_run["p50"].min()),
                "p50_max": float(per_run["p50"].max()),
                "p50_ci_lo": lo,
                "p50_ci_hi": hi,
                "p99": float(p99.median()) if not p99.empty else np.nan,
                "p99_min": float(p99.min()) if not p99.empty else np.nan,
                "p99_max": float(p99.max()) if not p99.empty else np.nan,
                "n_samples_total": float(per_run["n"].sum()),
                "sm_clock_mhz": float(clocks.median()) if clocks.notna().any() else np.nan,
                "sm_clock_min_mhz": float(clocks.min()) if clocks.notna().any() else np.nan,
                "sm_clock_max_mhz": float(clocks.max()) if clocks.notna().any() else np.nan,
                "cpu_clock_mhz": float(cpu.median()) if cpu.notna().any() else np.nan,
                # each run's own ceiling for the point's shape, over the runs
                "engine_ceiling": float(ceiling.median()) if ceiling.notna().any() else np.nan,
                "engine_ceiling_shape": _observed_value(g["engine_ceiling_shape"])
                if "engine_ceiling_shape" in g
                else np.nan,
                # above the same-run floor (gicomm.doctor.floors), median over runs
                "overhead_ns": float(overhead.median()) if not overhead.empty else np.nan,
                "path_check": _distinct(g["path_check"]) if "path_check" in g else np.nan,
            }
            | host_load_over_runs(g)
            | {c: _observed_value(g[c]) for c in observed}
        )
    out = pd.DataFrame(rows, columns=keys + SUMMARY_STATS + observed)
    for c in param_columns(out):
        out[c] = _restore_numeric(out[c])
    return out


def _observed_value(s: pd.Series) -> object:
    """An observed parameter over the runs of a point: its median, or its distinct values."""
    num = pd.to_numeric(s, errors="coerce")
    if num.notna().any() and num.notna().sum() == s.notna().sum():
        return float(num.median())
    return _distinct(s)


def _distinct(s: pd.Series) -> object:
    values = sorted({str(v) for v in s.dropna()})
    return " | ".join(values) if values else np.nan


def _numeric(g: pd.DataFrame, column: str) -> pd.Series:
    if column not in g:
        return pd.Series(np.nan, index=g.index, dtype=float)
    return pd.to_numeric(g[column], errors="coerce")


def _restore_numeric(s: pd.Series) -> pd.Series:
    """Parameters went through strings for grouping; give numeric ones their numbers back."""
    nonempty = s[s != ""]
    num = pd.to_numeric(nonempty, errors="coerce")
    if not nonempty.empty and num.notna().all():
        return pd.to_numeric(s.replace("", np.nan), errors="coerce")
    return s.replace("", np.nan)


def transport_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """Ratios of p50 between transports measured at the same point in the same process run
    (same campaign, host, experiment, backend, CPU clock state, parameters, metric, run)."""
    ok = ok_records(df)
    keys = [k for k in _group_keys(df) if k != "transport"]
    cols = keys + RATIO_COLUMNS
    if ok.empty or ok["transport"].nunique() < 2:
        return pd.DataFrame(columns=cols)
    ok = _stringify_keys(ok, keys)
    per_run = ok.groupby([*keys, "run_index", "transport"], dropna=False)["p50"].median()
    wide = per_run.unstack("transport")
    transports = list(wide.columns)
    rows = []
    for i, num in enumerate(transports):
        for den in transports[i + 1 :]:
            r = (wide[num] / wide[den]).dropna()
            r = r[np.isfinite(r)]
            if r.empty:
                continue
            for key, g in r.groupby(level=list(range(len(keys))), dropna=False):
                key = key if isinstance(key, tuple) else (key,)
                rows.append(
                    dict(zip(keys, key, strict=True))
                    | {
                        "numerator": num,
                        "denominator": den,
                        "runs": int(g.size),
                        "ratio": float(g.median()),
                        "ratio_min": float(g.min()),
                        "ratio_max": float(g.max()),
                    }
                )
    out = pd.DataFrame(rows, columns=cols)
    for c in param_columns(out):
        out[c] = _restore_numeric(out[c])
    return out


def is_real_nic(backend: object) -> bool:
    return str(backend) in REAL_NIC_BACKENDS
