"""Validation (issue 9): paper-calibrated model against the paper's other numbers."""

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
    assert set(df["sweep"]) == {"one_op", "msg_rate", "loaded_rtt", "connections"}
    assert (df["platform"] == "h100").all()
    assert df["value"].notna().all()
    conn = df[(df.sweep == "connections") & (df.metric == "msg_rate")]
    assert conn["connections"].max() >= 3000
    send_only = conn[(conn.traffic == "send_only") & (conn.connections >= 1350)]["value"]
    assert send_only.to_numpy() == pytest.approx(242.0, rel=0.02)  # P-H100's NIC was chosen
