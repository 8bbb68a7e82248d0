"""Figures of each experiment and the comparison across campaigns; PNG and SVG; units, SM clock and
NIC backend on each; 'not measured here' with the reason when the experiment has no measurements.
The paper's figures have their own test (tests/test_paper_figures.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from test_report_synth import synthetic_tables

from gicomm.catalogue import FIGURE_IDS, FIGURES, PAPER_EXPERIMENTS
from gicomm.plots import plot_comparison, plot_experiment

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_catalogue_maps_every_paper_figure_to_an_experiment_it_reads():
    assert tuple(f"fig{n:02d}" for n in range(3, 12)) == FIGURE_IDS
    expected = {"fig03": "inline_payload", "fig04": "completion_scope", "fig05": "sm_clock",
                "fig06": "loaded_rtt", "fig07": "proxy_msg_rate", "fig08": "goodput",
                "fig09": "kernel_cost", "fig10": "connection_scaling", "fig11": "goodput"}  # fmt: skip
    assert {k: f.experiment for k, f in FIGURES.items()} == expected
    assert {f.experiment for f in FIGURES.values()} <= set(PAPER_EXPERIMENTS)
    assert all(f.experiment in f.reads for f in FIGURES.values())


@pytest.fixture(scope="module")
def synth() -> dict[str, pd.DataFrame]:
    return synthetic_tables()


def test_experiment_figure_for_every_experiment_even_without_data(synth: dict, tmp_path: Path):
    for name in ("one_op", "timer_selfcheck"):
        png, svg = tmp_path / f"{name}.png", tmp_path / f"{name}.svg"
        plot_experiment(synth["summary"], synth["records"], "synth", name, [png, svg])
        assert png.stat().st_size > 3000 and svg.exists()
    text = (tmp_path / "timer_selfcheck.svg").read_text()
    assert "not measured in this campaign" in text and "no records of timer_selfcheck" in text


def test_comparison_across_campaigns_shows_each_campaign_and_backend(synth: dict, tmp_path: Path):
    s = synth["summary"]
    other = s.assign(campaign="other", platform="h200", nic_backend="mlx5")
    both = pd.concat([s, other], ignore_index=True)
    svg = tmp_path / "one_op.svg"
    plot_comparison(both, "one_op", [tmp_path / "one_op.png", svg])
    text = svg.read_text()
    assert "synth" in text and "other" in text and "mlx5" in text and "softnic-cpu" in text
    plot_comparison(both, "goodput", [tmp_path / "none.svg"])
    assert "no campaign measured it" in (tmp_path / "none.svg").read_text()
