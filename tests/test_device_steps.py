"""tools/device-steps.sh, the bounded and logged step every device script sources: the expected
exit code, the timeout (the signal to the step's whole process group, then KILL), the total bound
with its reserve, the summary and steps.tsv lines, and the caller's step_done hook."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import REPO

STEPS = REPO / "tools" / "device-steps.sh"


def run(tmp_path: Path, body: str, total_s: int = 60) -> tuple[str, str, str]:
    """Runs `body` after sourcing the steps with LOGS, STEPS and SUMMARY under tmp_path; returns
    (stdout, summary.txt, steps.tsv)."""
    script = f"""set -uo pipefail
TOTAL_S={total_s} START=$(date +%s) LOGS={tmp_path} STEPS={tmp_path}/steps.tsv
SUMMARY={tmp_path}/summary.txt
source {STEPS}
done_steps=""
step_done() {{ done_steps="$done_steps $1:$2"; }}
{body}
echo "hook:$done_steps"
"""
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    read = lambda name: (tmp_path / name).read_text() if (tmp_path / name).exists() else ""  # noqa: E731
    return out.stdout, read("summary.txt"), read("steps.tsv")


def test_expected_exit_codes_pass_and_others_fail(tmp_path: Path):
    stdout, summary, steps = run(
        tmp_path,
        'step ok 10 true; echo "rc=$?"\n'
        'step probe 10 --expect 3 sh -c "echo probe-output; exit 3"; echo "rc=$?"\n'
        "step wrong 10 --expect 3 true\n"
        "step failed 10 false\n",
    )
    assert "PASS ok: exit 0 (expected 0)" in summary
    assert "PASS probe: exit 3 (expected 3)" in summary
    assert "FAIL wrong: exit 0 (expected 3)" in summary
    assert "FAIL failed: exit 1 (expected 0)" in summary
    assert "rc=0" in stdout and "rc=3" in stdout  # the command's own exit code comes back
    assert (tmp_path / "probe.log").read_text() == "probe-output\n"
    assert [line.split("\t")[:2] for line in steps.splitlines()] == [
        ["ok", "0"], ["probe", "3"], ["wrong", "0"], ["failed", "1"],
    ]  # fmt: skip
    assert "hook: ok:PASS probe:PASS wrong:FAIL failed:FAIL" in stdout


def test_a_step_out_of_time_gets_the_signal_in_its_group_then_kill(tmp_path: Path):
    # The step's child traps USR1 (as the emulation dumps its state) and keeps running: it must
    # see the signal, then be killed; a step that was expected to exit 0 by itself is a FAIL.
    marker = tmp_path / "usr1"
    body = (
        "STEP_SIGNAL=USR1 STEP_KILL_AFTER=1\n"
        f'step slow 2 bash -c \'bash -c "trap \\"touch {marker}\\" USR1; '
        "while :; do sleep 0.1; done\"'\n"
    )
    stdout, summary, _ = run(tmp_path, body)
    assert marker.exists(), "the signal reaches the step's grandchild (its process group)"
    assert "FAIL slow: exit 137 (expected 0), timed out after 2 s" in summary
    assert "hook: slow:FAIL" in stdout


def test_the_total_bound_and_its_reserve_skip_later_steps(tmp_path: Path):
    stdout, summary, steps = run(
        tmp_path, 'STEP_RESERVE_S=45\nstep late 30 true; echo "rc=$?"\n', total_s=50
    )
    assert "SKIP late: deadline reached (total bound 50 s)" in summary
    assert "rc=124" in stdout and "hook: late:SKIP" in stdout
    assert steps.startswith("late\tskipped")
    # Without a SUMMARY the line goes to stdout only (the softnic and ceiling scripts).
    out = subprocess.run(
        ["bash", "-c", f"TOTAL_S=60 START=$(date +%s) LOGS={tmp_path}; source {STEPS}; step t 5 true"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout == "== PASS t: exit 0 (expected 0) in 0 s\n"
