from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))


def make_record(**overrides: object) -> dict:
    record = {
        "schema_version": 1,
        "campaign": "c1",
        "host": "h1",
        "platform": "local",
        "experiment": "one_op",
        "transport": "mini-gda",
        "nic_backend": "softnic-cpu",
        "point_id": "p0",
        "params": {"payload": "inline", "size": 8},
        "metric": "issue_ns",
        "unit": "ns",
        "stats": {"n": 100, "p50": 700.0, "p99": 900.0, "min": 650.0, "max": 1000.0},
        "sm_clock_mhz": 1980.0,
        "run_index": 0,
        "provenance_id": "h1-abc",
        "status": "ok",
    }
    record.update(overrides)
    return record


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A copy of the tracked working tree (what a fresh clone has), for pipeline runs."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    dst = tmp_path / "repo"
    for f in files:
        src = REPO / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    return dst
