"""UCCL-EP (ep/bench/test_low_latency.py): a DeepEP-compatible test that prints DeepEP's result
lines (see deepep.py), with UCCL's own log lines in between (``[rank 0] num_dispatch_comm_bytes
...``, proxy start-up), which are ignored."""

from __future__ import annotations

from gicomm.baselines.parsers import Row
from gicomm.baselines.parsers.deepep import parse_low_latency


def parse(text: str) -> list[Row]:
    return parse_low_latency(text, "UCCL-EP")
