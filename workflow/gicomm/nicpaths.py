"""The report's "NIC paths run here": which NIC code paths ran in a campaign, on what, and whether
their port counters showed the traffic, from the tidy records of its NIC points (NIC backend mlx5
or verbs, library baselines included). A path that ran on the emulated rdma-core shows that the
real mlx5/verbs code ran end to end; its numbers are emulated numbers, listed apart and never
counted as real-NIC values (the claims that need a real NIC stay "not measurable here").
"""

from __future__ import annotations

import pandas as pd

from gicomm.labels import EMULATED, KIND_NOTE, REAL_NIC_BACKENDS, nic_kinds

PATH_COLUMNS = ["experiment", "transport", "nic_backend", "ran on", "rdma_provider", "topology"]
EMULATED_LABEL = "ran on the emulated NIC"
VALUE_COLUMNS = ["experiment", "transport", "metric", "unit", "runs", "p50", "p50_min", "p50_max"]


def nic_rows(d: pd.DataFrame) -> pd.DataFrame:
    """The rows (records or summary rows) of NIC points, with the kind of NIC they ran on."""
    if d.empty or "nic_backend" not in d:
        return d.iloc[0:0].assign(**{"ran on": pd.Series(dtype=object)})
    rows = d[d["nic_backend"].astype(str).isin(REAL_NIC_BACKENDS)].copy()
    rows["ran on"] = nic_kinds(rows)
    for c in ("rdma_provider", "topology"):
        rows[c] = rows[c].fillna("not recorded") if c in rows else "not recorded"
    return rows


def _counter_text(checks: pd.Series) -> str:
    """'12 ok, 1 failed' over the points' path checks, or 'not recorded'."""
    counts = checks.dropna().astype(str).value_counts()
    if counts.empty:
        return "not recorded"
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))


def nic_paths(records: pd.DataFrame) -> pd.DataFrame:
    """One row per NIC path that has records: experiment, transport, backend, what it ran on,
    provider, topology, its points (one per point and run) ok / failed / skipped, and the counter
    check of its points."""
    rows = nic_rows(records)
    cols = [*PATH_COLUMNS, "points ok", "points failed", "points skipped", "counter check"]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    # A point of a run is as good as its worst record (one record per metric).
    order = {"failed": 0, "skipped": 1, "ok": 2}
    rows["_rank"] = rows["status"].map(order).fillna(0)
    check = rows["path_check"] if "path_check" in rows else pd.Series(None, index=rows.index)
    rows["_check"] = check
    per_point = (
        rows.sort_values("_rank")
        .groupby([*PATH_COLUMNS, "point_id", "run_index"], dropna=False, sort=True)
        .agg(status=("status", "first"), check=("_check", "first"))
        .reset_index()
    )
    out = []
    for key, g in per_point.groupby(PATH_COLUMNS, dropna=False, sort=True):
        n = g["status"].value_counts()
        out.append(
            dict(zip(PATH_COLUMNS, key, strict=True))
            | {
                "points ok": int(n.get("ok", 0)),
                "points failed": int(n.get("failed", 0)),
                "points skipped": int(n.get("skipped", 0)),
                "counter check": _counter_text(g["check"]),
            }
        )
    return pd.DataFrame(out, columns=cols)


def emulated_values(summary: pd.DataFrame) -> pd.DataFrame:
    """The values measured on the emulated NIC (summary rows), each labelled so."""
    rows = nic_rows(summary)
    rows = rows[rows["ran on"] == EMULATED]
    cols = [c for c in VALUE_COLUMNS if c in rows] + [
        c for c in rows.columns if c.startswith("param_") and rows[c].notna().any()
    ]
    out = rows[cols].copy()
    out.insert(0, "where", f"{EMULATED_LABEL} ({KIND_NOTE[EMULATED]})")
    return out.rename(columns=lambda c: str(c).removeprefix("param_"))
