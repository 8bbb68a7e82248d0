"""Aggregation over independent process runs, same-run transport ratios, and the model fits."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import make_record

from gicomm.aggregate import summarize_runs, transport_ratios
from gicomm.fits import (
    clock_fit,
    clock_fits,
    first_reaching,
    linear_slope,
    plateau_power_fit,
)
from gicomm.intervals import t_interval
from gicomm.tidy import tidy_frame


def _runs(p50s: list[float], **kw: object) -> list[dict]:
    return [
        make_record(run_index=i, stats={"n": 10, "p50": v, "p99": 2 * v}, **kw)
        for i, v in enumerate(p50s)
    ]


def test_summary_is_median_over_runs_with_spread_and_p99():
    df = tidy_frame(_runs([700.0, 720.0, 1000.0]))
    s = summarize_runs(df)
    assert len(s) == 1
    row = s.iloc[0]
    assert row["runs"] == 3
    assert row["p50"] == 720.0
    assert (row["p50_min"], row["p50_max"]) == (700.0, 1000.0)
    assert row["p99"] == 1440.0 and row["p99_max"] == 2000.0
    # The verdicts' interval: Student's t over the per-run p50s (wider than their range at 3 runs).
    lo, hi = t_interval([700.0, 720.0, 1000.0])
    assert (row["p50_ci_lo"], row["p50_ci_hi"]) == pytest.approx((lo, hi))
    assert row["p50_ci_lo"] < 700.0 and row["p50_ci_hi"] > 1000.0
    assert row["n_samples_total"] == 30


def test_summary_separates_points_backends_and_skips_failed_records():
    recs = _runs([1.0, 2.0]) + _runs([5.0, 6.0], nic_backend="mlx5")
    recs += _runs([9.0], params={"payload": "pointer", "size": 8})
    recs.append(make_record(status="failed", error="timeout", run_index=2))
    recs[-1].pop("stats")
    s = summarize_runs(tidy_frame(recs))
    assert len(s) == 3
    by = s.set_index(["nic_backend", "param_payload"])["p50"]
    assert by[("softnic-cpu", "inline")] == 1.5
    assert by[("mlx5", "inline")] == 5.5
    assert by[("softnic-cpu", "pointer")] == 9.0
    assert s["param_size"].dtype.kind in "if"  # numeric parameters stay numeric


def test_summary_of_nothing_has_the_columns():
    s = summarize_runs(tidy_frame([]))
    assert s.empty and {"p50", "p99", "runs"} <= set(s.columns)


def test_a_retried_point_counts_once_per_run():
    recs = _runs([10.0, 10.0]) + _runs([30.0])  # run 0 wrote the point twice
    s = summarize_runs(tidy_frame(recs))
    assert s.iloc[0]["runs"] == 2


def test_one_run_has_no_interval_and_agreeing_runs_a_narrow_one():
    one = summarize_runs(tidy_frame(_runs([5.0]))).iloc[0]
    assert math.isnan(one["p50_ci_lo"]) and math.isnan(one["p50_ci_hi"])
    five = summarize_runs(tidy_frame(_runs([100.0, 101.0, 99.0, 100.5, 99.5]))).iloc[0]
    assert 98.0 < five["p50_ci_lo"] < 100.0 < five["p50_ci_hi"] < 102.0


def test_ratios_pair_transports_within_each_run():
    recs = _runs([100.0, 200.0], transport="mini-gda") + _runs(
        [300.0, 400.0], transport="mini-proxy"
    )
    r = transport_ratios(tidy_frame(recs))
    assert len(r) == 1
    row = r.iloc[0]
    assert (row["numerator"], row["denominator"]) == ("mini-gda", "mini-proxy")
    assert row["runs"] == 2
    assert row["ratio_min"] == pytest.approx(1 / 3) and row["ratio_max"] == pytest.approx(0.5)


def test_ratios_need_two_transports():
    assert transport_ratios(tidy_frame(_runs([1.0, 2.0]))).empty


def test_clock_fit_recovers_cycles_and_offset():
    f = np.array([502.0, 800.0, 1100.0, 1400.0, 1845.0])
    t = 10313.0 * 1000.0 / f + 1440.0
    fit = clock_fit(f, t)
    assert fit is not None
    assert fit.c_cycles == pytest.approx(10313.0)
    assert fit.b_ns == pytest.approx(1440.0)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.clock_share_at_max == pytest.approx((10313 / 1.845) / (10313 / 1.845 + 1440))


def test_clock_fit_needs_three_clocks():
    assert clock_fit([1000.0, 1000.0, 1980.0], [5.0, 5.0, 3.0]) is None


def test_clock_fits_table_per_series():
    recs = []
    for f in (600.0, 1200.0, 1800.0):
        recs += _runs([2000.0 * 1000.0 / f + 300.0], sm_clock_mhz=f, params={"sm_clock_mhz": f})
    fits = clock_fits(summarize_runs(tidy_frame(recs)))
    assert len(fits) == 1
    assert fits.iloc[0]["c_cycles"] == pytest.approx(2000.0)


def test_plateau_power_fit_finds_onset_and_exponent():
    n = np.array([128, 256, 512, 1024, 2048, 4096, 8192], dtype=float)
    rate = np.where(n <= 1024, 240.0, 240.0 * (n / 1024) ** -0.7)
    fit = plateau_power_fit(n, rate)
    assert fit is not None
    assert fit.onset == 1024 and fit.plateau == pytest.approx(240.0)
    assert fit.exponent == pytest.approx(0.7)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.loss_at(2048) == pytest.approx(1 - 2**-0.7)


def test_plateau_fit_of_a_flat_curve_has_no_drop():
    fit = plateau_power_fit([1, 2, 4, 8], [242.0, 242.0, 242.0, 242.0])
    assert fit is not None and fit.exponent == 0.0 and fit.loss_at(8) == 0.0
    assert plateau_power_fit([1, 2], [1.0, 1.0]) is None


def test_slope_and_first_reaching():
    slope, r2 = linear_slope([8, 24, 40], [700.0, 800.0, 900.0]) or (0, 0)
    assert slope * 16 == pytest.approx(100.0) and r2 == pytest.approx(1.0)
    assert linear_slope([8, 8], [1.0, 2.0]) is None
    sizes = [64, 128, 256, 512, 1024]
    assert first_reaching(sizes, [5.0, 10.0, 20.0, 23.0, 24.0], 22.32) == 512
    assert first_reaching(sizes, [1.0] * 5, 22.32) is None


def test_summary_tolerates_absent_optional_columns():
    df = tidy_frame(_runs([1.0, 2.0, 3.0])).drop(columns=["cpu_clock_mhz"])
    assert summarize_runs(df).iloc[0]["p50"] == 2.0
    assert isinstance(summarize_runs(pd.DataFrame()), pd.DataFrame)


def test_observed_params_do_not_split_a_point_across_runs():
    recs = [
        make_record(run_index=i, params={"batch": 16, "mean_chain": 15.0 + i, "worker_cpus": "0"},
                    stats={"n": 10, "p50": 10.0 + i})
        for i in range(3)
    ]  # fmt: skip
    s = summarize_runs(tidy_frame(recs))
    assert len(s) == 1 and s.iloc[0]["runs"] == 3
    assert s.iloc[0]["param_mean_chain"] == 16.0  # kept, as the median over runs
