"""The report's NIC paths: every NIC path with records is listed with what it ran on (real NIC or
emulated rdma-core), its provider and topology, its points ok / failed / skipped and its counter
check; values measured on the emulated NIC are listed apart, labelled so; softnic points are not
NIC paths; the campaign's index links the page."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from conftest import make_record

from gicomm.aggregate import summarize_runs
from gicomm.nicpaths import emulated_values, nic_paths
from gicomm.records import check_record
from gicomm.report import CampaignReport, render_campaign_report
from gicomm.tidy import tidy_frame

OK_PATH = {"device": "mlx5_0", "port": 1, "verdict": "ok", "expected_bytes": 8, "tx_bytes": 8,
           "rx_bytes": 0, "peer_tx_bytes": 0, "peer_rx_bytes": 8, "reason": ""}  # fmt: skip
BAD_PATH = {**OK_PATH, "verdict": "failed", "tx_bytes": 0, "reason": "mlx5_0 port 1 sent 0 of 8 B"}


def records() -> pd.DataFrame:
    emu = {"rdma_provider": "emulated", "topology": "two-rank"}
    recs = []
    for run in range(2):
        for size, check in ((8, OK_PATH), (64, OK_PATH), (512, BAD_PATH)):
            recs.append(make_record(
                experiment="proxy_msg_rate", transport="mini-proxy", nic_backend="verbs",
                point_id=f"p{size}", params={"size": size}, metric="msg_rate", unit="Mmsg/s",
                run_index=run, stats={"n": 1, "p50": 2.0}, path_check=check, **emu))  # fmt: skip
    recs += [
        make_record(experiment="library_baselines", transport="nvshmem-ibgda", nic_backend="mlx5",
                    point_id="lb", params={"op": "put", "size": 8}, metric="completion_ns",
                    stats={"n": 100, "p50": 5000.0}, **emu),
        make_record(experiment="library_baselines", transport="nvshmem-ibrc", nic_backend="mlx5",
                    point_id="lb2", params={"op": "put", "size": 8}, metric="completion_ns",
                    status="skipped", error="needs 2 GPU(s), found 1", stats=None),
        make_record(experiment="one_op", transport="mini-gda", nic_backend="mlx5",
                    rdma_provider="system rdma-core 50.0", topology="two-rank", path_check=OK_PATH),
        make_record(experiment="one_op", transport="mini-gda", nic_backend="softnic-gpu"),
    ]  # fmt: skip
    return tidy_frame(
        [check_record({k: v for k, v in r.items() if v is not None}, "t") for r in recs]
    )


def test_every_nic_path_is_listed_with_what_it_ran_on_and_its_counter_check():
    paths = nic_paths(records()).set_index(["experiment", "transport"])
    assert len(paths) == 4  # the softnic point is no NIC path
    emu = paths.loc[("proxy_msg_rate", "mini-proxy")]
    assert (emu["ran on"], emu["rdma_provider"], emu["topology"]) == ("emulated NIC", "emulated",
                                                                      "two-rank")  # fmt: skip
    # two points ok in each of two runs; the third failed its path check in both
    assert (emu["points ok"], emu["points failed"], emu["counter check"]) == (
        4,
        2,
        "2 failed, 4 ok",
    )
    real = paths.loc[("one_op", "mini-gda")]
    assert (real["ran on"], real["counter check"]) == ("real NIC", "1 ok")
    skipped = paths.loc[("library_baselines", "nvshmem-ibrc")]
    assert (skipped["points skipped"], skipped["counter check"]) == (1, "not recorded")
    assert skipped["rdma_provider"] == "not recorded"


def test_emulated_values_are_listed_apart_and_labelled():
    values = emulated_values(summarize_runs(records()))
    assert set(values["where"]) == {
        "ran on the emulated NIC (emulated rdma-core: not real-NIC numbers)"
    }
    assert set(values["experiment"]) == {"proxy_msg_rate", "library_baselines"}
    lb = values[values["transport"] == "nvshmem-ibgda"].iloc[0]
    assert (lb["metric"], lb["p50"]) == ("completion_ns", 5000.0)
    # the failed path check's point is never among the values
    assert sorted(values[values["experiment"] == "proxy_msg_rate"]["size"]) == [8, 64]


def test_the_report_has_the_nic_paths_page(tmp_path: Path):
    tidy = records()
    d = tmp_path / "data"
    d.mkdir()
    tidy.to_csv(d / "records.csv", index=False)
    summarize_runs(tidy).to_csv(d / "summary.csv", index=False)
    for name in ("claims", "fits", "ratios"):
        pd.DataFrame(columns=["experiment"]).to_csv(d / f"{name}.csv", index=False)
    out = tmp_path / "report"
    render_campaign_report(
        CampaignReport("nic", d / "records.csv", d / "summary.csv", d / "claims.csv",
                       d / "fits.csv", d / "ratios.csv", out / "tables", [], out / "index.html",
                       current=True)
    )  # fmt: skip
    page = (out / "nic.html").read_text()
    assert page.count("<td>emulated NIC</td>") == 2 and "<td>real NIC</td>" in page
    assert "<td>2 failed, 4 ok</td>" in page
    assert "ran on the emulated NIC (emulated rdma-core: not real-NIC numbers)" in page
    sweep = (out / "experiments" / "proxy_msg_rate.html").read_text()
    assert all(f"<th>{c}</th>" in sweep for c in ("rdma_provider", "topology", "path_check"))
    index = (out / "index.html").read_text()
    assert "4 NIC path(s)" in index and 'href="nic.html"' in index
