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
