"""Tidy tables: one row per record, parameters and statistics as columns.

The tidy table of a campaign is results/<campaign>/tidy/records.csv; across campaigns,
results/combined/records.csv. Columns (gicomm.columns): the record's identity and context fields,
`param_<name>` per sweep parameter, the host's load while the point ran (host_*: gicomm.hostload),
the statistics (n, p50, p90, p99, min, max, mean, stddev), and for each latency config/floors.yaml
names, its same-run floor (floor, floor_ns) and overhead_ns.

Before a table is made, the raw files are checked as a whole: a campaign holds each metric of each
point of each run once, a raw file holds only records of its own campaign, experiment, host and run
(the path says which), no raw file is empty, and a batch file holds every point of its batch. A
violation fails with file:line instead of changing the results silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from gicomm.columns import (
    CEILING_COLUMNS,
    FLOOR_COLUMNS,
    ID_COLUMNS,
    PATH_CHECK_COLUMNS,
    PROVENANCE_COLUMNS,
    SAMPLES_COLUMN,
    STAT_COLUMNS,
    param_column,
    param_columns_of,
)
from gicomm.doctor.floors import attach_floors
from gicomm.errors import RecordError
from gicomm.hostload import HOST_LOAD_COLUMNS
from gicomm.hostload import flatten as host_load_columns
from gicomm.layout import RawFile, raw_file_of
from gicomm.records import record_key, scan_records


def flatten(record: dict[str, Any]) -> dict[str, Any]:
    row = {k: record.get(k) for k in ID_COLUMNS}
    row |= {k: record[k] for k in PROVENANCE_COLUMNS + CEILING_COLUMNS if k in record}
    row |= {k: record[k] for k in ("floor", "floor_ns") if k in record}
    row |= host_load_columns(record)
    check = record.get("path_check")
    if isinstance(check, dict):
        row |= {col: check.get(key) for col, key in PATH_CHECK_COLUMNS.items()}
    for k, v in record.get("params", {}).items():
        row[param_column(k)] = v
    stats = record.get("stats") or {}
    for k in STAT_COLUMNS:
        row[k] = stats.get(k)
    row[SAMPLES_COLUMN] = len(record["samples"]) if "samples" in record else None
    return row


def tidy_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    rows = [flatten(r) for r in records]
    if not rows:
        return pd.DataFrame(columns=ID_COLUMNS + STAT_COLUMNS + [SAMPLES_COLUMN] + FLOOR_COLUMNS)
    df = pd.DataFrame(rows)
    extra = [*PROVENANCE_COLUMNS, *CEILING_COLUMNS, *PATH_CHECK_COLUMNS, *HOST_LOAD_COLUMNS]
    provenance = [c for c in extra if c in df.columns]
    params = param_columns_of(df.columns)
    df = attach_floors(df)
    return df[ID_COLUMNS + provenance + params + STAT_COLUMNS + [SAMPLES_COLUMN] + FLOOR_COLUMNS]


def _foreign(where: str, record: dict[str, Any], f: RawFile) -> str | None:
    """Why a record does not belong in raw file `f`, or None."""
    for field, want in (
        ("campaign", f.campaign),
        ("experiment", f.experiment),
        ("host", f.host),
        ("run_index", f.run_index),
    ):
        if want is not None and record.get(field) != want:
            return (
                f"{where}: a record of {field} {record.get(field)!r} in a raw file of {field} "
                f"{want!r} (a foreign record: another campaign's or run's file was mixed in)"
            )
    if f.points is not None and record.get("point_id") not in f.points:
        return (
            f"{where}: point {record.get('point_id')!r} is not a point of this batch "
            "(a foreign record)"
        )
    return None


def checked_records(files: Iterable[RawFile]) -> list[dict[str, Any]]:
    """Every record of `files`, after the whole-campaign checks of the module docstring."""
    out: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], str] = {}
    for f in files:
        points_seen: set[str] = set()
        n = 0
        for line in scan_records(f.path):
            if line.error is not None:
                raise line.error
            assert line.record is not None
            r = line.record
            why = _foreign(line.where, r, f)
            if why:
                raise RecordError(why)
            key = record_key(r)
            if key in seen:
                raise RecordError(
                    f"{line.where}: duplicate of {seen[key]} (the same metric of point "
                    f"{r.get('point_id')!r} in run {r['run_index']}): a campaign holds each once"
                )
            seen[key] = line.where
            points_seen.add(str(r.get("point_id")))
            out.append(r)
            n += 1
        if n == 0:
            raise RecordError(
                f"{f.path}: holds no record (an emptied raw file would drop a run silently); "
                "delete it and rerun to measure it again"
            )
        missing = [p for p in (f.points or ()) if p not in points_seen]
        if missing:
            raise RecordError(
                f"{f.path}: no record of point(s) {', '.join(missing)} of this batch (the file "
                "was edited or cut short); delete it and rerun to measure it again"
            )
    return out


def tidy_from_files(
    paths: Iterable[str | Path], points: dict[str, list[str]] | None = None
) -> pd.DataFrame:
    """The tidy table of raw files; `points` gives the point ids each batch file must hold."""
    files = [raw_file_of(p, (points or {}).get(str(p))) for p in sorted(map(str, paths))]
    return tidy_frame(checked_records(files))
