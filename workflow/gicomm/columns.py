"""The columns of gicomm's tables, named once: the tidy table (one row per record), the summary over
runs, and the same-run ratios. Record writing (gicomm.records), tidy, aggregate, fits, tables,
report and the model read these names from here instead of spelling their own lists."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from gicomm.hostload import SUMMARY_COLUMNS as HOST_LOAD_SUMMARY

# Who measured what: a campaign's host and platform, the experiment, the point's transport and NIC
# backend (its other parameters are the param_ columns).
WHERE_COLUMNS = ["campaign", "host", "platform", "experiment", "transport", "nic_backend"]
# What names a point and a measured value (the record's identity fields, in table order).
IDENTITY_COLUMNS = [*WHERE_COLUMNS, "point_id", "metric", "unit", "run_index"]
# What the record says about how it was measured.
CONTEXT_COLUMNS = [
    "status",
    "error",
    "sm_clock_mhz",
    "cpu_clock_mhz",
    "cpu_clock_state",
    "provenance_id",
    "timestamp",
]
# Optional provenance fields a record may carry (written by the harness when known).
PROVENANCE_COLUMNS = ["rdma_provider", "doorbell_target", "topology", "measure_key"]
# The software NIC engine's ceiling for a rate point's WQE shape, measured in the same run (Mmsg/s),
# and that shape: rate records on a softnic backend carry them.
CEILING_COLUMNS = ["engine_ceiling", "engine_ceiling_shape"]
# How a NIC point ran: values measured another way (on the emulated rdma-core or a real one, between
# two ranks or looping back) are never one series.
PATH_KEYS = ["rdma_provider", "doorbell_target", "topology"]
# The record's path proof (its port counters before and after), flattened: the verdict, and what
# it read. A point whose verdict is failed is a failed point (gicomm.records).
PATH_CHECK_COLUMNS = {
    "path_check": "verdict",
    "path_check_device": "device",
    "path_check_expected_bytes": "expected_bytes",
    "path_check_reason": "reason",
}
ID_COLUMNS = IDENTITY_COLUMNS + CONTEXT_COLUMNS
# The same-run floor of a latency (config/floors.yaml, gicomm.doctor.floors): which floor, its p50
# in the same campaign, host and run, and the overhead above it (p50 - floor_ns).
FLOOR_COLUMNS = ["floor", "floor_ns", "overhead_ns"]
STAT_COLUMNS = ["n", "p50", "p90", "p99", "min", "max", "mean", "stddev"]
SAMPLES_COLUMN = "n_samples"
PARAM_PREFIX = "param_"

# A series of the summary: one value per sweep point (plus the param_ columns) and metric.
SERIES_KEYS = [*WHERE_COLUMNS, *PATH_KEYS, "cpu_clock_state", "metric", "unit"]
SUMMARY_STATS = [
    "runs",
    "p50",
    "p50_min",
    "p50_max",
    "p50_ci_lo",
    "p50_ci_hi",
    "p99",
    "p99_min",
    "p99_max",
    "n_samples_total",
    "sm_clock_mhz",
    "sm_clock_min_mhz",
    "sm_clock_max_mhz",
    "cpu_clock_mhz",
    *CEILING_COLUMNS,
    "overhead_ns",
    "path_check",
    # the worst host load over the point's runs (gicomm.hostload)
    *HOST_LOAD_SUMMARY,
]
RATIO_COLUMNS = ["numerator", "denominator", "runs", "ratio", "ratio_min", "ratio_max"]


def param_column(name: str) -> str:
    return PARAM_PREFIX + name


def param_name(column: str) -> str:
    return column.removeprefix(PARAM_PREFIX)


def param_columns_of(columns: Iterable[str]) -> list[str]:
    """Every param_ column, sorted (observed values included; `param_columns` leaves them out)."""
    return sorted(c for c in columns if c.startswith(PARAM_PREFIX))


# Parameters a driver echoes back with what it observed (worker cores, clock readings, mean chain
# length, the goodput reference): they describe a run, they do not name a sweep point.
OBSERVED_PARAMS = ("mean_chain", "worker_cpus", "cpu_clock_source", "link_ref", "msgs_total")
OBSERVED_PREFIXES = ("cpu_mhz", "observed_")


def is_observed(column: str) -> bool:
    name = param_name(column)
    return name in OBSERVED_PARAMS or name.startswith(OBSERVED_PREFIXES)


def param_columns(df: pd.DataFrame) -> list[str]:
    """The sweep parameters (param_ columns), observed values excluded."""
    return [c for c in param_columns_of(df.columns) if not is_observed(c)]


def observed_columns(df: pd.DataFrame) -> list[str]:
    return [c for c in param_columns_of(df.columns) if is_observed(c)]


def as_text(df: pd.DataFrame) -> pd.DataFrame:
    """Every cell as text ('' for missing, 8 for 8.0): keys that never drop or split a row."""
    return df.apply(lambda col: col.map(key_text))


def key_text(v: object) -> str:
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
