"""The paper's figures 3 to 11, redrawn in the paper's form (report/paper/catalogue.yaml: each
panel's axes, units, scales and series) with three kinds of series:

- the paper's own numbers (its typed tables), drawn as black hollow markers or grey reference
  lines, each artist tagged `paper-<figure>-<panel>-<n>` (the figure test finds every one);
- this campaign's measurements: median over independent runs with the min..max band, one series
  per configuration, labelled with the NIC backend and its kind (software / emulated / real NIC)
  and the SM clock; a point within 2x of the software NIC's engine ceiling is ringed in red as
  model-NIC bound;
- the performance model at the same points (calibrated on this campaign), dotted, where it
  represents the experiment.

A panel with nothing measured says why (the benchmark runner's reasons) inside its axes, which
keep their labels, units and the paper's numbers.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import ticker

from gicomm.catalogue import CATALOGUE, FIGURES, FigureSpec, Panel, value_label
from gicomm.columns import PARAM_PREFIX, param_column, param_columns, param_name
from gicomm.fits import MIN_CLOCKS, clock_fit, plateau_power_fit
from gicomm.labels import (
    BOUND_TEXT,
    backend_text,
    clock_text,
    convert,
    convertible,
    model_nic_bound,
    nic_kind,
    unmeasured_ceiling,
)
from gicomm.paper import Reference, clock_fit_curve, reference
from gicomm.plots import FIGSIZE, plt, save, sns
from gicomm.select import clock_states, match_rows
from gicomm.status import why_not_measured

MAX_SERIES = 8  # more measured series than this in one panel: other parameters are fixed
PAPER_COLOR = "black"
MODEL_COLOR = "#7a4ea3"
LEGEND_FONT = 6.5
VALUE_LABELS = CATALOGUE.value_labels


def paper_gid(fig_id: str, panel: str, i: int) -> str:
    return f"paper-{fig_id}-{panel}-{i}"


def panel_references(panel: Panel) -> list[Reference]:
    return [reference(r) for r in panel.paper]


# ---- this campaign's points ----------------------------------------------------------------------
def field(d: pd.DataFrame, name: str) -> pd.Series:
    """A series field of every row: a column, a sweep parameter, the worker state or the code
    variant a register count belongs to."""
    if name == "state":
        return clock_states(d)
    if name == "code":
        return d["metric"].map({"registers_absent": "no code"}).fillna("dormant")
    if name in d:
        return d[name]
    col = param_column(name)
    return d[col] if col in d else pd.Series("", index=d.index)


def _text(name: str, v: object) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)) or str(v) == "":
        return ""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if name in ("transport", "caller", "direction", "code") or name in VALUE_LABELS:
        return value_label(name, v)
    return f"{name}={v}"


def colors(n: int) -> list[Any]:
    """n distinct colours: seaborn's ten, or evenly spaced hues beyond ten."""
    return sns.color_palette(n_colors=max(n, 1)) if n <= 10 else sns.color_palette("husl", n)


def panel_rows(summary: pd.DataFrame, spec: FigureSpec, panel: Panel) -> pd.DataFrame:
    """This campaign's summary rows of a panel, in the panel's unit (value, lo, hi)."""
    sel = dict(panel.select)
    if panel.y.metric:
        sel.setdefault("metric", list(panel.y.metric))
    d = match_rows(summary, sel, list(spec.reads)) if not summary.empty else summary
    if d.empty:
        return d
    target = panel.y.unit if panel.kind != "normalized" else None
    if target:
        d = d[d["unit"].map(lambda u: convertible(u, target))]
    d = d.copy()

    def conv(col: str) -> pd.Series:
        src = d[col] if col in d else d["p50"]
        if not target:
            return src.astype(float)
        return pd.Series(
            [convert(float(v), u, target) for v, u in zip(src, d["unit"], strict=True)],
            index=d.index,
            dtype=float,
        )

    d["value"], d["lo"], d["hi"] = conv("p50"), conv("p50_min"), conv("p50_max")
    d["bound"] = model_nic_bound(d)
    if panel.y.scale != "linear":
        d = d[d["value"] > 0]  # a log axis cannot show zero (e.g. no background load)
    return d


def _varying(d: pd.DataFrame, exclude: Sequence[str]) -> list[str]:
    return [c for c in param_columns(d) if c not in exclude and d[c].nunique() > 1]


def fix_extra(
    d: pd.DataFrame, keep: Sequence[str], x: str | None, max_series: int = MAX_SERIES
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """The parameters that vary besides x and the series fields: they join the series label; when
    that makes more than max_series series, they are fixed at their commonest value (said)."""
    extra = _varying(d, [*keep, *([x] if x else [])])
    fixed: list[str] = []
    while extra and _count(d, [*keep, *extra]) > max_series:
        col = extra.pop(0)
        counts = d[col].dropna().value_counts()
        value = counts.index[0]
        d = d[d[col] == value]
        fixed.append(f"{param_name(col)}={_text('', value).removeprefix('=')}")
    return d, extra, fixed


def _count(d: pd.DataFrame, cols: Sequence[str]) -> int:
    present = [c for c in cols if c in d]
    return len(d[present].drop_duplicates()) if present else 1


def series_names(d: pd.DataFrame, fields: Sequence[str], extra: Sequence[str]) -> pd.Series:
    """One name per series: its fields, the extra varying parameters, and where it ran: the
    backend with its kind and the SM clock."""
    parts = pd.DataFrame(index=d.index)
    for name in fields:
        parts[name] = [_text(name, v) for v in field(d, name)]
    for col in extra:
        name = param_name(col)
        parts[name] = [_text(name, v) for v in d[col]]
    provider = d["rdma_provider"] if "rdma_provider" in d else pd.Series(None, index=d.index)
    where = [short_backend(b, p) for b, p in zip(d["nic_backend"], provider, strict=True)]
    own = [" ".join(p for p in parts.loc[i] if p) or str(d.at[i, "transport"]) for i in d.index]
    base = pd.Series([f"{o} [{w}" for o, w in zip(own, where, strict=True)], index=d.index)
    clocks = d["sm_clock_mhz"] if "sm_clock_mhz" in d else pd.Series(np.nan, index=d.index)
    # The SM clock of a series is the range its points ran at (one series, however many clocks).
    clock = clocks.groupby(base).transform(lambda c: clock_text(c)) if len(d) else clocks
    return base + ", " + clock.astype(str) + "]"


def short_backend(backend: object, provider: object) -> str:
    """The backend as a legend names it: 'softnic-gpu', 'mlx5, emulated NIC', 'mlx5, real NIC'."""
    kind = nic_kind(backend, provider)
    return str(backend) if kind in ("softnic", "no NIC") else f"{backend}, {kind}"


def x_of(d: pd.DataFrame, panel: Panel) -> pd.Series:
    if panel.x.column:
        return pd.to_numeric(d[panel.x.column], errors="coerce")
    col = param_column(panel.x.param)
    return pd.to_numeric(d[col], errors="coerce") if col in d else pd.Series(np.nan, index=d.index)


# ---- the model at this campaign's points -------------------------------------------------------
def model_rows(
    beside: pd.DataFrame | None, records: pd.DataFrame, spec: FigureSpec, panel: Panel
) -> pd.DataFrame:
    """The model's prediction at each measured point of the panel (beside_measured.csv joined
    with the records' parameters), in the panel's unit."""
    if beside is None or beside.empty or records.empty or panel.kind != "lines":
        return pd.DataFrame()
    params = [c for c in records.columns if c.startswith(PARAM_PREFIX)]
    cols = ["experiment", "point_id", "metric", "cpu_clock_state", "sm_clock_mhz", *params]
    pts = records[[c for c in cols if c in records]].drop_duplicates(
        ["experiment", "point_id", "metric"]
    )
    m = beside.merge(pts, on=["experiment", "point_id", "metric"], how="inner")
    sel = dict(panel.select)
    if panel.y.metric:
        sel.setdefault("metric", list(panel.y.metric))
    m = match_rows(m, sel, list(spec.reads))
    m = m[m["unit"].map(lambda u: convertible(u, panel.y.unit))]
    if m.empty:
        return m
    m = m.copy()
    m["value"] = [
        convert(float(v), u, panel.y.unit) for v, u in zip(m["predicted"], m["unit"], strict=True)
    ]
    return m


# ---- drawing ------------------------------------------------------------------------------------
def set_scale(ax: plt.Axes, axis: str, scale: str) -> None:
    """The paper's scale, with ticks as plain numbers (8, 16, 32 rather than 2^3)."""
    setter = ax.set_xscale if axis == "x" else ax.set_yscale
    target = ax.xaxis if axis == "x" else ax.yaxis
    if scale == "log2":
        setter("log", base=2)
    elif scale == "symlog":
        setter("symlog", linthresh=1.0, base=2)
    elif scale == "log":
        setter("log")
    if scale == "log":  # 1, 2, 5, 10, 20, 50, ...: enough labels on a short decade
        target.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    if scale != "linear":
        target.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        target.set_minor_formatter(ticker.NullFormatter())


def draw_reference(ax: plt.Axes, ref: Reference, gid: str, categories: list[str]) -> None:
    """One of the paper's numbers: hollow black markers (with the span of a range), or a line."""
    style = {"color": PAPER_COLOR, "label": ref.label, "gid": gid}
    marker = {
        "marker": ref.marker,
        "markersize": 8,
        "markerfacecolor": "white",
        "markeredgewidth": 1.6,
        "linestyle": "none",
    }
    if ref.kind == "hline":
        ax.axhline(ref.y[0], linestyle="--", linewidth=1.1, alpha=0.8, **style)
        if ref.y_hi[0] > ref.y_lo[0]:
            ax.axhspan(ref.y_lo[0], ref.y_hi[0], color=PAPER_COLOR, alpha=0.08)
    elif ref.kind == "vline":
        ax.axvline(ref.x[0], linestyle=":", linewidth=1.3, **style)
    elif ref.kind == "slope":
        ax.plot(ref.x, ref.y, linestyle="-.", linewidth=1.1, **style)
    elif ref.kind == "clock_fit":
        f, t = clock_fit_curve(ref)
        ax.plot(f, t, linestyle="--", linewidth=1.0, color=PAPER_COLOR, alpha=0.6)
        ax.plot(ref.x, ref.y, **marker, **style)
    else:
        xs = [categories.index(x) for x in ref.x] if ref.kind == "bar" else list(ref.x)
        if ref.kind == "series":
            ax.plot(xs, ref.y, **{**marker, "linestyle": ":", "linewidth": 1.0}, **style)
        else:
            ax.plot(xs, ref.y, **marker, **style)
        spans = [(x, lo, hi) for x, lo, hi in zip(xs, ref.y_lo, ref.y_hi, strict=True) if hi > lo]
        for x, lo, hi in spans:
            ax.vlines(x, lo, hi, color=PAPER_COLOR, linewidth=2.0)


def draw_lines(ax: plt.Axes, d: pd.DataFrame, panel: Panel) -> list[str]:
    """This campaign's series against x; returns notes for the figure."""
    notes: list[str] = []
    d = d.assign(x=x_of(d, panel)).dropna(subset=["x"])
    keep = [param_column(f) for f in panel.series_by]
    x = param_column(panel.x.param) if panel.x.param else None
    d, extra, fixed = fix_extra(d, keep, x, panel.max_series)
    if fixed:
        notes.append(f"{panel.title}: others fixed at {', '.join(fixed)}")
    if panel.kind == "normalized":
        d = d.copy()
        d["series"] = series_names(d, panel.series_by, extra)
        peak = d.groupby("series")["value"].transform("max")
        d["value"], d["lo"], d["hi"] = d["value"] / peak, d["lo"] / peak, d["hi"] / peak
    else:
        d = d.assign(series=series_names(d, panel.series_by, extra))
    names = sorted(d["series"].unique())
    palette = dict(zip(names, colors(len(names)), strict=False))
    bound_drawn = False
    for name in names:
        g = (
            d[d["series"] == name]
            .groupby("x", as_index=False)
            .agg(
                value=("value", "median"),
                lo=("lo", "min"),
                hi=("hi", "max"),
                bound=("bound", lambda b: any(v is True for v in b)),
                clock=("sm_clock_mhz", "median") if "sm_clock_mhz" in d else ("value", "size"),
            )
        )
        ax.plot(
            g["x"],
            g["value"],
            marker="o",
            markersize=5,
            linewidth=1.6,
            color=palette[name],
            label=name,
            gid=f"ours-{panel.id}",
        )
        if len(g) > 1:
            ax.fill_between(g["x"], g["lo"], g["hi"], color=palette[name], alpha=0.18, lw=0)
        else:
            ax.vlines(g["x"], g["lo"], g["hi"], color=palette[name], linewidth=1.5)
        b = g[g["bound"]]
        if not b.empty:
            ax.plot(
                b["x"],
                b["value"],
                linestyle="none",
                marker="o",
                markersize=13,
                markerfacecolor="none",
                markeredgecolor="red",
                markeredgewidth=1.5,
                label=None if bound_drawn else "model-NIC bound (engine ceiling / 2)",
                gid=f"bound-{panel.id}",
            )
            bound_drawn = True
        if panel.kind == "normalized" and len(g) >= 3:
            fit = plateau_power_fit(g["x"].to_numpy(), g["value"].to_numpy())
            if fit is not None:
                xs = np.geomspace(float(g["x"].min()), float(g["x"].max()), 50)
                ax.plot(xs, fit.predict(xs), ":", color=palette[name], linewidth=1)
                notes.append(f"{name}: fitted onset {fit.onset:g}, exponent {fit.exponent:.2f}")
    if panel.x.column == "sm_clock_mhz":
        notes += clock_fit_notes(ax, d, palette)
    if bound_drawn:
        notes.append(BOUND_TEXT + " (measured in the same run).")
    if unmeasured_ceiling(d):
        notes.append(
            f"{panel.title}: no engine ceiling was measured in this run for WQEs of more than one "
            "WQEBB (inline payloads over 28 B), which the gpu engine of campaigns before "
            "2026-12-01 served one at a time on one lane, so these rates may show the model NIC's "
            "limit, not the transport's."
        )
    return notes


def clock_fit_notes(ax: plt.Axes, d: pd.DataFrame, palette: dict[str, Any]) -> list[str]:
    """Fit T = C/f + B per series when it has three SM clocks or more; say so when it has not."""
    notes = []
    for name, g in d.groupby("series"):
        clocks = g["sm_clock_mhz"].round(-1).nunique()
        fit = clock_fit(g["sm_clock_mhz"], g["value"] * 1000.0)
        if clocks < MIN_CLOCKS or fit is None:
            notes.append(
                f"{name}: {clocks} SM clock(s) measured, {MIN_CLOCKS} needed for a fit "
                "(clocks are not locked by the pipeline)"
            )
            continue
        f = np.linspace(g["sm_clock_mhz"].min(), g["sm_clock_mhz"].max(), 40)
        ax.plot(f, (fit.c_cycles * 1000.0 / f + fit.b_ns) / 1000.0, "--", color=palette[name])
        notes.append(
            f"{name}: C={fit.c_cycles:.0f} cycles, B={fit.b_ns / 1000:.2f} us, R2={fit.r2:.3f}"
        )
    return notes


def bar_categories(d: pd.DataFrame, panel: Panel) -> pd.Series:
    parts = [field(d, f).map(lambda v, f=f: _text(f, v)) for f in panel.x.category]
    return pd.concat(parts, axis=1).agg(lambda r: "\n".join(p for p in r if p), axis=1)


def draw_bars(ax: plt.Axes, d: pd.DataFrame, panel: Panel, refs: list[Reference]) -> list[str]:
    """This campaign's bars per category (hue: where it ran), the paper's values as markers."""
    ours = d.assign(category=bar_categories(d, panel)) if not d.empty else d
    cats = list(
        dict.fromkeys([*(ours["category"] if not d.empty else []), *(x for r in refs for x in r.x)])
    )
    crowded = len(cats) > 6  # long category names side by side: tilt them
    ax.set_xticks(
        range(len(cats)),
        [c.replace("\n", " ") if crowded else c for c in cats],
        fontsize=7,
        rotation=30 if crowded else 0,
        ha="right" if crowded else "center",
    )
    ax.set_xlim(-0.6, len(cats) - 0.4)
    if d.empty:
        return cats
    provider = (
        ours["rdma_provider"] if "rdma_provider" in ours else pd.Series(None, index=ours.index)
    )
    backend = pd.Series(
        [short_backend(b, p) for b, p in zip(ours["nic_backend"], provider, strict=True)],
        index=ours.index,
    )
    clocks = ours["sm_clock_mhz"] if "sm_clock_mhz" in ours else pd.Series(np.nan, index=ours.index)
    ours = ours.assign(where=backend + ", " + clocks.groupby(backend).transform(clock_text))
    wheres = sorted(ours["where"].unique())
    palette = dict(zip(wheres, colors(len(wheres)), strict=False))
    g = ours.groupby(["category", "where"], as_index=False).agg(
        value=("value", "median"), lo=("lo", "min"), hi=("hi", "max")
    )
    # Bars of one category sit side by side (one per backend it ran on), centred on its tick.
    slot = g.groupby("category")["where"].transform(lambda w: list(range(len(w))))
    n = g.groupby("category")["where"].transform("size")
    width = 0.8 / n
    g["x"] = [cats.index(c) for c in g["category"]] + (slot - (n - 1) / 2) * width
    for w in wheres:
        gw = g[g["where"] == w]
        ax.bar(
            gw["x"],
            gw["value"],
            width=width[gw.index] * 0.95,
            color=palette[w],
            alpha=0.8,
            label=f"this campaign [{w}]",
            gid=f"ours-{panel.id}",
        )
        ax.vlines(gw["x"], gw["lo"], gw["hi"], color="#333", linewidth=1)
    return cats


def draw_panel(
    ax: plt.Axes,
    spec: FigureSpec,
    panel: Panel,
    d: pd.DataFrame,
    model: pd.DataFrame,
    why: str,
) -> list[str]:
    refs = panel_references(panel)
    notes: list[str] = []
    cats: list[str] = []
    if panel.kind == "bars":
        cats = draw_bars(ax, d, panel, refs)
    elif not d.empty:
        notes += draw_lines(ax, d, panel)
    for i, ref in enumerate(refs):
        draw_reference(ax, ref, paper_gid(spec.fig_id, panel.id, i), cats)
    if not model.empty:
        model = model.assign(x=x_of(model, panel)).dropna(subset=["x"])
        model = model.assign(
            series=series_names(model.assign(sm_clock_mhz=np.nan), panel.series_by, [])
        )
        for j, (_, g) in enumerate(model.groupby("series")):
            g = g.groupby("x", as_index=False)["value"].median()
            ax.plot(
                g["x"],
                g["value"],
                linestyle=":",
                marker="x",
                color=MODEL_COLOR,
                linewidth=1.2,
                label="model at our points (calibrated on this campaign)" if j == 0 else None,
                gid=f"model-{panel.id}",
            )
    if panel.kind != "bars":
        set_scale(ax, "x", panel.x.scale)
    set_scale(ax, "y", panel.y.scale)
    ax.set_xlabel(panel.x.text)
    ax.set_ylabel(panel.y.text)
    ax.set_title(panel.title, fontsize=9.5)
    if d.empty:
        ax.text(
            0.5,
            0.5,
            "\n".join(textwrap.wrap(why or "not measured in this campaign", 42)),
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=7.5,
            color="#8a6d00",
            bbox={"facecolor": "#fbf6e6", "edgecolor": "#e0cf9a"},
            gid=f"why-{panel.id}",
        )
    return notes


LEGEND_ROW_IN = 0.135  # inches per legend entry (6.5 pt text)
PANEL_IN = 3.1  # height of a panel's axes with its tick labels and axis label
BARS_EXTRA_IN = 0.8  # tilted category names under a bar panel


def panel_legend(ax: plt.Axes, where: plt.Axes) -> int:
    """The panel's legend, one entry per label, in its own axes under the panel (so the layout
    sizes it like any other part); returns the number of entries."""
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))  # one entry per label (first marker)
    where.axis("off")
    if unique:
        where.legend(unique.values(), unique.keys(), fontsize=LEGEND_FONT, loc="upper center",
                     ncol=1, frameon=False, borderaxespad=0.0)  # fmt: skip
    return len(unique)


def header(campaign: str, spec: FigureSpec, d: pd.DataFrame) -> str:
    head = f"{campaign} / {spec.paper_ref}: {spec.title} ({', '.join(spec.reads)})"
    if d.empty:
        ours = "ours: not measured in this campaign"
    else:
        provider = d["rdma_provider"] if "rdma_provider" in d else pd.Series(None, index=d.index)
        kinds = sorted(
            {backend_text(b, p) for b, p in zip(d["nic_backend"], provider, strict=True)}
        )
        hosts = ", ".join(sorted(d["host"].dropna().astype(str).unique()))
        clock = clock_text(d["sm_clock_mhz"]) if "sm_clock_mhz" in d else "n/a"
        ours = f"ours: host {hosts}; NIC {', '.join(kinds)}; SM clock {clock}"
        if any(
            nic_kind(b, p) != "real NIC" for b, p in zip(d["nic_backend"], provider, strict=True)
        ):
            ours += " (not real-NIC numbers)"
    return f"{head}\n{ours} | paper: {spec.platform} (black markers and grey lines)"


def draw_paper_figure(
    summary: pd.DataFrame,
    records: pd.DataFrame,
    campaign: str,
    fig_id: str,
    beside: pd.DataFrame | None = None,
) -> plt.Figure:
    """The figure, in the paper's form, of this campaign's records (see the module doc)."""
    spec = FIGURES[fig_id]
    n = len(spec.panels)
    ncols = min(spec.columns, n)
    nrows = -(-n // ncols)
    fig = plt.figure(figsize=(FIGSIZE[0], 1.0), layout="constrained")
    # Rows: each row of panels, then a row for their legends; the notes last.
    grid = fig.add_gridspec(2 * nrows + 1, ncols)
    notes: list[str] = [spec.note] if spec.note else []
    all_rows = []
    entries = [0] * nrows
    for i, panel in enumerate(spec.panels):
        row, col = divmod(i, ncols)
        ax = fig.add_subplot(grid[2 * row, col])
        d = panel_rows(summary, spec, panel)
        why = (
            ""
            if not d.empty
            else (
                why_not_measured(records, list(spec.reads))
                or "no measured point matches this panel"
            )
        )
        if d.empty and not why.startswith(("not measured", "not runnable", "failed")):
            why = f"not measured in this campaign: {why}"
        notes += draw_panel(ax, spec, panel, d, model_rows(beside, records, spec, panel), why)
        entries[row] = max(entries[row], panel_legend(ax, fig.add_subplot(grid[2 * row + 1, col])))
        all_rows.append(d)
    foot = fig.add_subplot(grid[2 * nrows, :])
    foot.axis("off")
    text = "\n".join(textwrap.fill(t, 165) for t in dict.fromkeys(notes))
    foot.text(
        0.0, 1.0, text, ha="left", va="top", fontsize=7, color="#444", transform=foot.transAxes
    )
    rows = (
        pd.concat([r for r in all_rows if not r.empty])
        if any(not r.empty for r in all_rows)
        else pd.DataFrame()
    )
    fig.suptitle(header(campaign, spec, rows), fontsize=9)
    panel_in = PANEL_IN + (BARS_EXTRA_IN if any(p.kind == "bars" for p in spec.panels) else 0.0)
    heights = [h for e in entries for h in (panel_in, LEGEND_ROW_IN * max(e, 1))]
    heights.append(0.14 * (text.count("\n") + 1) if text else 0.05)
    grid.set_height_ratios(heights)
    fig.set_size_inches(FIGSIZE[0], sum(heights) + 0.6)
    return fig


def plot_paper_figure(
    summary: pd.DataFrame,
    records: pd.DataFrame,
    campaign: str,
    fig_id: str,
    outputs: Sequence[str | Path],
    beside: pd.DataFrame | None = None,
) -> None:
    save(draw_paper_figure(summary, records, campaign, fig_id, beside), outputs)
