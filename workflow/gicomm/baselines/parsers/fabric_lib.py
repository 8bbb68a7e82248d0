"""fabric-lib (perplexityai/pplx-garden fabric-lib/fabric-debug): the client's benchmark lines
(tests/fixtures/baselines/fabric_debug.txt): a ``Bench <Mode> Write`` section line, then per size
``  bytes: N ... lat: A ± S ms, bw: B ± S Gbps (P%)`` (paged adds ``rate: R ± S Mpps``, A2A adds
``ops: R Mops/s``; Imm prints ``lat: A ± S µs``).

Each value is a mean over the server's repeats with its standard deviation (upstream_stat avg /
stdev). Verification-only lines carry no number and are skipped.
"""

from __future__ import annotations

import re

from gicomm.baselines.parsers import ParseError, Row, Scalar, ms_to_ns, us_to_ns

_N = r"([-+0-9.eE]+)"
_SECTION = re.compile(r"^Bench (?P<name>[\w -]+?) Write\s*$")
_KEYS = re.compile(r"(page_bytes|num_pages|bytes/gpu|bytes|chunk_bytes):\s*(\d+)")
_LAT = re.compile(rf"lat:\s*{_N}\s*±\s*{_N}\s*(ms|µs|us)")
_BW = re.compile(rf"bw:\s*{_N}\s*±\s*{_N}\s*Gbps\s*\(\s*{_N}%\)")
_RATE = re.compile(rf"rate:\s*{_N}\s*±\s*{_N}\s*Mpps")
_OPS = re.compile(rf"ops:\s*{_N}\s*Mops/s")


def parse(text: str) -> list[Row]:
    rows: list[Row] = []
    section = ""
    for line in text.splitlines():
        m = _SECTION.match(line.strip())
        if m:
            section = m["name"].lower().replace(" ", "-")
            continue
        lat = _LAT.search(line)
        if not section or not lat:
            continue
        p: dict[str, Scalar] = {"mode": section}
        for key, value in _KEYS.findall(line):
            p[key.replace("/", "_per_")] = int(value)
        conv = ms_to_ns if lat[3] == "ms" else us_to_ns
        rows.append(Row("time_ns", "ns", conv(float(lat[1])), "avg", p))
        rows.append(Row("time_ns", "ns", conv(float(lat[2])), "stdev", p))
        bw = _BW.search(line)
        if bw:
            rows.append(Row("goodput", "GB/s", float(bw[1]) / 8, "avg", p))
            rows.append(Row("goodput", "GB/s", float(bw[2]) / 8, "stdev", p))
            rows.append(Row("link_utilization", "pct", float(bw[3]), "avg", p))
        rate = _RATE.search(line)
        if rate:
            rows.append(Row("msg_rate", "Mmsg/s", float(rate[1]), "avg", p))
            rows.append(Row("msg_rate", "Mmsg/s", float(rate[2]), "stdev", p))
        ops = _OPS.search(line)
        if ops:
            rows.append(Row("msg_rate", "Mmsg/s", float(ops[1]), "avg", p))
    if not rows:
        raise ParseError("no fabric-debug result line ('Bench ... Write' then 'lat: ...') found")
    return rows
