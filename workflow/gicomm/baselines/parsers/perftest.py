"""perftest (linux-rdma/perftest): ib_write_lat and ib_write_bw result tables
(tests/fixtures/baselines/perftest_*.txt): a ``#bytes #iterations <name>[<unit>] ...`` header,
then one row of numbers per size (lat: t_min, t_max, t_typical, t_avg, t_stdev, 99% and 99.9%
percentile in usec; bw: BW peak, BW average, MsgRate[Mpps]).

ib_write_lat is a ping-pong and reports half the round trip (metric oneway_ns). Bandwidth columns
in MB/sec, MiB/sec or Gb/sec (--report_gbits) become GB/s.
"""

from __future__ import annotations

import re

from gicomm.baselines.parsers import ParseError, Row, Scalar

_COLUMN = re.compile(r"#bytes|#iterations|[A-Za-z0-9_.%]+(?: [A-Za-z]+)*\[[^\]]+\]")
_LAT_STATS = {
    "t_min": "min",
    "t_max": "max",
    "t_typical": "typical",
    "t_avg": "avg",
    "t_stdev": "stdev",
    "99% percentile": "p99",
    "99.9% percentile": "p99.9",
}
_BW_TO_GBS = {"mb/sec": 1e-3, "mib/sec": 1.048576e-3, "gb/sec": 0.125, "gbit/sec": 0.125}


def _column(rows: list[Row], name: str, value: float, p: dict[str, Scalar]) -> None:
    label, _, unit = name.partition("[")
    unit = unit.rstrip("]").lower()
    label = label.strip()
    if label in _LAT_STATS and unit == "usec":
        rows.append(Row("oneway_ns", "ns", value * 1e3, _LAT_STATS[label], p))
    elif label.startswith("BW") and unit in _BW_TO_GBS:
        stat = "peak" if "peak" in label else "avg"
        rows.append(Row("goodput", "GB/s", value * _BW_TO_GBS[unit], stat, p))
    elif label == "MsgRate" and unit == "mpps":
        rows.append(Row("msg_rate", "Mmsg/s", value, "avg", p))
    else:
        raise ParseError(f"unknown perftest column {name!r}")


def parse(text: str) -> list[Row]:
    rows: list[Row] = []
    columns: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#bytes"):
            columns = _COLUMN.findall(s)
            continue
        fields = s.split()
        if not columns or len(fields) != len(columns) or not fields[0].isdigit():
            continue
        try:
            values = [float(f) for f in fields]
        except ValueError:
            continue
        p: dict[str, Scalar] = {"size": int(values[0]), "iterations": int(values[1])}
        for name, v in zip(columns[2:], values[2:], strict=True):
            _column(rows, name, v, p)
    if not rows:
        raise ParseError("no perftest result row ('#bytes ...' header then numbers) found")
    return rows
