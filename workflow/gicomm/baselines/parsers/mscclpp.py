"""MSCCL++ multi-process unit tests (test/mp_unit/, GoogleTest under MPI). The perf tests print,
on rank 0, ``<Suite>.<Test>: <value> us/iter`` (std::setprecision(4)) inside the gtest frame::

    [ RUN      ] PortChannelOneToOneTest.PingPongPerf
    PortChannelOneToOneTest.PingPongPerf: 7.363 us/iter
    [       OK ] PortChannelOneToOneTest.PingPongPerf (1234 ms)
    [  SKIPPED ] PortChannelOneToOneTest.PingPongPerfIbHostMode (0 ms)

A ping-pong iteration is one put-with-signal each way plus the waits: the value is a round trip.
Skipped tests are returned with `skipped` so the report can say why they are absent.
"""

from __future__ import annotations

import re

from gicomm.baselines.parsers import ParseError, Row, us_to_ns

_PREFIX = re.compile(r"^\[\d+,\d+\]<std(out|err)>:")
_VALUE = re.compile(
    r"^(?P<test>[A-Za-z_]\w*\.[A-Za-z_]\w*(?:/\d+)?): (?P<v>[-+0-9.eE]+) us/iter\s*$"
)
_SKIP = re.compile(r"^\[\s+SKIPPED\s+\]\s+(?P<test>[A-Za-z_]\w*\.\w+)")


def _metric(test: str) -> str:
    return "rtt_ns" if "PingPong" in test else "time_ns"


def skipped(text: str) -> list[str]:
    """Tests gtest reported as skipped (e.g. the IB variants in a build without IB verbs)."""
    out = []
    for line in text.splitlines():
        m = _SKIP.match(_PREFIX.sub("", line).strip())
        if m and m["test"] not in out:
            out.append(m["test"])
    return out


def parse(text: str) -> list[Row]:
    rows: list[Row] = []
    for line in text.splitlines():
        m = _VALUE.match(_PREFIX.sub("", line).strip())
        if m:
            suite, test = m["test"].split(".", 1)
            rows.append(
                Row(_metric(m["test"]), "ns", us_to_ns(float(m["v"])), "avg",
                    {"suite": suite, "test": test})
            )  # fmt: skip
    if not rows:
        raise ParseError("no MSCCL++ '<Suite>.<Test>: <value> us/iter' line found")
    return rows
