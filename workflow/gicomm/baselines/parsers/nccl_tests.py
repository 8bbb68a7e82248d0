"""nccl-tests (src/common.cu): the result table of every *_perf binary
(tests/fixtures/baselines/nccl_tests_*.txt): a ``#  size  count  type  redop  root  time  algbw
busbw  #wrong`` header (out-of-place, then in-place), then one row per size, times in us.

Lines may carry an MPI prefix (``[1,0]<stdout>:``) and NCCL INFO lines may sit between the rows.
`#wrong` is ``N/A`` when validation is off. A row whose columns do not parse (a test failure
message) is skipped and reported by the caller through the missing size.
"""

from __future__ import annotations

import re

from gicomm.baselines.parsers import ParseError, Row, us_to_ns

_PREFIX = re.compile(r"^\[\d+,\d+\]<std(out|err)>:")
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_ROW = re.compile(
    rf"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>\w+)\s+(?P<redop>\w+)\s+(?P<root>-?\d+)"
    rf"\s+(?P<t1>{_NUM})\s+(?P<a1>{_NUM})\s+(?P<b1>{_NUM})\s+(?P<w1>\d+|N/A)"
    rf"(?:\s+(?P<t2>{_NUM})\s+(?P<a2>{_NUM})\s+(?P<b2>{_NUM})\s+(?P<w2>\d+|N/A))?\s*$"
)


def parse(text: str) -> list[Row]:
    rows: list[Row] = []
    header = False
    for line in text.splitlines():
        line = _PREFIX.sub("", line)
        if re.match(r"^#\s+size\s+count\s+type", line):
            header = True
            continue
        if not header:
            continue
        m = _ROW.match(line)
        if not m:
            continue
        base = {
            "size": int(m["size"]),
            "count": int(m["count"]),
            "dtype": m["type"],
            "redop": m["redop"],
        }
        for place, t, a, b, w in (
            ("out-of-place", "t1", "a1", "b1", "w1"),
            ("in-place", "t2", "a2", "b2", "w2"),
        ):
            if m[t] is None:
                continue
            p = {**base, "placement": place}
            if m[w] not in ("0", "N/A"):
                p["wrong"] = int(m[w])
            rows.append(Row("time_ns", "ns", us_to_ns(float(m[t])), "avg", p))
            rows.append(Row("algbw", "GB/s", float(m[a]), "avg", p))
            rows.append(Row("busbw", "GB/s", float(m[b]), "avg", p))
    if not rows:
        raise ParseError("no nccl-tests result rows found (no '#  size  count  type' header?)")
    return rows
