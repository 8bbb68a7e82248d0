"""Export a campaign as one zip: the HTML report with its figures and CSVs, the tidy tables and the
provenance record of every host, under one top-level folder named after the campaign.

The zip stands alone: a page's link to a file outside it (another campaign's report, reached from
the combined page) becomes plain text saying where `make run` renders it, so nothing in the zip
points at a missing file.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

LINK = re.compile(r'<a href="([^"#]*)(#[^"]*)?"([^>]*)>(.*?)</a>', re.S)


def local_target(page: Path, href: str) -> Path | None:
    """The file a relative link of `page` points at (None for external and in-page links)."""
    if not href or re.match(r"^[a-z]+:", href) or href.startswith("/"):
        return None
    return Path(os.path.normpath(page.parent / href))


def self_contained(page: Path, html: str, root: Path) -> str:
    """`html` with each link that leaves `root` replaced by its text and where it lives."""

    def fix(m: re.Match[str]) -> str:
        target = local_target(page, m.group(1))
        if target is None or target.is_relative_to(root):
            return m.group(0)
        where = os.path.relpath(target, root.parents[2]) if len(root.parents) > 2 else m.group(1)
        return f'{m.group(4)} <small class="outside">(not in this export: {where})</small>'

    return LINK.sub(fix, html)


def export_campaign(
    campaign: str, report_dir: Path, tables: list[Path], hardware_files: list[Path], out: Path
) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".zip.tmp")
    root = report_dir.resolve()
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for f in sorted(report_dir.rglob("*")):
            if not f.is_file():
                continue
            name = f"{campaign}/report/{f.relative_to(report_dir)}"
            if f.suffix == ".html":
                info = zipfile.ZipInfo.from_file(f, name)
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, self_contained(f.resolve(), f.read_text(), root))
            else:
                z.write(f, name)
        for t in tables:
            z.write(t, f"{campaign}/{t.parent.name}/{t.name}")
        for hw in hardware_files:
            z.write(hw, f"{campaign}/hosts/{hw.parent.name}/{hw.name}")
    os.chmod(tmp, 0o644)
    tmp.replace(out)
    print(f"exported {campaign} to {out}")
