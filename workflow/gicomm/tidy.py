"""Tidy tables: one row per record, parameters and statistics as columns.

The tidy table of a campaign is results/<campaign>/tidy/records.csv; across campaigns,
results/combined/records.csv. Columns: the record's scalar fields, `param_<name>` per sweep
parameter, and the statistics (n, p50, p90, p99, min, max, mean, stddev).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from gicomm.records import read_records

STAT_COLUMNS = ["n", "p50", "p90", "p99", "min", "max", "mean", "stddev"]
ID_COLUMNS = [
    "campaign",
    "host",
    "platform",
    "experiment",
    "transport",
    "nic_backend",
    "point_id",
    "metric",
    "unit",
    "run_index",
    "status",
    "error",
    "sm_clock_mhz",
    "cpu_clock_mhz",
    "cpu_clock_state",
    "provenance_id",
    "timestamp",
]


def flatten(record: dict[str, Any]) -> dict[str, Any]:
    row = {k: record.get(k) for k in ID_COLUMNS}
    for k, v in record.get("params", {}).items():
        row[f"param_{k}"] = v
    stats = record.get("stats") or {}
    for k in STAT_COLUMNS:
        row[k] = stats.get(k)
    row["n_samples"] = len(record["samples"]) if "samples" in record else None
    return row


def tidy_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    rows = [flatten(r) for r in records]
    if not rows:
        return pd.DataFrame(columns=ID_COLUMNS + STAT_COLUMNS + ["n_samples"])
    df = pd.DataFrame(rows)
    params = sorted(c for c in df.columns if c.startswith("param_"))
    return df[ID_COLUMNS + params + STAT_COLUMNS + ["n_samples"]]


def tidy_from_files(paths: Iterable[str | Path]) -> pd.DataFrame:
    return tidy_frame(read_records(sorted(map(Path, paths))))
