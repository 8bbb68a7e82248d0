"""The reliability soak (benchmarks/soak.py, docs/soak.md) end to end, shortened to 3 s a target:
the campaign layout, records that validate, and zero lost / duplicated / reordered operations
with producers actually killed and restarted. The 10-minute soak itself is a benchmark, not a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, current_build_with

from gicomm.records import iter_records

DRIVER = "gicomm-bench-soak"


@pytest.fixture(scope="module")
def soak_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return current_build_with(tmp_path_factory, DRIVER)


def test_soak_script_short_run(tmp_path: Path, soak_build: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable, str(REPO / "benchmarks" / "soak.py"), "--duration", "3",
            "--host", "testhost", "--date", "2026-01-01", "--out-root", str(tmp_path),
            "--build-dir", str(soak_build),
        ],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    campaign = tmp_path / "soak-testhost-2026-01-01"
    hw = json.loads((campaign / "hosts" / "testhost" / "hardware.json").read_text())
    records = list(iter_records(campaign / "raw" / "soak" / "testhost" / "run0.jsonl"))
    by = {(r["params"]["target"], r["metric"]): r for r in records}
    for target in ("engine", "rings"):
        for metric in ("ops_total", "lost", "duplicated", "reordered", "kills", "msg_rate"):
            rec = by[(target, metric)]
            assert rec["status"] == "ok", rec.get("error")
            assert rec["experiment"] == "soak" and rec["provenance_id"] == hw["provenance_id"]
        assert by[(target, "lost")]["stats"]["p50"] == 0
        assert by[(target, "duplicated")]["stats"]["p50"] == 0
        assert by[(target, "reordered")]["stats"]["p50"] == 0
        assert by[(target, "ops_total")]["stats"]["p50"] > 0
        assert by[(target, "kills")]["stats"]["p50"] >= 1
        assert by[(target, "restarts")]["stats"]["p50"] == by[(target, "kills")]["stats"]["p50"]
        assert by[(target, "msg_rate")]["samples"], "one rate sample per window"
    assert "engine" in proc.stdout and "rings" in proc.stdout


def test_soak_driver_catches_injected_faults(tmp_path: Path, soak_build: Path) -> None:
    """The verifier is not vacuous: an op recorded but never published is lost, a sequence number
    published twice is duplicated, and the point is failed with the reason."""
    driver = soak_build / "bin" / DRIVER
    for inject, metric in (("lose", "lost"), ("duplicate", "duplicated")):
        out = tmp_path / f"{inject}.jsonl"
        proc = subprocess.run(
            [
                str(driver), "--experiment", "soak", "--out", str(out), "--campaign", "t",
                "--host", "t", "--platform", "local", "--provenance-id", "t",
                "--param", "target=engine", "--param", "duration_s=1.5", "--param", "producers=2",
                "--param", "dwell_ns=0", "--param", f"inject={inject}",
            ],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        recs = {r["metric"]: r for r in iter_records(out)}
        assert recs[metric]["status"] == "failed"
        assert recs[metric]["stats"]["p50"] > 0
        assert "soak invariant broken" in recs[metric]["error"]
