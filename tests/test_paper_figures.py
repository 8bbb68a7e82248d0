"""The figure test: every figure of the paper (3 to 11) is drawn in the paper's form. For each figure
and each of its panels, every number the catalogue cites from the paper's typed tables is drawn
(an artist tagged paper-<figure>-<panel>-<n>, in the figure and in its SVG, at the cited value),
both axes are labelled with their units, the measured series name their NIC backend and SM clock,
and a panel with nothing measured says why inside its axes. Also: the model's series, the
model-NIC-bound mark, and emulated-NIC points kept apart from real-NIC ones."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from conftest import make_record
from test_report_synth import synthetic_tables

from gicomm.aggregate import summarize_runs
from gicomm.catalogue import FIGURE_IDS, FIGURES
from gicomm.paper import cell_value, reference
from gicomm.paper_figures import draw_paper_figure, paper_gid, plot_paper_figure
from gicomm.tidy import tidy_frame

UNIT = re.compile(r"\[[^\]]+\]$")


@pytest.fixture(scope="module")
def synth() -> dict[str, pd.DataFrame]:
    return synthetic_tables()


def gids(fig: plt.Figure) -> set[str]:
    return {a.get_gid() for ax in fig.axes for a in ax.get_children() if a.get_gid()}


def panel_axes(fig: plt.Figure, fig_id: str) -> list[plt.Axes]:
    """The figure's panels in catalogue order (the last axes holds the notes)."""
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert len(axes) == len(FIGURES[fig_id].panels)
    return axes


@pytest.mark.parametrize("fig_id", FIGURE_IDS)
@pytest.mark.parametrize("data", ["synthetic", "empty"])
def test_paper_points_drawn_and_axes_labelled_with_units(
    synth: dict, fig_id: str, data: str, tmp_path: Path
):
    spec = FIGURES[fig_id]
    summary = synth["summary"] if data == "synthetic" else synth["summary"].iloc[0:0]
    records = synth["records"] if data == "synthetic" else synth["records"].iloc[0:0]
    fig = draw_paper_figure(summary, records, "synth", fig_id)
    drawn = gids(fig)
    for ax, panel in zip(panel_axes(fig, fig_id), spec.panels, strict=True):
        assert UNIT.search(ax.get_ylabel()), (fig_id, panel.id, ax.get_ylabel())
        if panel.kind != "bars":
            assert UNIT.search(ax.get_xlabel()), (fig_id, panel.id, ax.get_xlabel())
        assert ax.get_ylabel() == panel.y.text and ax.get_xlabel() == panel.x.text
        assert panel.paper, f"{fig_id}/{panel.id} draws none of the paper's numbers"
        for i, ref in enumerate(panel.paper):
            assert paper_gid(fig_id, panel.id, i) in drawn, (fig_id, panel.id, ref["label"])
    svg = tmp_path / f"{fig_id}.svg"
    fig.savefig(svg)
    plt.close(fig)
    text = svg.read_text()
    for panel in spec.panels:
        for i in range(len(panel.paper)):
            assert f'id="{paper_gid(fig_id, panel.id, i)}' in text
    assert spec.paper_ref in text


def test_paper_markers_sit_at_the_cited_values():
    fig = draw_paper_figure(pd.DataFrame(), pd.DataFrame(), "empty", "fig03")
    issue = next(ax for ax in fig.axes if ax.get_title() == "issue")
    inline = next(a for a in issue.get_children() if a.get_gid() == paper_gid("fig03", "issue", 0))
    assert list(inline.get_xdata()) == [8.0] and list(inline.get_ydata()) == [0.70]
    fig04 = draw_paper_figure(pd.DataFrame(), pd.DataFrame(), "empty", "fig04")
    all_qp = next(
        a for ax in fig04.axes for a in ax.get_children()
        if a.get_gid() == paper_gid("fig04", "completion", 0)
    )  # fmt: skip
    assert list(all_qp.get_xdata()) == [1, 2, 4, 8, 16, 32]
    assert list(all_qp.get_ydata()) == [18.02, 18.78, 19.78, 20.96, 24.77, 34.85]  # Table 7
    plt.close("all")


def test_paper_numbers_come_from_the_typed_tables():
    # a range stays a range; a loss in percent becomes the fraction retained
    r = reference(FIGURES["fig10"].panels[0].paper[2])
    assert (r.y_lo[0], r.y_hi[0]) == (139.0, 143.0)
    r = reference(FIGURES["fig10"].panels[1].paper[1])
    assert r.y[0] == pytest.approx(0.41)
    cell = {"table": "table05_minigda_msgrate_8B_PIB.csv", "column": "mmsg_per_s",
            "row": {"group": "Several QPs", "qps": "64", "sms": "64"}}  # fmt: skip
    assert cell_value(cell).value == 260.0


def test_measured_series_name_backend_and_clock_and_empty_panels_say_why(synth: dict):
    fig = draw_paper_figure(synth["summary"], synth["records"], "synth", "fig05")
    labels = [t for ax in fig.axes for t in ax.get_legend_handles_labels()[1]]
    assert any("softnic-cpu" in t and "MHz" in t for t in labels), labels
    assert "ours: host h1; NIC softnic-cpu (software NIC)" in fig._suptitle.get_text()
    plt.close(fig)
    # goodput was skipped for want of an RDMA NIC: the panel says so, in the runner's words
    fig = draw_paper_figure(synth["summary"], synth["records"], "synth", "fig08")
    (why,) = [a for ax in fig.axes for a in ax.get_children() if a.get_gid() == "why-goodput"]
    assert "not runnable here" in why.get_text() and "needs an RDMA NIC" in why.get_text()
    plt.close(fig)


def _rate_records(**extra: object) -> pd.DataFrame:
    """Synthetic inline-payload message-rate records (five runs) on the softnic gpu engine."""
    recs = []
    for run in range(5):
        for size, rate in ((8, 50.0), (64, 2.0)):
            recs.append(make_record(
                experiment="inline_payload", transport="mini-gda", nic_backend="softnic-gpu",
                metric="msg_rate", unit="Mmsg/s", run_index=run, point_id=f"s{size}",
                params={"payload": "inline", "size": size, "qps": 16, "batch": 16},
                stats={"n": 5, "p50": rate}, **extra,
            ))  # fmt: skip
    return tidy_frame(recs)


def test_points_near_their_engine_ceiling_are_marked_model_nic_bound():
    records = _rate_records()
    summary = summarize_runs(records)
    # the ceiling a record will carry (WQE/s of its shape, measured in the same run)
    summary["engine_ceiling"] = summary["param_size"].map({8: 300.0, 64: 3.0})
    fig = draw_paper_figure(summary, records, "synth", "fig03")
    assert "bound-rate" in gids(fig)  # 2.0 Mmsg/s at 64 B is within 2x of a 3.0 ceiling
    bound = next(a for ax in fig.axes for a in ax.get_children() if a.get_gid() == "bound-rate")
    assert list(bound.get_xdata()) == [64.0]  # 50 at 8 B is far below its 300 ceiling
    plt.close(fig)
    # no ceiling measured for the multi-WQEBB shapes: the figure says what may limit them
    fig = draw_paper_figure(summarize_runs(records), records, "synth", "fig03")
    notes = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert "no engine ceiling was measured" in notes and "model NIC" in notes
    assert "bound-rate" not in gids(fig)
    plt.close(fig)


def test_emulated_nic_series_are_labelled_and_kept_apart():
    real = summarize_runs(_rate_records()).assign(nic_backend="mlx5", rdma_provider="")
    emulated = real.assign(rdma_provider="emulated", p50=real["p50"] / 2)
    fig = draw_paper_figure(pd.concat([real, emulated]), pd.DataFrame(), "synth", "fig03")
    rate = next(ax for ax in fig.axes if ax.get_title().startswith("message rate"))
    labels = rate.get_legend_handles_labels()[1]
    assert any("mlx5, emulated NIC" in t for t in labels)
    assert any("mlx5, real NIC" in t for t in labels)
    plt.close(fig)


def test_the_model_is_drawn_at_our_points(synth: dict):
    records = synth["records"]
    pts = records[(records["experiment"] == "completion_scope")]
    assert pts.empty  # the synthetic campaign has no completion_scope: use loaded_rtt
    rtt = records[(records["experiment"] == "loaded_rtt") & (records["status"] == "ok")]
    beside = rtt.drop_duplicates("point_id")[["experiment", "transport", "nic_backend",
                                              "point_id", "metric", "unit", "p50"]]  # fmt: skip
    beside = beside.assign(predicted=beside["p50"] * 1.1, ratio=1.1)
    fig = draw_paper_figure(synth["summary"], records, "synth", "fig06", beside=beside)
    assert "model-rtt" in gids(fig)
    plt.close(fig)


def test_figure_files_are_written(synth: dict, tmp_path: Path):
    out = [tmp_path / "fig07.png", tmp_path / "fig07.svg"]
    plot_paper_figure(synth["summary"], synth["records"], "synth", "fig07", out)
    assert out[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out[1].stat().st_size > 5000
