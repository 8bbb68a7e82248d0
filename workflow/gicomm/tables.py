"""The paper's tables, paper first: each paper row, then this campaign's rows in the same shape
(the same columns, in the paper's units), or the reason it has none (report/paper/catalogue.yaml
maps every paper row to the points that measure it). Table 15 is qualitative and has none.

One CSV per table (results/<campaign>/report/tables/<tab>.csv), interleaved: `source` says whose
row it is ("paper (<platform>)" or "this campaign"), `measured on` where ours ran (backend and its
kind: software NIC, emulated NIC, real NIC; the SM clock; the parameters that tell our rows
apart), `runs` how many independent runs the values are medians of, and `note` why a row has no
value or which values a software NIC's engine may cap (model-NIC bound, marked with a dagger).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gicomm.catalogue import TABLES, TableSpec, experiment_names, value_label
from gicomm.columns import param_column, param_columns, param_name
from gicomm.fits import MIN_CLOCKS
from gicomm.labels import backend_text, clock_text, convert, convertible, model_nic_bound
from gicomm.paper import paper_table
from gicomm.select import as_list, describe_selector, match_rows, same
from gicomm.status import why_none

SOURCE, WHERE, RUNS, NOTE = "source", "measured on", "runs", "note"
OURS = "this campaign"
BOUND_MARK = "\u2020"  # dagger: within 2x of the software NIC engine's ceiling for its shape
# The unit of a paper column, from its name (the typed tables put units in column names).
COLUMN_UNITS = (
    ("_us", "us"),
    ("mmsg", "Mmsg/s"),
    ("gbps", "GB/s"),
    ("pct", "%"),
    ("registers", "registers"),
)


def column_unit(name: str) -> str | None:
    low = name.lower()
    return next((u for key, u in COLUMN_UNITS if key in low), None)


def column_title(name: str, terms: dict[str, str] | None = None) -> str:
    """A typed column name as a header, in the paper's words: 'pib_put_completion_us' ->
    'P-IB put+completion [us]'; `terms` say what a word means in the paper ('cold' -> 'cold
    (proxy core at 2.5 GHz)')."""
    unit = column_unit(name)
    text = re.sub(r"_(us|pct|GBps|mmsg_per_s)$", "", name)
    for a, b in (
        ("pib_", "P-IB "),
        ("gb200_", "GB200 "),
        ("put_completion", "put+completion"),
        ("mmsg_per_s", "Mmsg/s"),
        ("send_recv", "send+receive"),
        ("_", " "),
    ):
        text = text.replace(a, b)
    words = [(terms or {}).get(w, w) for w in text.split()]
    text = " ".join(words)
    return f"{text.strip()} [{unit}]" if unit and unit != "registers" else text.strip()


def _fmt(v: float) -> str:
    if v is None or not np.isfinite(v):
        return ""
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def _split_params(frames: list[pd.DataFrame], fixed: set[str]) -> list[str]:
    """Parameters that tell our rows apart: they vary among the points one column matched."""
    cols: list[str] = []
    for f in frames:
        for c in param_columns(f):
            if c in fixed or c in cols:
                continue
            if f[c].nunique(dropna=True) > 1:
                cols.append(c)
    return cols


def _where(rows: pd.DataFrame, split: list[str]) -> str:
    r = rows.iloc[0]
    where = backend_text(r["nic_backend"], r.get("rdma_provider"))
    clock = clock_text(rows["sm_clock_mhz"]) if "sm_clock_mhz" in rows else "SM clock n/a"
    parts = [where, clock]
    for c in split:
        name = param_name(c)
        v = r[c]
        if pd.notna(v):
            v = int(v) if isinstance(v, float) and v.is_integer() else v
            label = value_label(name, v)
            parts.append(label if label != str(v) else f"{name}={v}")
    return ", ".join(parts)


def our_rows(
    summary: pd.DataFrame, records: pd.DataFrame, spec: TableSpec, sel: dict[str, Any]
) -> tuple[list[dict[str, Any]], str]:
    """Our rows for one selector, one per backend (and provider) and distinguishing parameter,
    with a value per paper column it fills; or [] and why there is none."""
    default = experiment_names(spec.experiment)
    per_col: dict[str, pd.DataFrame] = {}
    fixed = {param_column(k) for k in sel.get("params", {})}
    for col, c in spec.columns.items():
        s = {**sel, "params": {**sel.get("params", {}), **c.get("params", {})}}
        s.setdefault("metric", c["metric"])
        if c.get("state"):
            s["state"] = c["state"]
        fixed |= {param_column(k) for k in c.get("params", {})}
        unit = column_unit(col)
        rows = match_rows(summary, s, default) if not summary.empty else summary
        if not rows.empty and unit:
            rows = rows[rows["unit"].map(lambda u, t=unit: convertible(u, t))]
        if not rows.empty:
            per_col[col] = rows
    if not per_col:
        exps = [str(e) for e in as_list(sel.get("experiment", default))]
        transports = [str(t) for t in as_list(sel["transport"])] if "transport" in sel else []
        return [], why_none(records, exps, transports, describe_selector(sel))
    split = _split_params(list(per_col.values()), fixed | {param_column("state")})
    keys = ["nic_backend", *(["rdma_provider"] if "rdma_provider" in summary else []), *split]
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for col, rows in per_col.items():
        c = spec.columns[col]
        rows = rows.assign(bound=model_nic_bound(rows))
        for key, g in rows.groupby(keys, dropna=False, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            row = out.setdefault(
                key, {WHERE: _where(g, split), RUNS: set(), NOTE: set(), "_rows": []}
            )
            stat = c.get("stat", "p50")
            vals = [
                convert(float(v), u, column_unit(col) or u)
                for v, u in zip(g[stat], g["unit"], strict=True)
                if pd.notna(v)
            ]
            if not vals:
                continue
            v = float(np.median(vals))
            if c.get("per_param"):
                v /= float(pd.to_numeric(g[param_column(c["per_param"])]).median())
            text = _fmt(v)
            if (g["bound"] == True).any():  # noqa: E712 (None means: not known)
                text += BOUND_MARK
                row[NOTE].add(
                    f"{BOUND_MARK} model-NIC bound: within 2x of the software NIC "
                    "engine's ceiling for this WQE shape"
                )
            row[col] = text
            row[RUNS] |= {int(r) for r in g["runs"].dropna()}
    rows_out = []
    for row in out.values():
        runs = sorted(row.pop(RUNS))
        row[RUNS] = "-".join(map(str, dict.fromkeys([runs[0], runs[-1]]))) if runs else ""
        row[NOTE] = "; ".join(sorted(row[NOTE]))
        row.pop("_rows")
        rows_out.append(row)
    return rows_out, ""


def fit_rows(
    summary: pd.DataFrame, fits: pd.DataFrame, spec: TableSpec, sel: dict[str, Any]
) -> tuple[list[dict[str, Any]], str]:
    """Table 6's shape for our series: C (cycles), B (us) and R2 of T = C/f + B, or why no fit."""
    points = match_rows(summary, sel, experiment_names(spec.experiment))
    if points.empty:
        return [], "not measured in this campaign"
    out = []
    for (backend, payload), g in points.groupby(
        ["nic_backend", points.get(param_column("payload"), pd.Series("", index=points.index))],
        dropna=False,
    ):
        where = f"{backend_text(backend)}, {clock_text(g['sm_clock_mhz'])}"
        where += f", {payload}" if isinstance(payload, str) and payload else ""
        f = (
            fits[(fits["metric"] == sel["metric"]) & (fits["nic_backend"] == backend)]
            if not fits.empty
            else fits
        )
        clocks = g["sm_clock_mhz"].round(-1).nunique()
        if clocks < MIN_CLOCKS or f.empty:
            out.append(
                {
                    WHERE: where,
                    RUNS: _runs(g),
                    NOTE: f"{clocks} SM clock(s) measured; a fit needs {MIN_CLOCKS} or more "
                    "(the pipeline does not lock clocks)",
                }
            )
            continue
        fit = f.iloc[0]
        out.append(
            {
                WHERE: where,
                RUNS: _runs(g),
                "C_cycles": _fmt(fit["c_cycles"]),
                "B_us": _fmt(fit["b_ns"] / 1000.0),
                "R2": f"{fit['r2']:.4f}",
                NOTE: "",
            }
        )
    return out, ""


def _runs(g: pd.DataFrame) -> str:
    runs = sorted({int(r) for r in g["runs"].dropna()})
    return "-".join(map(str, dict.fromkeys([runs[0], runs[-1]]))) if runs else ""


def paper_first(
    summary: pd.DataFrame, records: pd.DataFrame, fits: pd.DataFrame, spec: TableSpec
) -> pd.DataFrame:
    """The table, paper first: each paper row then ours (or why not), then our extra rows."""
    paper = paper_table(spec.paper_csv)
    platform = spec.platform
    numeric = [c for c in paper.columns if c not in spec.label_columns]
    columns = [SOURCE, *spec.label_columns, WHERE, *numeric, RUNS, NOTE]
    by_row = {_row_key(r["row"]): r for r in spec.rows}
    out: list[dict[str, Any]] = []
    for _, prow in paper.iterrows():
        out.append({SOURCE: f"paper ({platform})", **prow.to_dict(), WHERE: "", RUNS: "", NOTE: ""})
        labels = {c: prow[c] for c in spec.label_columns}
        entry = next((r for k, r in by_row.items() if _matches(prow, r["row"])), None)
        if spec.not_here or entry is None or "not_here" in entry:
            why = spec.not_here or (entry or {}).get("not_here") or "no experiment maps to this row"
            out.append({SOURCE: OURS, **labels, NOTE: f"not measurable here: {why}"})
            continue
        rows, why = _ours(summary, records, fits, spec, entry["select"])
        out += [{SOURCE: OURS, **labels, **r} for r in rows] or [
            {SOURCE: OURS, **labels, NOTE: why}
        ]
    for extra in spec.extra:
        rows, why = _ours(summary, records, fits, spec, extra["select"])
        first = {c: "" for c in spec.label_columns}
        first[spec.label_columns[0]] = f"{extra['label']} (not in the paper's table)"
        out += [{SOURCE: OURS, **first, **r} for r in rows] or [{SOURCE: OURS, **first, NOTE: why}]
    return pd.DataFrame(out, columns=columns).fillna("")


def _ours(
    summary: pd.DataFrame,
    records: pd.DataFrame,
    fits: pd.DataFrame,
    spec: TableSpec,
    sel: dict[str, Any],
) -> tuple[list[dict[str, Any]], str]:
    if spec.kind == "clock_fits":
        return fit_rows(summary, fits, spec, sel)
    return our_rows(summary, records, spec, sel)


def _row_key(row: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in row.items()))


def _matches(prow: pd.Series, row: dict[str, Any]) -> bool:
    return all(k in prow and (str(prow[k]) == str(v) or same(prow[k], v)) for k, v in row.items())


def write_tables(
    summary: pd.DataFrame, records: pd.DataFrame, fits: pd.DataFrame, out_dir: Path
) -> dict[str, pd.DataFrame]:
    """tables/<tab>.csv for every paper table: the paper's rows and this campaign's, interleaved."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = {}
    for tab_id, spec in TABLES.items():
        t = paper_first(summary, records, fits, spec)
        t.to_csv(out_dir / f"{tab_id}.csv", index=False)
        tables[tab_id] = t
    return tables
