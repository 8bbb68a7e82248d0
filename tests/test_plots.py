"""Figures: one per paper figure (3 to 11), one per experiment, and the comparison across
campaigns; PNG and SVG; units, SM clock and NIC backend on each; 'not measured here' with the
reason when the experiment has no measurements."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from test_report_synth import synthetic_tables

from gicomm.paper import FIGURE_IDS, PAPER_EXPERIMENTS
from gicomm.plots import PAPER_FIGURES, plot_comparison, plot_experiment, plot_paper_figure

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def synth() -> dict[str, pd.DataFrame]:
    return synthetic_tables()


def _render(synth: dict, fig_id: str, out: Path) -> str:
    png, svg = out / f"{fig_id}.png", out / f"{fig_id}.svg"
    plot_paper_figure(synth["summary"], synth["records"], "synth", fig_id, [png, svg])
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000
    return svg.read_text()


def test_registry_maps_every_paper_figure_to_its_experiment():
    assert tuple(PAPER_FIGURES) == FIGURE_IDS
    expected = {"fig03": "inline_payload", "fig04": "completion_scope", "fig05": "sm_clock",
                "fig06": "loaded_rtt", "fig07": "proxy_msgrate", "fig08": "goodput",
                "fig09": "kernel_cost", "fig10": "connection_scaling", "fig11": "goodput"}  # fmt: skip
    assert {k: f.experiment for k, f in PAPER_FIGURES.items()} == expected
    assert {f.experiment for f in PAPER_FIGURES.values()} <= set(PAPER_EXPERIMENTS)


@pytest.mark.parametrize("fig_id", ["fig05", "fig06", "fig09", "fig10"])
def test_measured_figure_states_units_clock_and_backend(synth: dict, tmp_path: Path, fig_id: str):
    svg = _render(synth, fig_id, tmp_path)
    assert "NIC backend" in svg and "SM clock" in svg
    assert "[" in svg and "]" in svg  # every value axis carries its unit in brackets
    assert PAPER_FIGURES[fig_id].paper_ref in svg


def test_softnic_figures_say_they_are_model_numbers(synth: dict, tmp_path: Path):
    assert "software NIC" in _render(synth, "fig05", tmp_path)  # sm_clock ran on softnic-cpu
    assert "[us]" in _render(synth, "fig05", tmp_path)  # ns records are shown in us


def test_fits_are_drawn_and_annotated(synth: dict, tmp_path: Path):
    assert "C=" in _render(synth, "fig05", tmp_path)
    assert "onset" in _render(synth, "fig10", tmp_path)


@pytest.mark.parametrize("fig_id", ["fig03", "fig04", "fig07", "fig08", "fig11"])
def test_unmeasured_figure_says_why(synth: dict, tmp_path: Path, fig_id: str):
    svg = _render(synth, fig_id, tmp_path)
    if PAPER_FIGURES[fig_id].experiment == "goodput":
        assert "not runnable here" in svg and "needs an RDMA NIC" in svg
    else:
        assert "not measured in this campaign" in svg


def test_experiment_figure_for_every_experiment_even_without_data(synth: dict, tmp_path: Path):
    for name in ("one_op", "timer_selfcheck"):
        png, svg = tmp_path / f"{name}.png", tmp_path / f"{name}.svg"
        plot_experiment(synth["summary"], synth["records"], "synth", name, [png, svg])
        assert png.stat().st_size > 3000 and svg.exists()
    assert "not measured" in (tmp_path / "timer_selfcheck.svg").read_text()


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
