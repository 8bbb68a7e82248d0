"""The emulated NIC end to end on a CPU: the campaign config/campaigns/cpu-emulated-nic.yaml (its
`nic` section and its own sweep of proxy_msg_rate) measured by the batch runner over the real
emulated rdma-core (bin/gicomm-emu-run) with two ranks as two local processes, then the tidy table,
the summary and the report's NIC paths page.

No GPU here: the points are measured by the harness's CPU-producer build of proxy_msg_rate
(gicomm-test-two-rank: the same runner, launcher, out-of-band session, verbs backend and path
proof as gicomm-bench-proxy, with CPU threads in place of the GPU producers). About 10-30 s once
built; the build (when `make test`'s ctest build is not current) is a host-only build of the two
targets."""

from __future__ import annotations

import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, current_build_with

from gicomm.aggregate import summarize_runs
from gicomm.bench import BatchJob, run_batch
from gicomm.config import load_campaign_file
from gicomm.nicpaths import nic_paths
from gicomm.records import iter_records
from gicomm.report import CampaignReport, render_campaign_report
from gicomm.tidy import tidy_frame

CPU_DRIVER = "gicomm-test-two-rank"
NO_RDMA = {"provenance_id": "cpu-1", "hostname": "cpu", "gpus": {"devices": []},
           "rdma": {"devices": []}}  # fmt: skip


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        b = current_build_with(tmp_path_factory, CPU_DRIVER)
        subprocess.run(["cmake", "--build", str(b), "-j", "2", "--target", "gicomm_emu"],
                       check=True, capture_output=True)  # fmt: skip
    except subprocess.CalledProcessError as exc:
        out = ((exc.stdout or b"") + (exc.stderr or b"")).decode(errors="replace")
        if "No rule to make target" in out or "unknown target" in out:
            pytest.skip(f"this native tree has no {CPU_DRIVER} (the harness's two-rank CPU driver)")
        raise
    if not (b / "bin" / "gicomm-emu-run").is_file():
        pytest.skip("this native build has no emulated rdma-core (rdma-core headers missing)")
    return b


def test_verbs_over_the_emulated_nic_between_two_ranks_through_the_pipeline(
    tmp_path: Path, build: Path
):
    campaign = load_campaign_file(REPO / "config/campaigns/cpu-emulated-nic.yaml")
    e = campaign.experiments["proxy_msg_rate"]
    # The CPU-producer build of the same experiment: no GPU needed.
    e = replace(e, driver=CPU_DRIVER, needs={"gpus": 0}, needs_when=e.needs_when)
    points = e.points(campaign.sweep)
    assert {p.nic_backend for p in points} == {"verbs"} and len(points) == 3
    bin_dir = tmp_path / "build" / "bin"
    bin_dir.mkdir(parents=True)
    (tmp_path / "build" / "gicomm_build.json").write_text('{"cuda": false, "rdma": true}')
    for name in (CPU_DRIVER, "gicomm-emu-run"):
        (bin_dir / name).symlink_to(build / "bin" / name)
    job = BatchJob(
        experiment=e, points=points, campaign=campaign.name, host="cpu", platform="local",
        run_index=0, build_dir=tmp_path / "build", hardware=NO_RDMA,
        partial=tmp_path / "partial/b0.jsonl", history=tmp_path / "history/b0",
        output=tmp_path / "raw/proxy_msg_rate/run0/batch0.jsonl",
        wait_ms=campaign.timeouts["wait_ms"], point_s=campaign.timeouts["point_s"],
        nic=campaign.nic,
    )  # fmt: skip
    t0 = time.monotonic()
    run_batch(job)
    took = time.monotonic() - t0
    recs = list(iter_records(job.output))
    assert [r["status"] for r in recs] == ["ok"] * 3, [r.get("error") for r in recs]
    for r in recs:
        assert r["rdma_provider"] == "emulated" and r["topology"] == "two-rank"
        assert r["path_check"]["verdict"] == "ok" and r["path_check"]["peer_rx_bytes"] > 0
    assert took < 60, took

    tidy = tidy_frame(recs)
    summary = summarize_runs(tidy)
    assert set(summary["rdma_provider"]) == {"emulated"} and set(summary["path_check"]) == {"ok"}
    paths = nic_paths(tidy)
    assert paths[["experiment", "ran on", "topology", "points ok", "counter check"]].values.tolist() == [
        ["proxy_msg_rate", "emulated NIC", "two-rank", 3, "3 ok"]
    ]  # fmt: skip

    d = tmp_path / "data"
    d.mkdir()
    tidy.to_csv(d / "records.csv", index=False)
    summary.to_csv(d / "summary.csv", index=False)
    for name in ("claims", "fits", "ratios"):
        pd.DataFrame(columns=["experiment"]).to_csv(d / f"{name}.csv", index=False)
    out = tmp_path / "report"
    render_campaign_report(
        CampaignReport(campaign.name, d / "records.csv", d / "summary.csv", d / "claims.csv",
                       d / "fits.csv", d / "ratios.csv", out / "tables", [], out / "index.html",
                       current=True)
    )  # fmt: skip
    page = (out / "nic.html").read_text()
    assert "<td>proxy_msg_rate</td>" in page and "<td>emulated NIC</td>" in page
    assert "ran on the emulated NIC (emulated rdma-core: not real-NIC numbers)" in page
    assert 'href="nic.html"' in (out / "index.html").read_text()
