"""native/tests/softnic/goals_table.py, which a device call prints the gpu engine's goals with:
goal 2 is evaluated against the serial engine only where it ran, and says when the rate is
mini-gda's own limit; goal 1 names the bound shapes, goal 3 compares put+completion with the bare
copy, and the exit code says whether every evaluated goal was met."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO

TABLE = REPO / "native" / "tests" / "softnic" / "goals_table.py"
SAME, PEER = "softnic-gpu-same", "softnic-gpu"


def rec(placement: str, measure: str, shape: str, value: float) -> dict[str, object]:
    return {"placement": placement, "measure": measure, "shape": shape, "value": value,
            "sm_clock_mhz": 1980.0, "label": "x"}  # fmt: skip


def after_run(inline64_rate: float, ceiling: float) -> list[dict[str, object]]:
    out = []
    for pl in (SAME, PEER):
        out += [
            rec(pl, "ceiling", "inline 64 B", ceiling),
            rec(pl, "msg_rate", "inline 64 B", inline64_rate),
            rec(pl, "completion", "pointer 4096 B", 1200.0),
            rec(pl, "warp_copy", "pointer 4096 B", 1000.0),
        ]
    return out


def table(tmp_path: Path, after: list, before: list | None, *flags: str) -> tuple[int, str]:
    paths = []
    for name, records in (("after", after), ("before", before)):
        if records is None:
            continue
        p = tmp_path / f"{name}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in records))
        paths.append(str(p))
    out = subprocess.run([sys.executable, str(TABLE), *paths, *flags], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    return out.returncode, out.stdout


def section(stdout: str, placement: str) -> str:
    return stdout.split(f"== {placement} ")[1].split("\n== ")[0]


def test_goal_2_is_evaluated_where_the_serial_engine_ran(tmp_path: Path):
    before = [rec(PEER, "msg_rate", "inline 64 B", 1.5)]
    rc, out = table(tmp_path, after_run(9.0, 40.0), before, "--before-serial")
    assert "9.00 vs 1.50 Mmsg/s = 6.0x met" in section(out, PEER)
    assert "serial engine's): not evaluated" in section(out, SAME)
    assert "of a bare warp copy): 1200 ns vs 1000 ns = 1.20x met" in section(out, SAME)
    assert rc == 0 and "all evaluated goals met" in out


def test_a_goal_missed_fails_and_says_which(tmp_path: Path):
    before = [rec(PEER, "msg_rate", "inline 64 B", 2.0)]
    rc, out = table(tmp_path, after_run(9.0, 12.0), before, "--before-serial")
    assert "9.00 vs 2.00 Mmsg/s = 4.5x NOT met" in section(out, PEER)
    assert "on every shape with both): NOT met: inline 64 B" in section(out, SAME)
    assert rc == 1 and "some goals NOT met" in out


def test_another_before_engine_is_shown_not_judged_as_goal_2(tmp_path: Path):
    before = [rec(PEER, "msg_rate", "inline 64 B", 8.0)]
    rc, out = table(tmp_path, after_run(9.0, 40.0), before)
    assert "not evaluated" in section(out, PEER) and "4.5x" not in out
    assert rc == 0


def test_goal_2_missed_where_the_rate_is_mini_gdas_own_says_so(tmp_path: Path):
    before = [rec(SAME, "msg_rate", "inline 64 B", 4.2), rec(SAME, "ceiling", "inline 64 B", 4.21)]
    rc, out = table(tmp_path, after_run(14.1, 268.0), before, "--before-serial")
    same = section(out, SAME)
    assert "14.10 vs 4.20 Mmsg/s = 3.4x NOT met" in same
    assert "the rate is mini-gda's own limit here: the engine's ceiling is 19.0x it" in same
    assert "inline 64 B ceilings: 268.00 vs 4.21 MWQE/s = 63.7x" in same
    assert "not evaluated" in section(out, PEER) and "BASE=c6ea099" in section(out, PEER)
    assert rc == 1


def test_goal_2_missed_with_the_engine_as_the_limit_names_no_other(tmp_path: Path):
    before = [rec(SAME, "msg_rate", "inline 64 B", 4.2)]
    rc, out = table(tmp_path, after_run(14.1, 20.0), before, "--before-serial")
    assert "3.4x NOT met" in section(out, SAME) and "own limit" not in out
    assert rc == 1
