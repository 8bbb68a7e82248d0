"""The doctor's NIC floors over the real emulated rdma-core, CPU only: the floors driver's
nic_verbs point (a CPU thread's RDMA writes through verbs) started by the doctor as two ranks (two
local processes, each an emulated host) and as one process looping back, each record with its
path proof, labelled emulated, and the stand-in named by the nic_standin check.

Needs `make test`'s CUDA build (the floors driver is built with the CUDA drivers, though this
point never touches a GPU) with the emulated rdma-core; skipped, saying so, without them. About
5-10 s."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO

from gicomm.doctor import checks as C
from gicomm.doctor.shortrun import nic_floors_step, run_step
from gicomm.records import read_records
from gicomm.tidy import tidy_frame

BIN = REPO / "build" / "ctest" / "bin"


@pytest.fixture(scope="module")
def bins() -> Path:
    for b in ("gicomm-bench-floors", "gicomm-emu-run"):
        if not (BIN / b).is_file():
            pytest.skip(f"{BIN / b} not built (cmake --build build/ctest --target {b})")
    return BIN


@pytest.mark.parametrize("world, topology", [(2, "two-rank"), (1, "loopback")])
def test_nic_floors_over_the_emulated_rdma_core(
    tmp_path: Path, bins: Path, world: int, topology: str
) -> None:
    step = nic_floors_step(20, ["verbs"])
    files = run_step(bins, step, tmp_path / "c", "h", 1, timeout_ms=20000,
                     prefix=[str(bins / "gicomm-emu-run")], world=world, name="nic")  # fmt: skip
    assert [f.name for f in files] == ["nic.run0.jsonl"]
    recs = read_records(files)
    assert {r["metric"] for r in recs} == {"floor_nic_verbs_write_ns", "floor_nic_verbs_msg_rate"}
    for r in recs:
        assert r["status"] == "ok", r.get("error")
        assert r["topology"] == topology and r["rdma_provider"] == "emulated"
        assert r["path_check"]["verdict"] == "ok", r["path_check"]
        assert r["stats"]["p50"] > 0
    if world == 2:
        assert all(r["peer"]["rank"] == 1 for r in recs)
    # rank 1's (empty) records and the emulated sysfs views are not left beside rank 0's
    assert sorted(p.name for p in files[0].parent.iterdir()) == ["nic.run0.jsonl"]
    standin = C.check_nic_standin(tidy_frame(recs))
    assert standin.status == C.PROBLEM and "emulated" in standin.evidence


def test_without_a_nic_the_nic_floors_say_why(tmp_path: Path, bins: Path) -> None:
    step = nic_floors_step(5, ["verbs"])
    env_free = run_step(bins, step, tmp_path / "c", "h", 1, timeout_ms=5000, name="nic")
    recs = pd.DataFrame(read_records(env_free))
    # no RDMA device and no emulation here: one process, the point skipped with the reason
    assert set(recs["status"]) == {"skipped"}
    assert recs["error"].str.contains("RDMA device|no rdma-core").all()
