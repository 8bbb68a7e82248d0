"""DeepEP V1 low-latency test (tests/legacy/test_low_latency.py; tests/test_low_latency.py before
the V2 split). Per rank it prints three kinds of line (tests/fixtures/baselines/deepep_*.txt):
``[rank R] Dispatch + combine bandwidth: X GB/s, avg_t=A us, min_t=B us, max_t=C us``,
``[rank R] Dispatch bandwidth: X GB/s, avg_t=A us | Combine bandwidth: Y GB/s, avg_t=B us`` and
``[rank R] Dispatch send/recv time: A + B us | Combine send/recv time: C + D us``.

The first line times dispatch+combine with CUDA events; the second and third come from the kineto
profiler (per kernel; with return_recv_hook the send and receive halves separately).
"""

from __future__ import annotations

import re

from gicomm.baselines.parsers import ParseError, Row, us_to_ns

_N = r"([-+0-9.eE]+)"
_BOTH = re.compile(
    rf"\[rank (\d+)\] Dispatch \+ combine bandwidth: {_N} GB/s, avg_t={_N} us, "
    rf"min_t={_N} us, max_t={_N} us"
)
_SEP = re.compile(
    rf"\[rank (\d+)\] Dispatch bandwidth: {_N} GB/s, avg_t={_N} us \| "
    rf"Combine bandwidth: {_N} GB/s, avg_t={_N} us"
)
_HOOK = re.compile(
    rf"\[rank (\d+)\] Dispatch send/recv time: {_N} \+ {_N} us \| "
    rf"Combine send/recv time: {_N} \+ {_N} us"
)


def parse_low_latency(text: str, tool: str) -> list[Row]:
    rows: list[Row] = []
    for line in text.splitlines():
        m = _BOTH.search(line)
        if m:
            p = {"rank": int(m[1]), "phase": "dispatch+combine"}
            rows.append(Row("goodput", "GB/s", float(m[2]), "avg", p))
            for stat, v in (("avg", m[3]), ("min", m[4]), ("max", m[5])):
                rows.append(Row("time_ns", "ns", us_to_ns(float(v)), stat, p))
            continue
        m = _SEP.search(line)
        if m:
            for phase, bw, t in (("dispatch", m[2], m[3]), ("combine", m[4], m[5])):
                p = {"rank": int(m[1]), "phase": phase}
                rows.append(Row("goodput", "GB/s", float(bw), "avg", p))
                rows.append(Row("time_ns", "ns", us_to_ns(float(t)), "avg", p))
            continue
        m = _HOOK.search(line)
        if m:
            for phase, send, recv in (("dispatch", m[2], m[3]), ("combine", m[4], m[5])):
                p = {"rank": int(m[1]), "phase": phase}
                rows.append(Row("send_ns", "ns", us_to_ns(float(send)), "avg", p))
                rows.append(Row("recv_ns", "ns", us_to_ns(float(recv)), "avg", p))
    if not rows:
        raise ParseError(f"no {tool} low-latency result lines ('[rank N] Dispatch ...') found")
    return rows


def parse(text: str) -> list[Row]:
    return parse_low_latency(text, "DeepEP")
