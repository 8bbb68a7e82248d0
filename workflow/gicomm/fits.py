"""Model fits used by the figures and the claim checks.

- Clock fit: T(f) = C/f + B by least squares on 1/f (C in SM cycles, B in ns), with R^2 and the
  clock-sensitive share of T at the highest clock measured.
- Plateau plus power law for connection scaling: rate(n) = P for n <= n0 and P * (n/n0)^-a above,
  fitted in log space by trying every measured n as the onset n0.
- Linear slope (e.g. issue time per extra 16 B of inline payload), and the first x at which a curve
  reaches a level (e.g. 90% of link goodput).

Every fit is computed from measured points only and says how many points it used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from gicomm.columns import PATH_KEYS, SERIES_KEYS, param_column, param_columns, param_name

MIN_CLOCKS = 3  # distinct SM clocks needed before a clock fit means anything
# Names a driver may give the locked SM clock it swept (the fit uses the measured clock itself).
CLOCK_PARAMS = (
    "sm_clock_mhz",
    "sm_clock",
    "clock_mhz",
    "clock",
    "lock_mhz",
    "locked_mhz",
    "sm_mhz",
)


@dataclass(frozen=True)
class ClockFit:
    c_cycles: float
    b_ns: float
    r2: float
    points: int
    clocks: int
    f_max_mhz: float
    clock_share_at_max: float  # (C/f_max) / T(f_max)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class PlateauFit:
    plateau: float
    onset: float
    exponent: float
    r2: float
    points: int

    def predict(self, n: float | np.ndarray) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        return np.where(
            n <= self.onset, self.plateau, self.plateau * (n / self.onset) ** -self.exponent
        )

    def loss_at(self, n: float) -> float:
        """Fraction of the plateau rate lost at n connections (0.59 = 59% lost)."""
        return float(1.0 - self.predict(n) / self.plateau)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def r_squared(y: np.ndarray, predicted: np.ndarray) -> float:
    ss_res = float(np.sum((y - predicted) ** 2))
    ss_tot = float(np.sum((y - np.mean(y)) ** 2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else 0.0
    return 1.0 - ss_res / ss_tot


def clock_fit(f_mhz: Sequence[float], t_ns: Sequence[float]) -> ClockFit | None:
    """Least squares of T = a * (1/f) + B. With f in MHz and T in ns, C [cycles] = a / 1000."""
    f = np.asarray(f_mhz, dtype=float)
    t = np.asarray(t_ns, dtype=float)
    keep = np.isfinite(f) & np.isfinite(t) & (f > 0)
    f, t = f[keep], t[keep]
    clocks = int(np.unique(np.round(f / 10.0)).size)
    if clocks < MIN_CLOCKS:
        return None
    design = np.column_stack([1.0 / f, np.ones_like(f)])
    (a, b), *_ = np.linalg.lstsq(design, t, rcond=None)
    predicted = design @ np.array([a, b])
    f_max = float(f.max())
    t_max = a / f_max + b
    return ClockFit(
        c_cycles=float(a / 1000.0),
        b_ns=float(b),
        r2=r_squared(t, predicted),
        points=int(f.size),
        clocks=clocks,
        f_max_mhz=f_max,
        clock_share_at_max=float((a / f_max) / t_max) if t_max else float("nan"),
    )


def plateau_power_fit(n: Sequence[float], rate: Sequence[float]) -> PlateauFit | None:
    """Fit rate(n) = P (n <= n0), P (n/n0)^-a (n > n0); a pure plateau when no drop is seen."""
    x = np.asarray(n, dtype=float)
    y = np.asarray(rate, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    x, y = x[keep], y[keep]
    if np.unique(x).size < 3:
        return None
    order = np.argsort(x)
    x, y = x[order], y[order]
    lx, ly = np.log(x), np.log(y)
    best: tuple[float, float, float, float] | None = None  # sse, n0, logP, a
    for n0 in np.unique(x):
        head, tail = x <= n0, x > n0
        log_p = float(np.mean(ly[head]))
        if tail.any():
            dx = lx[tail] - np.log(n0)
            a = float(-np.sum(dx * (ly[tail] - log_p)) / np.sum(dx * dx))
            a = max(a, 0.0)
        else:
            a = 0.0
        pred = np.where(head, log_p, log_p - a * (lx - np.log(n0)))
        sse = float(np.sum((ly - pred) ** 2))
        if best is None or sse < best[0] - 1e-12:
            best = (sse, float(n0), log_p, a)
    assert best is not None
    _, n0, log_p, a = best
    fit = PlateauFit(plateau=float(np.exp(log_p)), onset=n0, exponent=a, r2=0.0, points=x.size)
    r2 = r_squared(ly, np.log(fit.predict(x)))
    return PlateauFit(fit.plateau, fit.onset, fit.exponent, r2, int(x.size))


def linear_slope(x: Sequence[float], y: Sequence[float]) -> tuple[float, float] | None:
    """Least-squares slope of y on x, and its R^2; None with fewer than two distinct x."""
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    keep = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[keep], ya[keep]
    if np.unique(xa).size < 2:
        return None
    slope, intercept = np.polyfit(xa, ya, 1)
    return float(slope), r_squared(ya, slope * xa + intercept)


def first_reaching(x: Sequence[float], y: Sequence[float], level: float) -> float | None:
    """Smallest x whose y is at least `level` (x sorted ascending); None if never reached."""
    d = pd.DataFrame({"x": x, "y": y}).dropna().sort_values("x")
    hit = d[d["y"] >= level]
    return float(hit["x"].iloc[0]) if not hit.empty else None


def clock_fits(summary: pd.DataFrame) -> pd.DataFrame:
    """Clock fit of every (campaign, host, experiment, transport, backend, metric, other params)
    series of the summary that was measured at three or more SM clocks."""
    cols = [
        c
        for c in SERIES_KEYS
        if c not in ("platform", "cpu_clock_state") and (c not in PATH_KEYS or c in summary)
    ]
    out_cols = [*cols, "series", *ClockFit.__dataclass_fields__]
    if summary.empty:
        return pd.DataFrame(columns=out_cols)
    clock_params = {param_column(n) for n in CLOCK_PARAMS}
    others = [c for c in param_columns(summary) if c not in clock_params]
    d = summary.copy()
    d[others] = d[others].astype(str)
    rows = []
    for key, g in d.groupby(cols + others, dropna=False, sort=True):
        fit = clock_fit(g["sm_clock_mhz"].to_numpy(), g["p50"].to_numpy())
        if fit is None:
            continue
        series = ", ".join(
            f"{param_name(c)}={v}"
            for c, v in zip(others, key[len(cols) :], strict=True)
            if v not in ("nan", "None", "")
        )
        rows.append(
            dict(zip(cols, key[: len(cols)], strict=True)) | {"series": series} | fit.as_dict()
        )
    return pd.DataFrame(rows, columns=out_cols)
