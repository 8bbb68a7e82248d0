"""Export a campaign as one zip: the HTML report with its figures and CSVs, the tidy tables and the
provenance record of every host, under one top-level folder named after the campaign."""

from __future__ import annotations

import zipfile
from pathlib import Path


def export_campaign(
    campaign: str, report_dir: Path, tables: list[Path], hardware_files: list[Path], out: Path
) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for f in sorted(report_dir.rglob("*")):
            if f.is_file():
                z.write(f, f"{campaign}/report/{f.relative_to(report_dir)}")
        for t in tables:
            z.write(t, f"{campaign}/{t.parent.name}/{t.name}")
        for hw in hardware_files:
            z.write(hw, f"{campaign}/hosts/{hw.parent.name}/{hw.name}")
    tmp.replace(out)
    print(f"exported {campaign} to {out}")
