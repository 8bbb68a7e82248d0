"""Raw measurement records (JSONL): read and validate every line, write atomically.

A malformed line fails with file:line and what is wrong; nothing is silently dropped. A torn last
line (a process killed mid-write) is reported as such, so the caller can decide to rerun the point.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from gicomm.errors import RecordError
from gicomm.schema import describe, validator

SCHEMA_VERSION = 1


def check_record(record: Any, where: str) -> dict[str, Any]:
    """Validate one parsed record; raise RecordError naming `where` (file:line)."""
    if not isinstance(record, dict):
        raise RecordError(f"{where}: expected a JSON object, found {type(record).__name__}")
    version = record.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RecordError(
            f"{where}: record of schema_version {version!r}; this gicomm reads version "
            f"{SCHEMA_VERSION} only (rewrite or re-measure the file)"
        )
    errors = sorted(validator("record").iter_errors(record), key=lambda e: list(e.path))
    if errors:
        raise RecordError(f"{where}: invalid record: " + "; ".join(describe(e) for e in errors))
    return record


def iter_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield every record of a JSONL file, validated. Blank lines are allowed; nothing else."""
    path = Path(path)
    with open(path, "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        last = data.count(b"\n") + 1
        raise RecordError(
            f"{path}:{last}: truncated last line (no newline at end of file: the writer was "
            f"killed mid-record); remove the line or rerun the point"
        )
    for lineno, raw_bytes in enumerate(data.split(b"\n")[:-1] if data else [], start=1):
        try:
            raw = raw_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordError(
                f"{path}:{lineno}: not UTF-8 text (byte {exc.start}): corrupted"
            ) from None
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise RecordError(
                f"{path}:{lineno}: malformed JSON: {exc.msg} at column {exc.colno}"
            ) from None
        except RecursionError:
            raise RecordError(f"{path}:{lineno}: malformed JSON: nested too deeply") from None
        yield check_record(obj, f"{path}:{lineno}")


def read_records(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in paths:
        out.extend(iter_records(p))
    return out


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_record(
    *,
    campaign: str,
    host: str,
    platform: str,
    experiment: str,
    transport: str,
    nic_backend: str,
    params: dict[str, Any],
    metric: str,
    unit: str,
    run_index: int,
    provenance_id: str,
    status: str,
    **fields: Any,
) -> dict[str, Any]:
    """A schema-v1 record written by Python (skipped points, parsed upstream logs), stamped now;
    `fields` adds the optional ones (stats, error, sm_clock_mhz, point_id, ...)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "campaign": campaign,
        "host": host,
        "platform": platform,
        "experiment": experiment,
        "transport": transport,
        "nic_backend": nic_backend,
        "params": params,
        "metric": metric,
        "unit": unit,
        "run_index": run_index,
        "provenance_id": provenance_id,
        "status": status,
        "timestamp": utc_now(),
        **fields,
    }


def append_records(path: str | Path, records: Iterable[dict[str, Any]]) -> None:
    """Append complete lines with one write and fsync (same contract as the native harness)."""
    lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
    if not lines:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, lines.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
