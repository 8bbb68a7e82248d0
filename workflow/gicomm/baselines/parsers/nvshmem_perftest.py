"""NVSHMEM perftest (perftest/device/pt-to-pt/*, perftest/common/utils.cu print_table_basic).

Human-readable form, one table per scope (thread, warp, block)::

    #shmem_put_latency
    size(B)     scope     latency (us)
    8           thread    1.234567

Machine-readable form (``NVSHMEM_MACHINE_READABLE_OUTPUT=1``)::

    shmem_put_latency
    &&&& PERF shmem_put_latency___thread___size__8___latency 1.234567 -us

`shmem_put_latency` times a put_nbi + quiet loop with CUDA events and divides by the iterations:
the value is put+completion latency, not one-way latency (metric completion_ns). Bandwidth tables
(``bandwidth (GB/sec)``) become goodput in GB/s.
"""

from __future__ import annotations

import re

from gicomm.baselines.parsers import ParseError, Row

_MR = re.compile(
    r"^&&&& PERF (?P<job>\w+?)___(?P<scope>[\w-]+?)___size__(?P<size>\d+)___(?P<var>\w+) "
    r"(?P<value>[-+0-9.eE]+) (?P<pm>.)(?P<unit>\S+)\s*$"
)
_JOB = re.compile(r"^#\s*(?P<job>\w+)\s*$")
_HEAD = re.compile(r"^size\(B\)\s+scope\s+(?P<var>[A-Za-z_ ]+?)\s*\((?P<unit>[^)]+)\)\s*$")
_ROW = re.compile(r"^(?P<size>\d+)\s+(?P<scope>\S+)\s+(?P<value>[-+0-9.eE]+)\s*$")


def _metric(job: str, var: str, unit: str) -> tuple[str, str, float]:
    """(metric, unit, factor) for a table of `var` in `unit`."""
    u = unit.strip().lower()
    if u == "us":
        if "ping_pong" in job:
            return "rtt_ns", "ns", 1e3
        return "completion_ns", "ns", 1e3
    if u in ("gb/sec", "gb/s"):
        return "goodput", "GB/s", 1.0
    if u in ("mops/sec", "mops/s", "mmsg/s"):
        return "msg_rate", "Mmsg/s", 1.0
    raise ParseError(f"unknown unit {unit!r} for {job} {var}")


def parse(text: str) -> list[Row]:
    rows: list[Row] = []
    job = ""
    table: tuple[str, str, float] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        m = _MR.match(s)
        if m:
            metric, unit, factor = _metric(m["job"], m["var"], m["unit"])
            rows.append(
                Row(metric, unit, float(m["value"]) * factor, "avg",
                    {"test": m["job"], "scope": m["scope"], "size": int(m["size"])})
            )  # fmt: skip
            continue
        m = _JOB.match(s)
        if m:
            job, table = m["job"], None
            continue
        m = _HEAD.match(s)
        if m:
            if not job:
                raise ParseError(f"line {n}: table header before its '#<test>' line")
            table = _metric(job, m["var"], m["unit"])
            continue
        m = _ROW.match(s)
        if m and table:
            metric, unit, factor = table
            rows.append(
                Row(metric, unit, float(m["value"]) * factor, "avg",
                    {"test": job, "scope": m["scope"], "size": int(m["size"])})
            )  # fmt: skip
    if not rows:
        raise ParseError("no NVSHMEM perftest table or '&&&& PERF' line found")
    return rows
