"""Validation: paper-calibrated model against the paper's other numbers."""

import pytest

from gicomm.model.predict import predict
from gicomm.model.validate import KNOWN_GAPS, validation_table


@pytest.fixture(scope="module")
def table():
    return validation_table(probes=12)


def test_calibration_inputs_reproduced(table):
    cal = table[table["role"] == "calibration"]
    assert len(cal) >= 8
    assert cal["passed"].all(), cal[~cal["passed"]]


def test_every_check_outside_the_known_gaps_passes(table):
    bad = table[~table["passed"] & ~table["check"].isin(KNOWN_GAPS)]
    assert bad.empty, bad.to_string()


def test_known_gaps_are_real_checks(table):
    assert set(KNOWN_GAPS) <= set(table["check"])


def test_headline_rows(table):
    head = table[table["role"] == "headline"].set_index("check")
    assert "msg rate 64 thr x 64 QPs x 64 SMs, 16 WQEs/doorbell" in head.index
    assert head.loc["msg rate 64 thr x 64 QPs x 64 SMs, 16 WQEs/doorbell", "passed"]
    assert head.loc["shared/reserved blow-up gdaki", "passed"]
    assert len(head) == 4


def test_predict_quick_has_every_sweep():
    df = predict(platform={"platform": "h100"}, quick=True)
    assert set(df["sweep"]) == {
        "one_op",
        "msg_rate",
        "loaded_rtt",
        "connections",
        "proxy_rate",
        "completion_scope",
    }
    assert (df["platform"] == "h100").all()
    assert df["value"].notna().all()
    conn = df[(df.sweep == "connections") & (df.metric == "msg_rate")]
    assert conn["connections"].max() >= 3000
    send_only = conn[(conn.traffic == "send_only") & (conn.connections >= 1350)]["value"]
    assert send_only.to_numpy() == pytest.approx(242.0, rel=0.02)  # P-H100's NIC was chosen


def test_beside_measured_predicts_at_record_points():
    import pandas as pd

    from gicomm.model.calibrate import from_paper
    from gicomm.model.predict import beside_measured

    rows = [
        {
            "experiment": "msg_rate",
            "transport": "mini-gda",
            "nic_backend": "mlx5",
            "point_id": f"p{b}",
            "metric": "msg_rate",
            "unit": "Mmsg/s",
            "status": "ok",
            "p50": 1.0,
            "param_threads": 1,
            "param_qps": 1,
            "param_batch": b,
        }
        for b in (1, 16)
    ] + [
        {
            "experiment": "one_op",
            "transport": "mini-gda",
            "nic_backend": "mlx5",
            "point_id": "o",
            "metric": "completion_ns",
            "unit": "ns",
            "status": "ok",
            "p50": 4000.0,
        },
        {
            "experiment": "goodput",
            "transport": "nvshmem-p2p",
            "nic_backend": "nvlink",
            "point_id": "g",
            "metric": "goodput",
            "unit": "GB/s",
            "status": "ok",
            "p50": 5.0,
        },
    ]
    out = beside_measured(from_paper(), pd.DataFrame(rows)).set_index("point_id")
    assert set(out.index) == {"p1", "p16", "o"}
    assert out.loc["p16", "predicted"] == pytest.approx(4.70, rel=1e-3)
    assert out.loc["o", "predicted"] == pytest.approx(4030.0)


def test_clock_state_of_a_row_never_reads_nan_as_a_state():
    import math

    import pandas as pd

    from gicomm.model.predict import _clock_state

    assert _clock_state(pd.Series({"cpu_clock_state": math.nan, "param_state": "warm"})) == "warm"
    assert _clock_state(pd.Series({"cpu_clock_state": "cold", "param_state": "warm"})) == "cold"
    assert _clock_state(pd.Series({"cpu_clock_state": math.nan})) == "cold"


def test_beside_measured_maps_loaded_rtt_records_to_their_layout():
    """gicomm-bench-loaded-rtt records: bulk_ctas is the background, the proxy probe's
    completion_ns is predicted under the record's workers, chain and bulk enqueue."""
    import pandas as pd

    from gicomm.model import scenarios as S
    from gicomm.model.calibrate import from_paper
    from gicomm.model.predict import beside_measured

    p = from_paper()

    def row(pid, bulk, batch, metric="completion_ns"):
        return {
            "experiment": "proxy_loaded_probe",
            "transport": "mini-proxy",
            "nic_backend": "softnic-cpu",
            "point_id": pid,
            "metric": metric,
            "unit": "ns",
            "status": "ok",
            "p50": 1000.0,
            "param_queue": "reserved",
            "param_bulk_ctas": bulk,
            "param_bulk_enqueue": "tuned",
            "param_workers": 1,
            "param_batch": batch,
        }

    out = beside_measured(
        p, pd.DataFrame([row("idle", 0, 16), row("b1", 8, 1), row("b16", 8, 16)])
    ).set_index("point_id")
    assert out.loc["idle", "predicted"] == pytest.approx(p.path("mini-proxy").completion_ns)
    want = S.loaded_rtt(p, "mini-proxy", "reserved", bg_ctas=8, probes=12, workers=1, rings=8,
                        chain=16, bg_enqueue="tuned")  # fmt: skip
    assert out.loc["b16", "predicted"] == pytest.approx(want.completion_p50_us * 1e3)
    assert out.loc["b16", "predicted"] > out.loc["b1", "predicted"] > out.loc["idle", "predicted"]


def test_beside_measured_keeps_each_metric_of_a_point_apart():
    """A point's records carry several metrics (issue and completion of one op): each is its own
    row with its own median, never a median across metrics."""
    import pandas as pd

    from gicomm.model.calibrate import from_paper
    from gicomm.model.predict import beside_measured

    rows = [
        {"experiment": "one_op", "transport": "mini-gda", "nic_backend": "mlx5", "point_id": "o",
         "metric": metric, "unit": "ns", "status": "ok", "p50": p50, "run_index": run}
        for metric, values in (("issue_ns", (690.0, 710.0, 700.0)),
                               ("completion_ns", (4000.0, 4100.0, 4050.0)))
        for run, p50 in enumerate(values)
    ]  # fmt: skip
    out = beside_measured(from_paper(), pd.DataFrame(rows)).set_index("metric")
    assert sorted(out.index) == ["completion_ns", "issue_ns"]
    assert out.loc["issue_ns", "p50"] == 700.0 and out.loc["completion_ns", "p50"] == 4050.0
    assert out.loc["completion_ns", "predicted"] == pytest.approx(4030.0)
