"""How measurements are named and shown, in one place: the kind of NIC a record ran on (software
NIC, emulated NIC, real NIC, NVLink) and the units the paper uses (latencies in us, rates in
Mmsg/s).

A record ran on the emulated NIC when its `rdma_provider` is "emulated": the real mlx5/verbs code
against an emulated rdma-core. Such values are never shown or counted as real-NIC values.
"""

from __future__ import annotations

import math

import pandas as pd

SOFTNIC = "softnic"
EMULATED = "emulated NIC"
REAL_NIC = "real NIC"
NVLINK = "NVLink"
NO_NIC = "no NIC"
REAL_NIC_BACKENDS = ("mlx5", "verbs")
EMULATED_PROVIDER = "emulated"  # a record's rdma_provider when the emulated rdma-core answered
KIND_NOTE = {
    SOFTNIC: "software NIC: model numbers, not real-NIC numbers",
    EMULATED: "emulated rdma-core: not real-NIC numbers",
    REAL_NIC: "real NIC",
    NVLINK: "over NVLink, no NIC",
    NO_NIC: "no NIC",
}

# Units as the records write them -> as the paper shows them (scale from the record's unit).
DISPLAY_UNIT: dict[str, tuple[str, float]] = {
    "ns": ("us", 1e-3),
    "pct": ("%", 1.0),
    "count": ("registers", 1.0),
}
TIME_SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
SAME_UNIT = {"%": "pct", "percent": "pct", "registers": "count", "regs": "count", "µs": "us"}


def nic_kind(backend: object, provider: object = None) -> str:
    """softnic | emulated NIC | real NIC | NVLink | no NIC, from a record's backend and provider."""
    b = (
        ""
        if backend is None or (isinstance(backend, float) and math.isnan(backend))
        else str(backend)
    )
    if b.startswith("softnic"):
        return SOFTNIC
    if b in REAL_NIC_BACKENDS:
        return EMULATED if str(provider).strip().lower() == EMULATED_PROVIDER else REAL_NIC
    if b == "nvlink":
        return NVLINK
    return NO_NIC


def nic_kinds(d: pd.DataFrame) -> pd.Series:
    """nic_kind of every row (rdma_provider is optional: absent means no emulation)."""
    provider = d["rdma_provider"] if "rdma_provider" in d else pd.Series(None, index=d.index)
    return pd.Series(
        [nic_kind(b, p) for b, p in zip(d["nic_backend"], provider, strict=True)],
        index=d.index,
        dtype=object,
    )


def backend_text(backend: object, provider: object = None) -> str:
    """'softnic-gpu (software NIC)', 'mlx5 (emulated NIC)', 'mlx5 (real NIC)'."""
    kind = nic_kind(backend, provider)
    name = {SOFTNIC: "software NIC"}.get(kind, kind)
    return f"{backend} ({name})"


def norm_unit(u: object) -> str:
    u = str(u).strip()
    return SAME_UNIT.get(u, u)


def display_unit(unit: object) -> tuple[str, float]:
    """The unit a record's value is shown in, and the factor from the record's unit."""
    return DISPLAY_UNIT.get(str(unit), (str(unit), 1.0))


def convert(value: float, unit: object, target: object) -> float:
    """value in `unit` expressed in `target` (ns/us/ms/s among themselves; pct is %)."""
    u, t = norm_unit(unit), norm_unit(target)
    if u == t:
        return value
    if u in TIME_SCALE and t in TIME_SCALE:
        return value * TIME_SCALE[u] / TIME_SCALE[t]
    raise ValueError(f"unit {unit!r} cannot be expressed in {target!r}")


def convertible(unit: object, target: object) -> bool:
    u, t = norm_unit(unit), norm_unit(target)
    return u == t or (u in TIME_SCALE and t in TIME_SCALE)


def clock_text(clocks: pd.Series) -> str:
    """'1980 MHz', '1964-1980 MHz' or 'n/a' (no GPU in the measurement)."""
    c = pd.to_numeric(clocks, errors="coerce").dropna()
    if c.empty:
        return "SM clock n/a"
    lo, hi = c.min(), c.max()
    return f"{lo:.0f} MHz" if hi - lo < 1 else f"{lo:.0f}-{hi:.0f} MHz"


# ---- the model NIC as a limit ------------------------------------------------------------------
# Rates a software NIC's engine may cap: a point within 2x of the engine's own ceiling for its WQE
# shape (measured in the same run, the record's `engine_ceiling`, WQE/s in Mmsg/s) shows the model
# NIC, not the transport.
RATE_METRICS = ("msg_rate", "bulk_msg_rate", "probe_msg_rate", "goodput_gbps")
BOUND_FACTOR = 2.0
INLINE_ONE_WQEBB = (
    28  # inline bytes that fit one 64 B WQEBB beside the ctrl, raddr and inline header
)
BOUND_TEXT = "model-NIC bound: within 2x of the software NIC engine's ceiling for this WQE shape"


def wqe_rate(metric: str, value: float, size: object) -> float | None:
    """A rate point as WQEs per second (Mmsg/s): goodput in GB/s over the payload size."""
    if metric != "goodput_gbps":
        return value
    try:
        return value * 1e3 / float(size)  # GB/s / B = 1e9/s; in Mmsg/s
    except (TypeError, ValueError, ZeroDivisionError):
        return None


def record_wqe_rate(record: dict) -> float | None:
    """wqe_rate of a raw rate record (its median, its payload size)."""
    return wqe_rate(record["metric"], float(record["stats"]["p50"]), record["params"].get("size"))


def within_bound(rate: float, ceiling: float) -> bool:
    """A rate (WQEs/s, Mmsg/s) within BOUND_FACTOR of its engine ceiling: model-NIC bound."""
    return rate * BOUND_FACTOR >= ceiling


def model_nic_bound(d: pd.DataFrame) -> pd.Series:
    """True where a softnic rate point is within 2x of its engine ceiling, False where it is not,
    None where nothing says (not a softnic rate point, or no ceiling measured with it)."""
    out: list[bool | None] = [None] * len(d)
    if d.empty or "engine_ceiling" not in d:
        return pd.Series(out, index=d.index, dtype=object)
    # Positional: a summary concatenated from several may repeat index labels.
    ceiling = pd.to_numeric(d["engine_ceiling"], errors="coerce").tolist()
    size = d["param_size"].tolist() if "param_size" in d else [None] * len(d)
    kinds, metrics, p50 = nic_kinds(d).tolist(), d["metric"].tolist(), d["p50"].tolist()
    for i in range(len(d)):
        if kinds[i] != SOFTNIC or metrics[i] not in RATE_METRICS or pd.isna(ceiling[i]):
            continue
        rate = wqe_rate(str(metrics[i]), float(p50[i]), size[i])
        if rate is not None:
            out[i] = within_bound(rate, float(ceiling[i]))
    return pd.Series(out, index=d.index, dtype=object)


def unmeasured_ceiling(d: pd.DataFrame) -> bool:
    """Softnic gpu-engine rate points with WQEs of more than one WQEBB and no ceiling measured for
    that shape in their run (campaigns before the ceiling was measured per shape, whose engine
    served multi-WQEBB WQEs one at a time): that serial path may be what they show."""
    if d.empty:
        return False
    gpu_engine = d["nic_backend"].astype(str).str.startswith("softnic-gpu")
    rate = d["metric"].isin(RATE_METRICS) & gpu_engine
    if "engine_ceiling" in d:
        rate &= pd.to_numeric(d["engine_ceiling"], errors="coerce").isna()
    size = pd.to_numeric(d.get("param_size"), errors="coerce") if "param_size" in d else None
    payload = d.get("param_payload")
    if size is None or payload is None:
        return False
    multi = (payload.astype(str) == "inline") & (size > INLINE_ONE_WQEBB)
    return bool((rate & multi).any())
