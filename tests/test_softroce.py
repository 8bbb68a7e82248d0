"""tools/softroce: make test's Soft-RoCE step says plainly when it skips and why, and a skip can be
made a failure for a CI that must run it. (The guest run itself is make test's last step:
tools/softroce/ci.sh build/ctest; it is not repeated here.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import REPO

CI = REPO / "tools" / "softroce" / "ci.sh"
RUN = REPO / "tools" / "softroce" / "run.sh"


def ci(build: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GICOMM_SOFTROCE")} | env
    return subprocess.run(
        ["bash", str(CI), str(build)], capture_output=True, text=True, env=full, timeout=60
    )


def test_disabled_skips_saying_so(tmp_path: Path):
    out = ci(tmp_path, GICOMM_SOFTROCE="0")
    assert out.returncode == 0
    assert out.stdout.strip() == "softroce: SKIPPED: disabled by GICOMM_SOFTROCE=0"


def test_a_build_without_rdma_targets_skips_naming_what_is_missing(tmp_path: Path):
    out = ci(tmp_path)
    assert out.returncode == 0
    assert out.stdout.startswith("softroce: SKIPPED: ")
    assert f"{tmp_path}/bin/gicomm-pair-check is missing" in out.stdout
    assert "no rdma-core targets" in out.stdout


def test_required_run_fails_instead_of_skipping(tmp_path: Path):
    out = ci(tmp_path, GICOMM_SOFTROCE="1")
    assert out.returncode == 1
    assert "softroce: FAILED: cannot run (" in out.stderr
    assert "GICOMM_SOFTROCE=1 requires it" in out.stderr


def test_run_needs_a_program():
    out = subprocess.run(["bash", str(RUN)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 125
    assert "usage:" in out.stderr
    out = subprocess.run(["bash", str(RUN), "--bogus"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 125 and "unknown option '--bogus'" in out.stderr
