"""The records of one batch while it is measured (its partial file), and their history.

A batch's measurement writes each point's outcome (its records, stamped with the point's measure
key) to the partial file as soon as the point ends, so a killed job keeps what it finished. When the
job publishes its output, the partial file moves to the batch's history folder: the next run of the
job (Snakemake starts one when the driver, the parameters or the timeouts changed, or when forced)
starts a new measurement, and the old records stay as history, never mixed into the new output.

A job that finds a partial file resumes that unfinished measurement: it keeps the points measured
`ok` under their current measure key and measures the rest again (failed and skipped ones
included: their cause may be gone). Everything it does not keep goes to the history folder:
records of other keys or statuses as JSONL, and lines that are not valid records (each reported
with file:line) as text.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gicomm.errors import RecordError
from gicomm.fsutil import write_atomic
from gicomm.labels import EMULATED_PROVIDER
from gicomm.records import Line, append_records, record_key, scan_records, to_lines


def log(msg: str) -> None:
    import sys

    print(f"[gicomm] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Expect:
    """What every record of the batch must be: its campaign, host, experiment and run, one of
    its points, under that point's measure key."""

    campaign: str
    host: str
    experiment: str
    run_index: int
    keys: dict[str, str]  # point_id -> measure key
    # points whose driver ran over the emulated rdma-core (gicomm-emu-run put it first)
    emulated: frozenset[str] = frozenset()

    def foreign(self, r: dict[str, Any]) -> str | None:
        for field, want in (
            ("campaign", self.campaign),
            ("host", self.host),
            ("experiment", self.experiment),
            ("run_index", self.run_index),
        ):
            if r.get(field) != want:
                return f"a record of {field} {r.get(field)!r}, not {want!r}"
        if r.get("point_id") not in self.keys:
            return f"point {r.get('point_id')!r} is not a point of this batch"
        return None


def on_emulation(r: dict[str, Any]) -> dict[str, Any]:
    """A record of a point whose driver ran over the emulated rdma-core: it says so, whatever its
    writer knew (a driver that does not note its provider would pass for a real NIC's); a record
    that names another provider contradicts how it ran and is a failed point."""
    provider = r.get("rdma_provider")
    if provider is None:
        return {**r, "rdma_provider": EMULATED_PROVIDER}
    if provider != EMULATED_PROVIDER and r.get("status") == "ok":
        why = (
            f"the driver ran over the emulated rdma-core (gicomm-emu-run), but its record says "
            f"rdma_provider {provider!r}"
        )
        return {**r, "status": "failed", "error": why}
    return r


def stamp() -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return f"{now}-{os.getpid()}"


class Ledger:
    def __init__(self, partial: Path, history: Path, expect: Expect) -> None:
        self.path = partial
        self.history = history
        self.expect = expect
        self._measured: set[str] = set()
        self.rejected: list[str] = []  # file:line: why, of every line not taken

    # ---- the history folder -------------------------------------------------------------------
    def _to_history(self, records: list[dict[str, Any]], bad: list[Line], why: str) -> None:
        if not records and not bad:
            return
        self.history.mkdir(parents=True, exist_ok=True)
        name = stamp()
        if records:
            write_atomic(self.history / f"{name}.{why}.jsonl", to_lines(records))
        if bad:
            text = "".join(
                f"# {line.error}\n{line.raw.decode('utf-8', errors='replace')}\n" for line in bad
            )
            write_atomic(self.history / f"{name}.rejected.txt", text)

    # ---- resuming -------------------------------------------------------------------------------
    def resume(self, scratch: Path, scratch_points: Path) -> None:
        """Take over an unfinished measurement: what a killed driver left (when the points file
        it was given says under which keys), then keep the `ok` outcomes of current keys."""
        if scratch.exists():
            keys = read_point_keys(scratch_points)
            self.harvest(scratch, keys, attribute_failures=False)
        if not self.path.exists():
            return
        kept, superseded, bad = self._split(scan_records(self.path))
        for line in bad:
            log(f"{line.error}; its point is measured again")
            self.rejected.append(str(line.error))
        write_atomic(self.path, to_lines(kept))
        self._to_history(superseded, bad, "superseded")
        self._measured = {r["point_id"] for r in kept}
        if kept or superseded:
            log(
                f"resuming {self.path}: kept {len(self._measured)} point(s) measured ok under "
                f"their current measure key; {len(superseded)} record(s) of earlier outcomes "
                f"moved to {self.history}"
            )

    def _split(
        self, lines: Iterable[Line]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Line]]:
        by_point: dict[str, list[dict[str, Any]]] = {}
        superseded: list[dict[str, Any]] = []
        bad: list[Line] = []
        for line in lines:
            if line.record is None:
                bad.append(line)
                continue
            r = line.record
            why = self.expect.foreign(r)
            if why:
                err = RecordError(f"{line.where}: {why}")
                bad.append(Line(line.path, line.lineno, None, err, line.raw))
                continue
            by_point.setdefault(r["point_id"], []).append(r)
        kept: list[dict[str, Any]] = []
        for pid, records in by_point.items():
            current = [r for r in records if r.get("measure_key") == self.expect.keys[pid]]
            keep = bool(current) and all(r["status"] == "ok" for r in current)
            chosen = _unique(current) if keep else []
            kept += chosen
            superseded += [r for r in records if not any(r is c for c in chosen)]
        return kept, superseded, bad

    # ---- this measurement ------------------------------------------------------------------------
    def measured(self) -> set[str]:
        """Points with an outcome in this measurement."""
        return set(self._measured)

    def add(self, point_id: str, records: list[dict[str, Any]]) -> None:
        """One point's outcome, stamped with its measure key, appended in one write."""
        if point_id in self._measured:
            raise RecordError(f"{self.path}: point {point_id} already has an outcome")
        key = self.expect.keys[point_id]
        if point_id in self.expect.emulated:
            records = [on_emulation(r) for r in records]
        append_records(self.path, [{**r, "measure_key": key} for r in records])
        self._measured.add(point_id)

    def harvest(
        self, scratch: Path, keys: dict[str, str], attribute_failures: bool = True
    ) -> dict[str, str]:
        """Move what a driver wrote to `scratch` into the ledger, point by point; a point whose
        key in `keys` (what the driver was given) is not its current key is dropped. Returns the
        points that wrote an invalid line, with the reason (their outcome is a failure)."""
        failures: dict[str, str] = {}
        if not scratch.exists():
            return failures
        outcomes: dict[str, list[dict[str, Any]]] = {}
        dropped: list[dict[str, Any]] = []
        bad: list[Line] = []
        for line in scan_records(scratch):
            pid = line.record.get("point_id") if line.record else _point_id_of(line.raw)
            if line.record is None or (why := self.expect.foreign(line.record)):
                err = line.error or RecordError(f"{line.where}: {why}")
                log(f"driver output rejected: {err}")
                self.rejected.append(str(err))
                bad.append(Line(line.path, line.lineno, None, err, line.raw))
                if attribute_failures and pid in self.expect.keys and pid not in self._measured:
                    failures.setdefault(pid, f"the driver wrote an invalid record: {err}")
                continue
            r = line.record
            if pid in self._measured or keys.get(pid) != self.expect.keys.get(pid):
                dropped.append(r)
                continue
            outcomes.setdefault(pid, []).append(r)
        for pid, records in outcomes.items():
            if pid in failures:
                dropped += records
                continue
            self.add(pid, _unique(records))
        self._to_history(dropped, bad, "dropped")
        scratch.unlink()
        return failures

    # ---- publishing ------------------------------------------------------------------------------
    def publish(self, output: Path, order: list[str]) -> int:
        """Write the measurement's records to `output` (point order of the batch), after checking
        that every point has an outcome and no record is there twice; then move the partial file
        to the history folder. Returns the number of records."""
        records = list(scan_records(self.path)) if self.path.exists() else []
        by_point: dict[str, list[dict[str, Any]]] = {}
        seen: set[tuple[Any, ...]] = set()
        for line in records:
            if line.error is not None:
                raise line.error
            assert line.record is not None
            r = line.record
            why = self.expect.foreign(r)
            if why:
                raise RecordError(f"{line.where}: {why}")
            key = record_key(r)
            if key in seen:
                raise RecordError(f"{line.where}: a record of point {r['point_id']} twice")
            seen.add(key)
            by_point.setdefault(r["point_id"], []).append(r)
        missing = [p for p in order if p not in by_point]
        if missing:
            raise RecordError(f"{self.path}: no outcome for point(s) {', '.join(missing)}")
        ordered = [r for p in order for r in by_point[p]]
        write_atomic(output, to_lines(ordered))
        self.history.mkdir(parents=True, exist_ok=True)
        os.replace(self.path, self.history / f"{stamp()}.published.jsonl")
        return len(ordered)


def _unique(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records with distinct keys (a point's outcome appended twice counts once)."""
    out, seen = [], set()
    for r in records:
        k = record_key(r)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


_POINT_ID = re.compile(rb'"point_id"\s*:\s*"([^"\\]+)"')


def _point_id_of(raw: bytes) -> str | None:
    """The point id a line that is not a valid record names, if any (to blame its point)."""
    m = _POINT_ID.search(raw)
    return m.group(1).decode("utf-8", errors="replace") if m else None


def read_point_keys(points_file: Path) -> dict[str, str]:
    """point_id -> measure_key of a points file the runner wrote (empty if there is none)."""
    keys: dict[str, str] = {}
    if not points_file.exists():
        return keys
    for raw in points_file.read_bytes().splitlines():
        try:
            obj = json.loads(raw)
            keys[str(obj["point_id"])] = str(obj["measure_key"])
        except (ValueError, KeyError, TypeError):
            continue
    return keys
