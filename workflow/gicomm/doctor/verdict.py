"""The verdict table: for each transport and metric of config/floors.yaml, the floor it stands
on, what is expected, what was measured, the overhead above the floor, the verdict, and the
likely cause: only a cause a check found (gicomm.doctor.checks), never a guess. A message rate is
shown as its time per message (ns), beside its floor's (gicomm.doctor.floors), the best point
being the fastest."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from gicomm.columns import param_column
from gicomm.doctor.checks import GPU, LIBRARY, NIC, NVLINK, PROXY, Check
from gicomm.doctor.expected import expected_for
from gicomm.doctor.floors import (
    Expectation,
    FloorTable,
    attach_floors,
    is_rate,
    load_table,
)

PROXY_TRANSPORTS = {
    "mini-proxy",
    "nvshmem-ibrc",
    "nccl-gin-proxy",
    "mscclpp-port",
    "uccl-ep",
    "deepep-v1",
    "fabric-lib",
}
OWN_TRANSPORTS = {"mini-gda", "mini-proxy", "direct-store"}
WITHIN, ABOVE, BELOW = "within range", "above range", "below range"
NOT_MEASURED, NO_EXPECTATION = "not measured", "no expectation"
COLUMNS = [
    "transport",
    "metric",
    "nic_backend",
    "floor",
    "floor_ns",
    "expected_ns",
    "expected_lo_ns",
    "expected_hi_ns",
    "expected_overhead_ns",
    "measured_ns",
    "overhead_ns",
    "runs",
    "verdict",
    "likely_cause",
    "expected_from",
    "measured_from",
]


def path_tags(transport: str, nic_backend: str) -> frozenset[str]:
    """What a cause must touch to explain this transport's number."""
    tags = {GPU}
    if nic_backend in ("nvlink",) or transport in ("direct-store", "nvshmem-p2p", "nccl-lsa"):
        tags.add(NVLINK)
    else:
        tags.add(NIC)
    if transport in PROXY_TRANSPORTS:
        tags.add(PROXY)
    if transport not in OWN_TRANSPORTS:
        tags.add(LIBRARY)
    return frozenset(tags)


def _selected(tidy: pd.DataFrame, e: Expectation) -> pd.DataFrame:
    if tidy.empty:
        return tidy
    rows = tidy[(tidy["transport"] == e.transport) & (tidy["metric"] == e.metric)]
    if e.experiments:
        rows = rows[rows["experiment"].isin(e.experiments)]
    for k, v in e.where.items():
        col = param_column(k)
        if col in rows:  # a parameter the experiment does not sweep is at its default
            rows = rows[rows[col].isna() | (rows[col].astype(str) == str(v))]
    return rows


def _causes(checks: Sequence[Check], tags: frozenset[str]) -> str:
    found = [c for c in checks if c.found and c.affects & tags]
    if not found:
        return "no check found a cause"
    return "; ".join(f"{c.name}: {c.cause}" for c in found)


def _verdict(measured: float, lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return NO_EXPECTATION
    if measured > hi:
        return ABOVE
    if measured < lo:
        return BELOW
    return WITHIN


def verdict_rows(
    tidy: pd.DataFrame, checks: Sequence[Check], table: FloorTable | None = None
) -> pd.DataFrame:
    table = table or load_table()
    if len(tidy) and "overhead_ns" not in tidy:
        tidy = attach_floors(tidy, table)
    rows = []
    for e in table.expected:
        sel = _selected(tidy, e)
        ok = sel[sel["status"] == "ok"] if len(sel) else sel
        if ok.empty:
            why = "; ".join(sorted({str(x) for x in sel.get("error", pd.Series()).dropna()})[:2])
            exp = expected_for(e, None)
            rows.append(
                {
                    "transport": e.transport,
                    "metric": e.metric,
                    "nic_backend": "",
                    "floor": e.floors[0],
                    "expected_ns": exp.value_ns,
                    "expected_lo_ns": exp.lo_ns,
                    "expected_hi_ns": exp.hi_ns,
                    "expected_overhead_ns": exp.overhead_ns,
                    "verdict": NOT_MEASURED,
                    "likely_cause": why or "no record of it in these results",
                    "expected_from": exp.source,
                    "measured_from": "",
                }
            )
            continue
        for backend, g in ok.groupby("nic_backend", dropna=False):
            per_point = g.groupby("point_id").agg(
                p50=("p50", "median"),
                floor_ns=("floor_ns", "median"),
                overhead_ns=("overhead_ns", "median"),
                runs=("run_index", "nunique"),
                floor=("floor", "first"),
                experiment=("experiment", "first"),
            )
            rate = is_rate(e.metric)
            best = per_point.sort_values("p50", ascending=not rate).iloc[0]
            floor_ns = None if pd.isna(best["floor_ns"]) else float(best["floor_ns"])
            exp = expected_for(e, floor_ns)
            measured = float(best["p50"])
            if rate:  # compared as time per message, as its floor is
                measured = 1e3 / measured if measured > 0 else float("nan")
            verdict = _verdict(measured, exp.lo_ns, exp.hi_ns)
            cause = ""
            if verdict in (ABOVE, BELOW):
                cause = _causes(checks, path_tags(e.transport, str(backend)))
            rows.append(
                {
                    "transport": e.transport,
                    "metric": f"{e.metric} (ns per message)" if rate else e.metric,
                    "nic_backend": backend,
                    "floor": best["floor"]
                    if isinstance(best["floor"], str)
                    else f"{e.floors[0]} (not measured in this run)",
                    "floor_ns": floor_ns,
                    "expected_ns": exp.value_ns,
                    "expected_lo_ns": exp.lo_ns,
                    "expected_hi_ns": exp.hi_ns,
                    "expected_overhead_ns": exp.overhead_ns,
                    "measured_ns": measured,
                    "overhead_ns": None
                    if pd.isna(best["overhead_ns"])
                    else float(best["overhead_ns"]),
                    "runs": int(best["runs"]),
                    "verdict": verdict,
                    "likely_cause": cause,
                    "expected_from": exp.source,
                    "measured_from": f"{best['experiment']}, best of {len(per_point)} "
                    "point(s), median over runs",
                }
            )
    out = pd.DataFrame(rows).reindex(columns=COLUMNS)
    return out.replace({np.nan: None})
