"""The verdict table in the terminal and as a report page (report/templates/doctor.html.j2)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from gicomm.doctor.checks import Check
from gicomm.fsutil import write_atomic

TERMINAL_COLUMNS = [
    ("transport", 14),
    ("metric", 13),
    ("nic_backend", 11),
    ("floor", 24),
    ("floor_ns", 9),
    ("expected_ns", 11),
    ("measured_ns", 11),
    ("overhead_ns", 11),
    ("verdict", 13),
]


def _cell(v: object, width: int) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        text = "-"
    elif isinstance(v, float):
        text = f"{v:.0f}"
    else:
        text = str(v)
    return text[:width].ljust(width)


def terminal_text(verdicts: pd.DataFrame, checks: Sequence[Check]) -> str:
    lines = ["host checks:"]
    for c in checks:
        lines.append(
            f"  {c.name:<18} {c.status:<8} {c.evidence.splitlines()[0] if c.evidence else ''}"[:160]
        )
    lines.append("")
    lines.append(" ".join(name.ljust(w) for name, w in TERMINAL_COLUMNS))
    for r in verdicts.to_dict("records"):
        lines.append(" ".join(_cell(r.get(name), w) for name, w in TERMINAL_COLUMNS))
        if r.get("likely_cause"):
            lines.append(f"    cause: {r['likely_cause']}")
    return "\n".join(lines) + "\n"


# What tells two records of one floor metric apart, as the terminal shows it.
FLOOR_WHERE = ("param_target", "param_variant", "param_pair", "topology", "rdma_provider")


def floors_text(floors: pd.DataFrame) -> str:
    """One line per floor measured now: the median over runs of each run's p50, or why the host
    could not measure it (a skipped record's reason: one GPU, no NIC, ...)."""
    if floors.empty:
        return ""
    lines = ["floors measured now (median over runs of the p50):"]
    where = [c for c in FLOOR_WHERE if c in floors]
    keyed = floors.assign(**{c: floors[c].astype(object).fillna("").astype(str) for c in where})
    for key, g in keyed.groupby(["metric", *where], sort=True):
        metric, *rest = key
        shown = [v for v in rest if v and v != "single-process"]  # say only how a NIC was reached
        label = metric + (f" [{', '.join(shown)}]" if shown else "")
        if "emulated" in rest:  # the emulated rdma-core answered: a path check, not a NIC number
            label += " (emulated rdma-core: not a NIC number)"
        ok = g[g["status"] == "ok"]
        if len(ok):
            unit = str(ok["unit"].iloc[0]) if "unit" in ok else ""
            value = pd.to_numeric(ok["p50"]).median()
            lines.append(f"  {label}: {value:.4g} {unit} ({ok['run_index'].nunique()} run(s))")
        else:
            lines.append(f"  {label}: {g['status'].iloc[0]}: {g['error'].iloc[0]}"[:200])
    return "\n".join(lines) + "\n"


def render_page(
    out_dir: Path,
    campaign: str,
    verdicts: pd.DataFrame,
    floors: pd.DataFrame,
    checks: Sequence[Check],
    records_from: str,
    host: str,
) -> Path:
    """doctor.html and data/doctor_*.csv under `out_dir` (a campaign's report folder)."""
    from gicomm.report import environment, frame_html

    (out_dir / "data").mkdir(parents=True, exist_ok=True)
    verdicts.to_csv(out_dir / "data" / "doctor_verdicts.csv", index=False)
    floors.to_csv(out_dir / "data" / "doctor_floors.csv", index=False)
    page = (
        environment()
        .get_template("doctor.html.j2")
        .render(
            campaign=campaign,
            counts=dict(Counter(verdicts["verdict"])) if len(verdicts) else {},
            verdicts=frame_html(verdicts, "No transport and metric to judge."),
            floors=frame_html(floors, "No floor record (the floors experiment did not run here)."),
            checks=[asdict(c) for c in checks],
            records_from=records_from,
            host=host,
        )
    )
    path = out_dir / "doctor.html"
    write_atomic(path, page)
    return path
