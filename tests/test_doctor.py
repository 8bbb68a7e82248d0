"""gicomm doctor: host checks against fake sysfs/proc trees (a deliberately wrong set-up), the
same-run floor join, and the verdict logic (a cause only from a check that found it)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gicomm.doctor import checks as C
from gicomm.doctor.floors import attach_floors, load_table, parse_table
from gicomm.doctor.host import Host
from gicomm.doctor.shortrun import floors_step, nic_floors_step, proxy_step
from gicomm.doctor.verdict import ABOVE, NOT_MEASURED, WITHIN, verdict_rows


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake_host(
    tmp: Path, gpu_node: int = 0, nic: bool = False, governor: str = "performance"
) -> Host:
    """A two-socket host: CPUs 0-3 on node 0, 4-7 on node 1; one GPU behind bridge 00:01.0."""
    sys_root, proc = tmp / "sys", tmp / "proc"
    gpu = sys_root / "devices/pci0000:00/0000:00:01.0/0000:17:00.0"
    _write(gpu / "vendor", "0x10de\n")
    _write(gpu / "class", "0x030200\n")
    _write(gpu / "numa_node", f"{gpu_node}\n")
    (sys_root / "bus/pci/devices").mkdir(parents=True)
    (sys_root / "bus/pci/devices/0000:17:00.0").symlink_to(gpu)
    if nic:
        dev = sys_root / "devices/pci0000:80/0000:80:01.0/0000:81:00.0"
        _write(dev / "numa_node", "1\n")
        (sys_root / "class/infiniband/mlx5_0").mkdir(parents=True)
        (sys_root / "class/infiniband/mlx5_0/device").symlink_to(dev)
    for node, cpus in ((0, "0-3"), (1, "4-7")):
        _write(sys_root / f"devices/system/node/node{node}/cpulist", cpus + "\n")
    for cpu in range(8):
        _write(sys_root / f"devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", governor + "\n")
    _write(proc / "cmdline", "quiet\n")
    _write(proc / "modules", "nvidia 1 0 - Live 0x0\n")
    _write(proc / "sys/kernel/osrelease", "6.1.0\n")
    return Host(sys_root, proc, tmp / "boot", run=lambda argv: None)


def rec(**kw: object) -> dict[str, object]:
    base = {
        "campaign": "c",
        "host": "h",
        "platform": "local",
        "experiment": "proxy_one_op",
        "transport": "mini-proxy",
        "nic_backend": "softnic-cpu",
        "point_id": "p1",
        "metric": "completion_ns",
        "unit": "ns",
        "run_index": 0,
        "status": "ok",
        "error": None,
        "sm_clock_mhz": 1980.0,
        "p50": 3000.0,
    }
    return base | kw


def test_proxy_workers_on_the_wrong_numa_node_are_found_with_their_cause(tmp_path: Path) -> None:
    host = fake_host(tmp_path, gpu_node=0)
    records = pd.DataFrame([rec(param_worker_cpus="4,5")])
    c = C.check_proxy_pinning(host, records)
    assert c.status == C.PROBLEM
    assert "4,5" in c.cause and "NUMA node 1" in c.cause and "node 0" in c.cause
    assert C.PROXY in c.affects
    # the same workers on the GPU's node are fine
    ok = C.check_proxy_pinning(host, pd.DataFrame([rec(param_worker_cpus="1,2")]))
    assert ok.status == C.OK


def test_an_emulated_provider_standing_in_for_the_nic_is_found() -> None:
    records = pd.DataFrame(
        [rec(nic_backend="mlx5", rdma_provider="emulated", transport="mini-gda")]
    )
    c = C.check_nic_standin(records)
    assert c.status == C.PROBLEM and "emulated" in c.evidence and "not NIC numbers" in c.cause
    real = C.check_nic_standin(
        pd.DataFrame([rec(nic_backend="mlx5", rdma_provider="system rdma-core 50")])
    )
    assert real.status == C.OK
    rxe = C.check_nic_standin(
        pd.DataFrame(
            [
                rec(
                    nic_backend="verbs",
                    rdma_provider="system rdma-core 44.0",
                    path_check_device="rxe0",
                )
            ]
        )  # fmt: skip
    )
    assert rxe.status == C.PROBLEM and "rxe0: Soft-RoCE" in rxe.evidence


def test_checks_that_cannot_look_say_so(tmp_path: Path) -> None:
    host = fake_host(tmp_path)
    assert C.check_sm_clock(host, None).status == C.NOT_RUN  # no nvidia-smi
    assert C.check_proxy_pinning(host, None).status == C.NOT_RUN
    assert C.check_locality(host).status == C.NOT_APPLICABLE  # no NIC
    assert C.check_peermem_dmabuf(host).status == C.NOT_APPLICABLE


def test_gpu_and_nic_on_different_sockets_and_missing_peermem(tmp_path: Path) -> None:
    host = fake_host(tmp_path, gpu_node=0, nic=True)
    loc = C.check_locality(host)
    assert loc.status == C.PROBLEM and "mlx5_0" in loc.evidence and "node 1" in loc.evidence
    pm = C.check_peermem_dmabuf(host)
    assert pm.status == C.PROBLEM and "not loaded" in pm.evidence


def test_governor_and_sm_clock_from_nvidia_smi(tmp_path: Path) -> None:
    host = fake_host(tmp_path, governor="powersave")
    assert C.check_cpu_power(host, None).status == C.WARN
    host.run = lambda argv: "0, 1200, 1980, 1980\n" if "--query-gpu" in argv[1] else None
    low = C.check_sm_clock(host, pd.DataFrame([rec(sm_clock_mhz=1400.0)]))
    assert low.status == C.PROBLEM and "1400" in low.cause
    assert C.check_sm_clock(host, pd.DataFrame([rec(sm_clock_mhz=1975.0)])).status == C.OK


TABLE = {
    "floors": {"host_pingpong": {"metric": "floor_host_pingpong_ns"}},
    "expected": [
        {
            "transport": "mini-proxy",
            "metric": "completion_ns",
            "floor": ["host_pingpong"],
            "overhead_ns": 1000,
            "range": {"rel": 0.2, "source": "test"},
        },
    ],
}


def _floor(run: int, p50: float) -> dict[str, object]:
    return rec(
        experiment="floors",
        transport="none",
        nic_backend="none",
        metric="floor_host_pingpong_ns",
        point_id="f",
        run_index=run,
        p50=p50,
    )


def test_the_floor_comes_from_the_same_run_only() -> None:
    table = parse_table(TABLE, "test")
    tidy = pd.DataFrame([rec(run_index=0), rec(run_index=1), _floor(0, 1500.0)])
    out = attach_floors(tidy, table)
    r0 = out[(out["metric"] == "completion_ns") & (out["run_index"] == 0)].iloc[0]
    r1 = out[(out["metric"] == "completion_ns") & (out["run_index"] == 1)].iloc[0]
    assert (
        r0["floor"] == "host_pingpong" and r0["floor_ns"] == 1500.0 and r0["overhead_ns"] == 1500.0
    )
    assert pd.isna(r1["floor_ns"]) and pd.isna(r1["overhead_ns"])  # run 1 measured no floor


def test_verdict_shows_a_cause_only_from_a_check_that_found_it(tmp_path: Path) -> None:
    table = parse_table(TABLE, "test")
    tidy = pd.DataFrame([rec(p50=9000.0, param_worker_cpus="4"), _floor(0, 1500.0)])
    host = fake_host(tmp_path, gpu_node=0)
    found = C.run_checks(host, tidy)
    v = verdict_rows(tidy, found, table).iloc[0]
    assert v["verdict"] == ABOVE and v["expected_ns"] == 2500.0 and v["overhead_ns"] == 7500.0
    assert "proxy_pinning" in v["likely_cause"] and "NUMA node 1" in v["likely_cause"]
    # nothing found: no invented cause
    quiet = [C.Check("proxy_pinning", C.NOT_RUN, "no records")]
    assert verdict_rows(tidy, quiet, table).iloc[0]["likely_cause"] == "no check found a cause"
    near = pd.DataFrame([rec(p50=2600.0), _floor(0, 1500.0)])
    assert verdict_rows(near, found, table).iloc[0]["verdict"] == WITHIN
    gone = verdict_rows(pd.DataFrame([_floor(0, 1500.0)]), found, table).iloc[0]
    assert gone["verdict"] == NOT_MEASURED


def test_floor_table_and_floors_experiment_agree() -> None:
    table = load_table()
    metrics = set(
        __import__("gicomm.yamlio", fromlist=["load_yaml"]).load_yaml(
            "config/experiments/floors.yaml"
        )["metrics"]
    )
    for f in table.floors.values():
        assert f.same_point or f.metric in metrics, f.id
    with pytest.raises(Exception, match="not one of floors"):
        parse_table(
            {"floors": {}, "expected": [{"transport": "x", "metric": "y", "floor": ["z"]}]}, "t"
        )
    points = floors_step(100).points
    assert {p.params["floor"] for p in points} >= {
        "wqe_doorbell",
        "ring_store",
        "host_pingpong",
        "nvlink_pingpong",
        "nic_loopback",
        "nic_verbs",
    }
    assert {(p.params["floor"], p.nic_backend) for p in points if p.nic_backend != "none"} == {
        ("nic_loopback", "mlx5"),
        ("nic_verbs", "verbs"),
    }
    assert all(p.nic_backend == "none" for p in floors_step(100, nic_apart=True).points)
    nic = {
        (p.params["floor"], p.params.get("target"), p.params["nic_backend"])
        for p in nic_floors_step(100, ["mlx5", "verbs"]).points
    }
    assert nic == {
        ("nic_loopback", None, "mlx5"),
        ("wqe_doorbell", "uar", "mlx5"),
        ("nic_verbs", None, "verbs"),
    }
    with pytest.raises(ValueError, match="softnic-cpu.*allowed"):
        nic_floors_step(100, ["softnic-cpu"])
    assert {p.params["numa_node"] for p in proxy_step(1, 100).points} == {1}


RATE_TABLE = {
    "floors": {"wqe_doorbell_rate": {"metric": "floor_wqe_doorbell_rate", "rate": True}},
    "expected": [{"transport": "mini-gda", "metric": "msg_rate", "floor": ["wqe_doorbell_rate"]}],
}


def test_a_message_rate_sits_under_its_floor_as_time_per_message() -> None:
    table = parse_table(RATE_TABLE, "test")
    floor = _floor(0, 50.0) | {"metric": "floor_wqe_doorbell_rate", "unit": "Mmsg/s"}
    slow = rec(experiment="gda_msg_rate", transport="mini-gda", metric="msg_rate",
               unit="Mmsg/s", point_id="a", p50=4.0)  # fmt: skip
    fast = slow | {"point_id": "b", "p50": 10.0}
    tidy = pd.DataFrame([floor, slow, fast])
    row = attach_floors(tidy, table).set_index("point_id").loc["b"]
    # 50 Mmsg/s is 20 ns per message; 10 Mmsg/s is 100 ns: 80 ns per message above the floor
    assert row["floor"] == "wqe_doorbell_rate" and row["floor_ns"] == 20.0
    assert row["overhead_ns"] == 80.0
    v = verdict_rows(tidy, [], table).iloc[0]
    assert v["metric"] == "msg_rate (ns per message)" and v["measured_ns"] == 100.0  # the fastest
    assert v["floor_ns"] == 20.0 and v["overhead_ns"] == 80.0


def test_the_terminal_lists_each_floor_or_why_this_host_cannot_measure_it() -> None:
    from gicomm.doctor.render import floors_text

    one_gpu = "one GPU: no NVLink pairs (1 GPU visible)"
    floors = pd.DataFrame(
        [
            {"run_index": 0, "metric": "floor_nvlink_pingpong_ns", "unit": "ns",
             "status": "skipped", "error": one_gpu, "p50": None, "param_pair": None},
            *[{"run_index": i, "metric": "floor_nic_verbs_write_ns", "unit": "ns", "status": "ok",
               "error": None, "p50": p, "topology": "two-rank", "rdma_provider": "emulated"}
              for i, p in enumerate((900.0, 1100.0, 1000.0))],
        ]
    )  # fmt: skip
    text = floors_text(floors)
    assert f"floor_nvlink_pingpong_ns: skipped: {one_gpu}" in text
    assert "floor_nic_verbs_write_ns [two-rank, emulated]" in text and "not a NIC number" in text
    assert "1000 ns (3 run(s))" in text
    assert floors_text(pd.DataFrame()) == ""


def test_figures_show_the_overhead_above_the_floor_where_one_was_measured() -> None:
    from gicomm.plots import with_overhead

    summary = pd.DataFrame(
        [
            {"metric": "issue_ns", "unit": "ns", "p50": 400.0, "p50_min": 390.0, "p50_max": 410.0,
             "overhead_ns": 70.0},
            {"metric": "msg_rate", "unit": "Mmsg/s", "p50": 3.0, "p50_min": 3.0, "p50_max": 3.0,
             "overhead_ns": None},
        ]
    )  # fmt: skip
    out = with_overhead(summary)
    over = out[out["metric"] == "issue_ns_over_floor"]
    assert len(out) == 3 and over["p50"].tolist() == [70.0] and over["unit"].tolist() == ["ns"]
    assert len(with_overhead(summary.drop(columns="overhead_ns"))) == 2
