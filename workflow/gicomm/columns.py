"""The columns of gicomm's tables, named once: the tidy table (one row per record), the summary over
runs, and the same-run ratios. Record writing (gicomm.records), tidy, aggregate, fits, tables,
report and the model read these names from here instead of spelling their own lists."""

from __future__ import annotations

from collections.abc import Iterable

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
ID_COLUMNS = IDENTITY_COLUMNS + CONTEXT_COLUMNS
STAT_COLUMNS = ["n", "p50", "p90", "p99", "min", "max", "mean", "stddev"]
SAMPLES_COLUMN = "n_samples"
PARAM_PREFIX = "param_"

# A series of the summary: one value per sweep point (plus the param_ columns) and metric.
SERIES_KEYS = [*WHERE_COLUMNS, "cpu_clock_state", "metric", "unit"]
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
]
RATIO_COLUMNS = ["numerator", "denominator", "runs", "ratio", "ratio_min", "ratio_max"]


def param_column(name: str) -> str:
    return PARAM_PREFIX + name


def param_name(column: str) -> str:
    return column.removeprefix(PARAM_PREFIX)


def param_columns_of(columns: Iterable[str]) -> list[str]:
    """Every param_ column, sorted (observed values included; gicomm.aggregate tells them apart)."""
    return sorted(c for c in columns if c.startswith(PARAM_PREFIX))
