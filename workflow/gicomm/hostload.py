"""What else kept the host busy while each point ran, from the record's `host_load` (written by the
native harness around each point: native/bench/harness/host_load.h).

The harness samples /proc/stat and /proc/loadavg when a point starts and when its records are
written, and its own CPU time over the same window; it runs inside the driver because only there
is the point's window known (the Python runner sees one driver call per batch of points).

From that, `others_busy` is the share of the cores the benchmark left free that other work kept
busy: (busy CPUs - the benchmark's own CPUs) / (CPUs - the benchmark's own CPUs). A point is
taken under host load when it exceeds `decide.host_load_warning` of config/claims.yaml (default
0.5: other work held more than half of the free cores). The peer rank of a two-rank point is
another process, so it counts as other work.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

# Tidy columns: the record's host_load fields, flattened.
HOST_LOAD_FIELDS = {
    "host_loadavg_1m": "loadavg_1m",
    "host_cpu_busy": "cpu_busy",
    "host_self_cpus": "self_cpus",
    "host_ncpu": "ncpu",
    "host_load_window_s": "window_s",
}
OTHERS_BUSY = "host_others_busy"
HOST_LOAD_COLUMNS = [*HOST_LOAD_FIELDS, OTHERS_BUSY]
# Over the runs of a point (summary) and of a claim's points (claims table): the worst window.
SUMMARY_COLUMNS = ["host_others_busy_max", "host_loadavg_max"]
DEFAULT_WARNING = 0.5


def flatten(record: dict[str, Any]) -> dict[str, Any]:
    """The tidy columns of one record (none when the record carries no host_load)."""
    load = record.get("host_load")
    if not isinstance(load, dict):
        return {}
    row = {col: load.get(key) for col, key in HOST_LOAD_FIELDS.items()}
    row[OTHERS_BUSY] = others_busy(load.get("cpu_busy"), load.get("self_cpus"), load.get("ncpu"))
    return row


def others_busy(cpu_busy: Any, self_cpus: Any, ncpu: Any) -> float:
    """The share of the cores the benchmark left free that other work kept busy (0..1); nan
    where the busy fraction is unknown or the benchmark held every core."""
    try:
        busy, own, n = float(cpu_busy), float(self_cpus), float(ncpu)
    except (TypeError, ValueError):
        return math.nan
    free = n - own
    if not all(map(math.isfinite, (busy, own, n))) or free < 0.5:
        return math.nan
    return float(min(1.0, max(0.0, (busy * n - own) / free)))


def over_runs(g: pd.DataFrame) -> dict[str, float]:
    """The worst host load over the rows of one point (its runs) or of one claim."""
    return {
        "host_others_busy_max": _max(g, OTHERS_BUSY, "host_others_busy_max"),
        "host_loadavg_max": _max(g, "host_loadavg_1m", "host_loadavg_max"),
    }


def _max(g: pd.DataFrame, *columns: str) -> float:
    for c in columns:
        if c in g:
            v = pd.to_numeric(g[c], errors="coerce")
            if v.notna().any():
                return float(v.max())
    return np.nan


def loaded(busy: Any, threshold: float) -> bool:
    return _finite(busy) and float(busy) > threshold


def load_text(busy: Any, loadavg: Any) -> str:
    """'host: others 62% of free cores, load 3.1' ('' where nothing was recorded)."""
    parts = []
    if _finite(busy):
        parts.append(f"others {100 * float(busy):.0f}% of free cores")
    if _finite(loadavg):
        parts.append(f"load {float(loadavg):.1f}")
    return "host: " + ", ".join(parts) if parts else ""


def warning(busy: Any, loadavg: Any, threshold: float) -> str:
    """The warning a claim carries when its runs were taken under host load ('' otherwise)."""
    if not loaded(busy, threshold):
        return ""
    return (
        f"Taken under host load: other work kept up to {100 * float(busy):.0f}% of the cores the "
        f"benchmark left free busy (above {100 * threshold:.0f}%, config/claims.yaml "
        f"decide.host_load_warning){_load_suffix(loadavg)}; the spread may be the host's, not "
        "the transport's."
    )


def _load_suffix(loadavg: Any) -> str:
    return f", load average up to {float(loadavg):.1f}" if _finite(loadavg) else ""


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False
