"""Raw measurement records (JSONL): read and validate every line, write atomically.

A malformed line fails with file:line and what is wrong; nothing is silently dropped. Lines are
strict JSON: a repeated key or a NaN/Infinity (which Python's json would accept) is refused. A torn
last line (a process killed mid-write) is reported as such, so the caller can decide to rerun the
point.

Records of schema_version 1 (the archived campaigns) are read as version 2: version 1 repeated the
point's transport and NIC backend inside `params` (the first drivers spelled the backend
`backend`); version 2 keeps them top-level only. Every reader upgrades here, so nothing downstream
keeps a list of keys to drop.
A record whose path check (`path_check`, the NIC's port counters) failed is read as a
failed point, whatever its status.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gicomm.errors import RecordError
from gicomm.schema import describe, validator

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, SCHEMA_VERSION)
# Point identity that version 1 echoed into params and version 2 keeps top-level only: the
# params key and the top-level field it repeats.
POINT_FIELDS = {"transport": "transport", "nic_backend": "nic_backend", "backend": "nic_backend"}


@dataclass(frozen=True)
class RecordIdentity:
    """What every record of one point of one process run carries: who measured which point.
    The one identity type of the pipeline (record writing, the batch runner's checks, tidy)."""

    campaign: str
    host: str
    platform: str
    experiment: str
    transport: str
    nic_backend: str
    run_index: int
    provenance_id: str
    point_id: str | None = None

    def fields(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def record_key(record: dict[str, Any]) -> tuple[Any, ...]:
    """What a campaign holds once: one metric of one point in one run (parameters included: an
    upstream tool's rows of one point differ in the parameters the parser adds)."""
    return (
        record["campaign"],
        record["host"],
        record["experiment"],
        record["transport"],
        record["nic_backend"],
        record.get("point_id"),
        record["run_index"],
        record["metric"],
        json.dumps(record["params"], sort_keys=True),
    )


def upgrade(record: dict[str, Any], where: str) -> dict[str, Any]:
    """A version-1 record as version 2: transport and nic_backend leave params (they equal the
    top-level fields in every version-1 record; a record where they differ is refused)."""
    if record.get("schema_version") != 1 or not isinstance(record.get("params"), dict):
        return record
    params = dict(record["params"])
    for k, field in POINT_FIELDS.items():
        if k in params and field in record and str(params[k]) != str(record[field]):
            raise RecordError(
                f"{where}: params.{k} {params[k]!r} differs from {field} {record[field]!r}; a "
                "record names one point"
            )
        params.pop(k, None)
    return {**record, "schema_version": SCHEMA_VERSION, "params": params}


def check_record(record: Any, where: str) -> dict[str, Any]:
    """Validate one parsed record (upgraded to the current version); raise RecordError naming
    `where` (file:line)."""
    if not isinstance(record, dict):
        raise RecordError(f"{where}: expected a JSON object, found {type(record).__name__}")
    version = record.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise RecordError(
            f"{where}: record of schema_version {version!r}; this gicomm reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))} (rewrite or re-measure the file)"
        )
    record = upgrade(record, where)
    errors = sorted(validator("record").iter_errors(record), key=lambda e: list(e.path))
    if errors:
        raise RecordError(f"{where}: invalid record: " + "; ".join(describe(e) for e in errors))
    return failed_path(record)


def failed_path(record: dict[str, Any]) -> dict[str, Any]:
    """A record whose path proof failed is a failed point (never aggregated), with the proof's
    reason, whatever status its writer gave it."""
    check = record.get("path_check")
    if not isinstance(check, dict) or check.get("verdict") != "failed" or record["status"] != "ok":
        return record
    why = check.get("reason") or "the port counters did not show the point's traffic"
    return {**record, "status": "failed", "error": f"path check failed: {why}"}


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears twice in one object")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def parse_line(raw_bytes: bytes, where: str) -> dict[str, Any]:
    """One JSONL line (without its newline) as a validated record; RecordError otherwise."""
    try:
        raw = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"{where}: not UTF-8 text (byte {exc.start}): corrupted") from None
    try:
        obj = json.loads(raw, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{where}: malformed JSON: {exc.msg} at column {exc.colno}") from None
    except ValueError as exc:
        raise RecordError(f"{where}: malformed JSON: {exc}") from None
    except RecursionError:
        raise RecordError(f"{where}: malformed JSON: nested too deeply") from None
    return check_record(obj, where)


@dataclass(frozen=True)
class Line:
    """One non-blank line of a record file: its record, or why it is not one."""

    path: Path
    lineno: int
    record: dict[str, Any] | None
    error: RecordError | None
    raw: bytes

    @property
    def where(self) -> str:
        return f"{self.path}:{self.lineno}"


def scan_records(path: str | Path) -> Iterator[Line]:
    """Every non-blank line of a JSONL file, each parsed and validated on its own: a bad line
    (malformed, invalid, not UTF-8, torn at the end) is yielded with its error and the lines after
    it are still read. For files a caller repairs (the batch runner's partial files)."""
    path = Path(path)
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn = lines.pop() if lines else b""
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            yield Line(path, lineno, parse_line(raw, f"{path}:{lineno}"), None, raw)
        except RecordError as exc:
            yield Line(path, lineno, None, exc, raw)
    if torn:
        lineno = len(lines) + 1
        err = RecordError(
            f"{path}:{lineno}: truncated last line (no newline at end of file: the writer was "
            f"killed mid-record); remove the line or rerun the point"
        )
        yield Line(path, lineno, None, err, torn)


def iter_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield every record of a JSONL file, validated. Blank lines are allowed; nothing else."""
    for line in scan_records(path):
        if line.error is not None:
            raise line.error
        assert line.record is not None
        yield line.record


def read_records(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in paths:
        out.extend(iter_records(p))
    return out


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_record(
    identity: RecordIdentity,
    *,
    params: dict[str, Any],
    metric: str,
    unit: str,
    status: str,
    **fields: Any,
) -> dict[str, Any]:
    """A record written by Python (skipped points, parsed upstream logs), stamped now; `fields`
    adds the optional ones (stats, error, sm_clock_mhz, measure_key, ...)."""
    return {
        "schema_version": SCHEMA_VERSION,
        **identity.fields(),
        "params": {k: v for k, v in params.items() if k not in POINT_FIELDS},
        "metric": metric,
        "unit": unit,
        "status": status,
        "timestamp": utc_now(),
        **fields,
    }


def to_lines(records: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, sort_keys=True, allow_nan=False) + "\n" for r in records)


def append_records(path: str | Path, records: Iterable[dict[str, Any]]) -> None:
    """Append complete lines with one write and fsync (same contract as the native harness)."""
    lines = to_lines(records)
    if not lines:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, lines.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
