"""Parsers for what upstream benchmarks print, one module per tool, all returning `Row`s that
`to_records` turns into gicomm records (workflow/schemas/record.schema.yaml).

Upstream tools mostly print one summary number per line (an average, a minimum, a typical value).
Such a number becomes a record with ``stats.n = 1`` and ``p50`` = that number, and the record's
``params.upstream_stat`` says which statistic the tool printed, so an average is never mistaken for
a median. Times are converted to ns, rates to Mmsg/s, bandwidths to GB/s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gicomm.records import RecordIdentity, new_record

Scalar = str | int | float | bool


@dataclass(frozen=True)
class Row:
    """One number an upstream tool printed."""

    metric: str
    unit: str
    value: float
    upstream_stat: str  # avg | min | max | typical | p99 | p99.9 | stdev | peak | value
    params: dict[str, Scalar] = field(default_factory=dict)


class ParseError(ValueError):
    """The text is not in the format the parser expects (names the line)."""


def us_to_ns(v: float) -> float:
    return v * 1e3


def ms_to_ns(v: float) -> float:
    return v * 1e6


def to_records(
    rows: Iterable[Row],
    who: RecordIdentity,
    *,
    params: dict[str, Scalar] | None = None,
    sm_clock_mhz: float | None = None,
) -> list[dict[str, Any]]:
    """Records for `rows` (one per printed number) of the point or log `who` names."""
    clock = {} if sm_clock_mhz is None else {"sm_clock_mhz": sm_clock_mhz}
    return [
        new_record(
            who,
            params={**(params or {}), **row.params, "upstream_stat": row.upstream_stat},
            metric=row.metric,
            unit=row.unit,
            status="ok",
            stats={"n": 1, "p50": row.value},
            **clock,
        )
        for row in rows
    ]


def _registry() -> dict[str, Callable[[str], list[Row]]]:
    from gicomm.baselines.parsers import (
        deepep,
        fabric_lib,
        mscclpp,
        nccl_tests,
        nvshmem_perftest,
        perftest,
        uccl_ep,
    )

    return {
        "nvshmem-perftest": nvshmem_perftest.parse,
        "nccl-tests": nccl_tests.parse,
        "deepep-low-latency": deepep.parse,
        "uccl-ep-low-latency": uccl_ep.parse,
        "mscclpp-mp-unit": mscclpp.parse,
        "perftest": perftest.parse,
        "fabric-debug": fabric_lib.parse,
    }


def parser_names() -> list[str]:
    return sorted(_registry())


def parse(tool: str, text: str) -> list[Row]:
    """Parse `text` printed by `tool` (one of parser_names())."""
    reg = _registry()
    if tool not in reg:
        raise ParseError(f"no parser for {tool!r}; known: {', '.join(sorted(reg))}")
    return reg[tool](text)
