"""What each transport and metric should reach on this host: the calibrated model's idle
single-op prediction (workflow/gicomm/model, calibrated from the paper's numbers only, so it says
what an H200 + ConnectX-7 reaches, never what this campaign measured), or the overhead
config/floors.yaml states where no model covers the path; with the range and where it comes from."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from gicomm.doctor.floors import Expectation


@dataclass(frozen=True)
class Expected:
    value_ns: float | None  # the expected latency (None: only an overhead is expected)
    overhead_ns: float | None  # the expected overhead above the floor (None: unknown here)
    lo_ns: float | None  # the accepted range of the measured latency
    hi_ns: float | None
    source: str


@cache
def model_single_op(path: str) -> tuple[float, float, float]:
    """(issue, completion, rtt) in ns of one thread's idle op on `path`, P-IB calibration."""
    from gicomm.model import scenarios
    from gicomm.model.calibrate import from_paper

    one = scenarios.single_op(from_paper("P-IB"), path)
    return one.issue_us * 1e3, one.completion_us * 1e3, one.rtt_us * 1e3


def expected_for(e: Expectation, floor_ns: float | None) -> Expected:
    """The expectation of `e` above a floor measured at `floor_ns` (None: not measured)."""
    rel = e.range_rel
    if e.model_path and e.model_value:
        try:
            issue, completion, rtt = model_single_op(e.model_path)
        except ImportError as err:  # a machine without the model's packages (numba)
            return Expected(None, None, None, None, f"model unavailable here: {err}")
        v = {"issue": issue, "completion": completion, "rtt": rtt}[e.model_value]
        lo, hi = (v * (1 - rel), v * (1 + rel)) if rel is not None else (None, None)
        over = v - floor_ns if floor_ns is not None else None
        src = f"model {e.model_path} {e.model_value} (paper P-IB calibration)"
        if rel is not None:
            src += f"; range +-{rel:.0%}: {e.range_source}"
        return Expected(v, over, lo, hi, src)
    if e.overhead_ns is not None:
        if floor_ns is None:
            return Expected(None, float(e.overhead_ns), None, None, e.range_source)
        v = floor_ns + float(e.overhead_ns)
        r = rel or 0.0
        return Expected(v, float(e.overhead_ns), v * (1 - r), v * (1 + r), e.range_source)
    return Expected(
        None, None, None, None, "no model of this path: measured and overhead shown only"
    )
