"""Every baseline parser on text in the exact format its upstream tool prints
(tests/fixtures/baselines/, numbers invented)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gicomm.baselines.parsers import ParseError, parse, parser_names, to_records
from gicomm.baselines.parsers.mscclpp import skipped
from gicomm.records import RecordIdentity, check_record

FIX = Path(__file__).parent / "fixtures" / "baselines"


def text(name: str) -> str:
    return (FIX / name).read_text()


def pick(rows, metric, stat="avg", **params):
    out = [
        r
        for r in rows
        if r.metric == metric
        and r.upstream_stat == stat
        and all(r.params.get(k) == v for k, v in params.items())
    ]
    assert len(out) == 1, (metric, stat, params, out)
    return out[0].value


def test_nvshmem_put_latency_table():
    rows = parse("nvshmem-perftest", text("nvshmem_put_latency.txt"))
    assert len(rows) == 12  # 3 scopes x 4 sizes
    assert {r.metric for r in rows} == {"completion_ns"}
    assert pick(rows, "completion_ns", scope="thread", size=8) == pytest.approx(1500.0)
    assert pick(rows, "completion_ns", scope="block", size=64) == pytest.approx(2140.0)
    assert rows[0].params["test"] == "shmem_put_latency"


def test_nvshmem_machine_readable_matches_table():
    rows = parse("nvshmem-perftest", text("nvshmem_put_latency_machine.txt"))
    assert len(rows) == 4
    assert pick(rows, "completion_ns", scope="warp", size=16) == pytest.approx(1710.0)


def test_nvshmem_bandwidth_and_ping_pong():
    bw = parse("nvshmem-perftest", text("nvshmem_put_bw.txt"))
    assert pick(bw, "goodput", size=65536) == pytest.approx(120.5)
    pp = parse("nvshmem-perftest", text("nvshmem_p_ping_pong_latency.txt"))
    assert pick(pp, "rtt_ns", size=8) == pytest.approx(2810.0)


def test_nccl_tests_with_mpi_prefix_and_info_lines():
    rows = parse("nccl-tests", text("nccl_tests_alltoall.txt"))
    sizes = sorted({r.params["size"] for r in rows})
    assert sizes == [8, 16, 1024]
    assert pick(rows, "time_ns", size=16, placement="out-of-place") == pytest.approx(12400.0)
    assert pick(rows, "time_ns", size=1024, placement="in-place") == pytest.approx(12970.0)
    assert pick(rows, "algbw", size=1024, placement="in-place") == pytest.approx(0.08)
    assert all(r.params["redop"] == "none" for r in rows)


def test_nccl_tests_without_validation():
    rows = parse("nccl-tests", text("nccl_tests_all_reduce_novalidation.txt"))
    assert pick(rows, "time_ns", size=1024, placement="out-of-place") == pytest.approx(10250.0)
    assert not any("wrong" in r.params for r in rows)


@pytest.mark.parametrize(
    ("tool", "fixture"),
    [
        ("deepep-low-latency", "deepep_low_latency.txt"),
        ("uccl-ep-low-latency", "uccl_ep_low_latency.txt"),
    ],
)
def test_low_latency_lines(tool, fixture):
    rows = parse(tool, text(fixture))
    ph = "dispatch+combine"
    assert pick(rows, "time_ns", "avg", rank=0, phase=ph) == pytest.approx(491300.0)
    assert pick(rows, "time_ns", "max", rank=1, phase=ph) == pytest.approx(512040.0)
    assert pick(rows, "goodput", rank=1, phase="combine") == pytest.approx(61.5)
    assert pick(rows, "time_ns", rank=0, phase="dispatch") == pytest.approx(250400.0)
    assert pick(rows, "send_ns", rank=1, phase="dispatch") == pytest.approx(26010.0)
    assert pick(rows, "recv_ns", rank=0, phase="combine") == pytest.approx(9450.0)


def test_mscclpp_us_per_iter_and_skips():
    t = text("mscclpp_mp_unit.txt")
    rows = parse("mscclpp-mp-unit", t)
    assert pick(rows, "rtt_ns", test="PingPongPerf") == pytest.approx(7363.0)
    assert pick(rows, "rtt_ns", test="PacketPingPongPerf") == pytest.approx(11020.0)
    assert skipped(t) == ["PortChannelOneToOneTest.PingPongPerfIbHostMode"]


def test_perftest_lat_and_bw():
    lat = parse("perftest", text("perftest_ib_write_lat.txt"))
    assert pick(lat, "oneway_ns", "typical", size=8) == pytest.approx(1060.0)
    assert pick(lat, "oneway_ns", "p99.9", size=8) == pytest.approx(4210.0)
    assert len(lat) == 7
    bw = parse("perftest", text("perftest_ib_write_bw.txt"))
    assert pick(bw, "goodput", "peak", size=64) == pytest.approx(10.5013)
    assert pick(bw, "msg_rate", size=8) == pytest.approx(1301.88 / 8, rel=1e-5)


def test_fabric_debug():
    rows = parse("fabric-debug", text("fabric_debug.txt"))
    assert pick(rows, "time_ns", mode="paged", page_bytes=1024) == pytest.approx(1234000.0)
    assert pick(rows, "msg_rate", mode="paged", page_bytes=4096) == pytest.approx(7.686)
    assert pick(rows, "goodput", mode="single-all", bytes_per_gpu=1048576) == pytest.approx(83 / 8)
    assert pick(rows, "time_ns", mode="imm") == pytest.approx(12345.0)
    assert not any(r.params.get("page_bytes") == 10000 for r in rows)  # VERIFIED-only line


@pytest.mark.parametrize("tool", parser_names())
def test_parsers_refuse_unrelated_text(tool):
    with pytest.raises(ParseError):
        parse(tool, "hello\nnothing to see here\n")


def test_unknown_tool():
    with pytest.raises(ParseError, match="no parser"):
        parse("nope", "")


def test_records_are_schema_valid_and_honest_about_the_statistic():
    rows = parse("deepep-low-latency", text("deepep_low_latency.txt"))
    who = RecordIdentity(
        campaign="c",
        host="h",
        platform="h200",
        experiment="deepep_low_latency",
        transport="deepep-v1",
        nic_backend="mlx5",
        run_index=0,
        provenance_id="p",
    )
    recs = to_records(rows, who, params={"tokens": 128})
    for r in recs:
        check_record(r, "test")
        assert r["stats"]["n"] == 1
        assert r["params"]["tokens"] == 128
    assert {r["params"]["upstream_stat"] for r in recs} == {"avg", "min", "max"}
