"""Figures: one seaborn figure per paper figure (3 to 11) and per experiment, per campaign; and
one comparison figure per experiment across campaigns. PNG and SVG.

Every figure states its units, the SM clock it ran at and the NIC backend, and says plainly when
its experiment was not measured and why: a figure is always produced, so the report has no hole.
Values are medians over independent process runs; bands and whiskers span min..max over runs.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from gicomm import CONFIG_DIR  # noqa: E402
from gicomm.aggregate import param_columns  # noqa: E402
from gicomm.fits import CLOCK_PARAMS, clock_fit, plateau_power_fit  # noqa: E402
from gicomm.paper import experiment_names  # noqa: E402
from gicomm.yamlio import load_yaml  # noqa: E402

PlotFn = Callable[[pd.DataFrame, dict, plt.Figure], None]
PLOTS: dict[str, PlotFn] = {}  # per-experiment figure overrides (default: generic_plot)
DISPLAY_UNIT = {"ns": ("us", 1e-3)}  # latencies are shown in microseconds, as in the paper
FIGSIZE = (11.5, 4.8)

sns.set_theme(style="whitegrid", context="notebook")
matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text (searchable, accessible)


# ---- shared helpers ---------------------------------------------------------------------------
def figure_spec(experiment: str) -> dict:
    path = CONFIG_DIR / "experiments" / f"{experiment}.yaml"
    return (load_yaml(path) or {}).get("figure", {}) if path.exists() else {}


def clock_label(df: pd.DataFrame) -> str:
    clocks = pd.to_numeric(df.get("sm_clock_mhz"), errors="coerce").dropna()
    if clocks.empty:
        return "SM clock: n/a (no GPU in this measurement)"
    lo, hi = clocks.min(), clocks.max()
    return f"SM clock {lo:.0f} MHz" if hi - lo < 1 else f"SM clock {lo:.0f}-{hi:.0f} MHz"


def backend_label(df: pd.DataFrame) -> str:
    backends = sorted(df["nic_backend"].dropna().astype(str).unique())
    text = ", ".join(backends) or "n/a"
    if any(b.startswith("softnic") for b in backends):
        text += " (software NIC: model numbers, not real-NIC numbers)"
    return f"NIC backend: {text}"


def subtitle(df: pd.DataFrame) -> str:
    hosts = ", ".join(sorted(df["host"].dropna().astype(str).unique()))
    return f"host {hosts} | {backend_label(df)} | {clock_label(df)}"


def display(d: pd.DataFrame) -> pd.DataFrame:
    """Add value/lo/hi/disp_unit columns: p50 with min..max over runs, in display units."""
    d = d.copy()
    scale = d["unit"].map(lambda u: DISPLAY_UNIT.get(str(u), (str(u), 1.0))[1]).astype(float)
    d["disp_unit"] = d["unit"].map(lambda u: DISPLAY_UNIT.get(str(u), (str(u), 1.0))[0])
    lo = d["p50_min"] if "p50_min" in d else d["p50"]
    hi = d["p50_max"] if "p50_max" in d else d["p50"]
    d["value"], d["lo"], d["hi"] = d["p50"] * scale, lo * scale, hi * scale
    if "p99" in d:
        d["value_p99"] = d["p99"] * scale
    return d


def find_param(d: pd.DataFrame, *names: str) -> str | None:
    """The first of `names` that is a swept parameter of `d` (as a param_ column)."""
    for n in names:
        col = f"param_{n}"
        if col in d and d[col].notna().any():
            return col
    return None


SHADOW_PARAMS = ("param_transport", "param_nic_backend")  # drivers may echo ids as params


def varying_params(d: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """Swept parameters that vary in `d` (ids echoed as params and observed values excluded)."""
    return [
        c
        for c in param_columns(d)
        if c not in exclude and c not in SHADOW_PARAMS and d[c].nunique(dropna=True) > 1
    ]


def series_labels(d: pd.DataFrame, exclude: Sequence[str] = ()) -> pd.Series:
    """One label per curve: transport, backend (if several) and every other varying parameter."""
    cols = ["transport"]
    if d["nic_backend"].nunique() > 1:
        cols.append("nic_backend")
    states = "cpu_clock_state" in d and d["cpu_clock_state"].nunique() > 1
    if states and "param_state" not in d:  # the proxy driver's state param says the same
        cols.append("cpu_clock_state")
    cols += varying_params(d, exclude)
    if "host" in d and d["host"].nunique() > 1:
        cols.append("host")

    def label(row: pd.Series) -> str:
        parts = []
        for c in cols:
            v = row[c]
            if pd.isna(v):
                continue
            name = c.removeprefix("param_")
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            parts.append(str(v) if c in ("transport", "nic_backend", "host") else f"{name}={v}")
        return " ".join(parts)

    return d.apply(label, axis=1) if not d.empty else pd.Series(dtype=str)


def lines(ax: plt.Axes, d: pd.DataFrame, x: str, *, logx: bool = False, logy: bool = False) -> None:
    """p50 against x, one curve per series, with the min..max band over runs."""
    d = d.copy()
    d["series"] = series_labels(d, exclude=[x])
    d[x] = pd.to_numeric(d[x], errors="coerce")
    d = d.dropna(subset=[x]).sort_values(x)
    order = sorted(d["series"].unique())
    palette = dict(zip(order, sns.color_palette(n_colors=max(len(order), 1)), strict=False))
    sns.lineplot(
        data=d, x=x, y="value", hue="series", hue_order=order, palette=palette,
        marker="o", errorbar=None, ax=ax,
    )  # fmt: skip
    for s, g in d.groupby("series"):
        ax.fill_between(g[x], g["lo"], g["hi"], color=palette[s], alpha=0.2, linewidth=0)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(x.removeprefix("param_"))
    _legend(ax)


def bars(ax: plt.Axes, d: pd.DataFrame, category: str | None = None) -> None:
    """p50 per configuration (transport and varying parameters, or `category`), one hue per NIC
    backend; whiskers span min..max over runs (the median of lo/p50/hi is the p50 itself)."""
    d = d.copy()
    labels = d[category].astype(str) if category else series_labels(d.assign(nic_backend=""))
    d["config"] = labels.map(lambda t: textwrap.fill(t, 28))
    long = d.melt(
        id_vars=["config", "nic_backend"], value_vars=["lo", "value", "hi"], value_name="y"
    )
    hue = "nic_backend" if d["nic_backend"].nunique() > 1 else None
    sns.barplot(data=long, x="y", y="config", hue=hue, estimator="median", orient="h",
                errorbar=("pi", 100), ax=ax, err_kws={"linewidth": 1})  # fmt: skip
    ax.set_ylabel("")
    ax._gicomm_horizontal = True  # values run along x: ylabel() labels that axis
    ax.tick_params(axis="y", labelsize=8)
    _legend(ax)


def _legend(ax: plt.Axes) -> None:
    if ax.get_legend() is not None:
        ax.legend(fontsize=7, title=None, loc="best")


def ylabel(ax: plt.Axes, d: pd.DataFrame, metric: str, stat: str = "p50") -> None:
    """Label the value axis with metric, statistic and unit (x for horizontal bars)."""
    unit = d["disp_unit"].iloc[0] if not d.empty else ""
    text = f"{stat} [{unit}]"  # the panel's title names the metric
    if getattr(ax, "_gicomm_horizontal", False):
        ax.set_xlabel(text)
    else:
        ax.set_ylabel(text)
    ax.set_title(metric, fontsize=10)


def panel_grid(fig: plt.Figure, n: int, ncols: int = 3) -> list[plt.Axes]:
    """n panels, at most `ncols` per row; the figure grows with the rows."""
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    fig.set_size_inches(FIGSIZE[0], 1.0 + 3.8 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[n:]:
        ax.axis("off")
    return list(axes[:n])


MAX_SERIES = 8  # more curves or bars than this in one panel: fix the other parameters


def focus(
    d: pd.DataFrame, x: str | None, keep: Sequence[str] = (), max_series: int = MAX_SERIES
) -> tuple[pd.DataFrame, str]:
    """At most `max_series` curves or bars against x: the parameters in `keep` (the hue) keep
    varying; every other varying parameter is fixed at its first value, said in the note."""
    free = [c for c in (x, *keep) if c]
    fixed = []
    for col in varying_params(d, exclude=free):
        if series_labels(d, exclude=[x] if x else []).nunique() <= max_series:
            break
        counts = d[col].dropna().value_counts()  # keep the value with the most points
        value = sorted(counts.index, key=lambda v: (-counts[v], _sort_key(v)))[0]
        d = d[d[col] == value]
        fixed.append(f"{col.removeprefix('param_')}={value}")
    return d, ("others fixed at " + ", ".join(fixed)) if fixed else ""


def _sort_key(v: object) -> tuple[int, float, str]:
    try:
        return (0, float(v), "")  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def metric_panels(
    fig: plt.Figure,
    d: pd.DataFrame,
    metrics: Sequence[str],
    x_names: Sequence[str],
    *,
    logx: bool = False,
    logy: bool = False,
    keep: Sequence[str] = (),
    only: bool = False,
    split: str | None = None,
) -> list[plt.Axes]:
    """One panel per metric present (in the given order, then, unless `only`, any other measured
    metric), and per value of the `split` parameter when it varies. `keep`: parameters that may
    vary as curves besides x (the others get fixed, see focus)."""
    present = list(dict.fromkeys(m for m in metrics if m in set(d["metric"])))
    if not only or not present:
        present += sorted(set(d["metric"]) - set(present))
    col = find_param(d, split) if split else None
    splits: list[object] = sorted(d[col].dropna().unique(), key=_sort_key) if col else [None]
    if len(splits) < 2 or len(present) * len(splits) > 12:
        col, splits = None, [None]
    panels = [(m, v) for m in present for v in splits]
    axes = panel_grid(fig, len(panels), ncols=3 if col is None else max(2, len(splits)))
    for ax, (metric, value) in zip(axes, panels, strict=True):
        dm = d[d["metric"] == metric]
        dm = display(dm if col is None else dm[dm[col] == value])
        x = find_param(dm, *x_names) or (varying_params(dm) or [None])[0]
        numeric = x is not None and pd.to_numeric(dm[x], errors="coerce").notna().all()
        dm, note = focus(dm, x, [c for c in (f"param_{k}" for k in keep) if c in dm])
        if numeric and dm[x].nunique() >= 2:
            lines(ax, dm, x, logx=logx, logy=logy)
        else:
            bars(ax, dm)
        ylabel(ax, dm, metric)
        if col is not None:
            ax.set_title(f"{metric}, {col.removeprefix('param_')}={value}", fontsize=10)
        if note:
            ax.text(0.99, 0.01, note, transform=ax.transAxes, ha="right", va="bottom",
                    fontsize=6, color="gray")  # fmt: skip
    return list(axes)


# ---- one function per paper figure --------------------------------------------------------------
def fig03_inline_payload(d: pd.DataFrame, fig: plt.Figure) -> None:
    """Issue and put+completion against inline size; message rate at 16 QPs x 16 WQEs/doorbell."""
    metric_panels(fig, d, ["issue_ns", "completion_ns", "msg_rate"], ["size", "inline_bytes"])


def fig04_completion_scope(d: pd.DataFrame, fig: plt.Figure) -> None:
    """Put+completion against QPs per peer, all-QP against used-QP quiet."""
    metric_panels(fig, d, ["completion_ns", "rtt_ns"], ["qps_per_peer", "qps"], logx=True)


def fig05_sm_clock(d: pd.DataFrame, fig: plt.Figure) -> None:
    """Issue and completion time against 1/f with the least-squares fit T = C/f + B."""
    metrics = [m for m in ("issue_ns", "completion_ns") if m in set(d["metric"])]
    metrics += sorted(set(d["metric"]) - set(metrics))
    axes = panel_grid(fig, len(metrics))
    for ax, metric in zip(axes, metrics, strict=True):
        dm = display(d[d["metric"] == metric])
        dm["series"] = series_labels(dm, exclude=[f"param_{n}" for n in CLOCK_PARAMS])
        dm["inv_f"] = 1000.0 / dm["sm_clock_mhz"]  # 1/GHz
        sns.scatterplot(data=dm, x="inv_f", y="value", hue="series", ax=ax)
        for s, g in dm.groupby("series"):
            fit = clock_fit(g["sm_clock_mhz"], g["p50"])
            if fit is None:
                continue
            xs = np.linspace(g["inv_f"].min(), g["inv_f"].max(), 20)
            scale = float(g["value"].iloc[0] / g["p50"].iloc[0]) if g["p50"].iloc[0] else 1.0
            ax.plot(xs, (fit.c_cycles * xs + fit.b_ns) * scale, "--", linewidth=1)
            ax.annotate(
                f"{s}: C={fit.c_cycles:.0f} cyc, B={fit.b_ns / 1000:.2f} us, R2={fit.r2:.3f}",
                xy=(0.02, 0.95 - 0.07 * list(dm["series"].unique()).index(s)),
                xycoords="axes fraction", fontsize=7,
            )  # fmt: skip
        ax.set_xlabel("1 / SM clock [1/GHz]")
        ylabel(ax, dm, metric)
        _legend(ax)


def fig06_loaded_rtt(d: pd.DataFrame, fig: plt.Figure) -> None:
    """RTT p50 against background CTAs, shared against reserved queue; load carried."""
    metric_panels(fig, d, ["rtt_ns", "bulk_msg_rate", "msg_rate"],
                  ["bulk_ctas", "bg_ctas", "background_ctas"], logy=True,
                  keep=["queue", "pace_mmsgs"])  # fmt: skip


def fig07_proxy_msgrate(d: pd.DataFrame, fig: plt.Figure) -> None:
    """Proxy message rate against batch per post, per worker count, cold and warm cores."""
    metric_panels(fig, d, ["msg_rate"], ["batch"], logx=True, keep=["workers", "state"],
                  only=True)  # fmt: skip


GOODPUT_METRICS = ["goodput_gbps", "goodput"]


def fig08_goodput(d: pd.DataFrame, fig: plt.Figure) -> None:
    """Pipelined goodput against payload size."""
    ctas = find_param(d, "ctas", "producer_ctas")
    if ctas is not None:  # Fig. 8 is the full producer count; Fig. 11 shrinks it
        d = d[pd.to_numeric(d[ctas], errors="coerce") == pd.to_numeric(d[ctas]).max()]
    axes = metric_panels(fig, d, GOODPUT_METRICS, ["size"], logx=True, keep=["transport"])
    for ax in axes:
        if ax.get_title() in GOODPUT_METRICS:
            ax.text(0.02, 0.02, "paper: 90% of 24.8 GB/s on P-IB", transform=ax.transAxes,
                    fontsize=7, color="gray")  # fmt: skip


def fig09_kernel_cost(d: pd.DataFrame, fig: plt.Figure) -> None:
    """Useful-throughput loss of the enclosing kernel against live values, per call-site mode
    and transport; registers per thread with and without the communication code."""
    loss = d[d["metric"].isin(["throughput_loss_pct"])]
    regs = d[d["metric"].isin(["registers", "registers_absent", "registers_base"])]
    if loss.empty and regs.empty:
        metric_panels(fig, d, [], [])
        return
    callers = sorted(loss["param_caller"].dropna().unique()) if "param_caller" in loss else []
    panels = (callers or [None]) if not loss.empty else []
    axes = panel_grid(fig, len(panels) + (0 if regs.empty else 1))
    for ax, caller in zip(axes, panels, strict=False):
        dm = display(loss if caller is None else loss[loss["param_caller"] == caller])
        x = find_param(dm, "live") or (varying_params(dm) or [None])[0]
        dm, note = focus(dm, x, ["param_mode"])
        if x and dm[x].nunique() >= 2:
            lines(ax, dm, x)
        else:
            bars(ax, dm)
        ylabel(ax, dm, "throughput_loss_pct")
        ax.set_title(f"useful-throughput loss, {caller or 'caller'} caller", fontsize=10)
        if note:
            ax.text(0.99, 0.01, note, transform=ax.transAxes, ha="right", fontsize=6, color="gray")
    if not regs.empty:
        ax = axes[-1]
        dm = display(regs)
        live = find_param(dm, "live")
        if live is not None:
            dm = dm[dm[live] == dm[live].min()]
        dm = dm.assign(metric_name=dm["metric"])
        dm, note = focus(dm, None, ["param_mode"], max_series=12)
        dm = dm.assign(transport=dm["transport"] + " " + dm["metric_name"])
        bars(ax, dm)
        ylabel(ax, dm, "registers")
        title = f" (live={dm[live].min():g})" if live else ""
        ax.set_title("registers per thread" + title, fontsize=10)


def fig10_connection_scaling(d: pd.DataFrame, fig: plt.Figure) -> None:
    """Message rate against active connections, with the plateau-plus-power-law fit."""
    axes = metric_panels(
        fig, d, ["msg_rate", *GOODPUT_METRICS], ["active_qps", "connections"], logx=True
    )
    x = find_param(d, "active_qps", "connections")
    if x is None:
        return
    for ax in axes:
        dm = display(d[d["metric"] == ax.get_title()])
        dm["series"] = series_labels(dm, exclude=[x])
        for i, (s, g) in enumerate(dm.groupby("series")):
            fit = plateau_power_fit(pd.to_numeric(g[x], errors="coerce"), g["value"])
            if fit is None:
                continue
            xs = np.geomspace(float(g[x].min()), float(g[x].max()), 50)
            ax.plot(xs, fit.predict(xs), ":", color="black", linewidth=1)
            ax.annotate(
                f"{s}: plateau {fit.plateau:.3g}, onset {fit.onset:g}, a={fit.exponent:.2f}",
                xy=(0.02, 0.05 + 0.07 * i), xycoords="axes fraction", fontsize=7,
            )  # fmt: skip


def fig11_goodput_producers(d: pd.DataFrame, fig: plt.Figure) -> None:
    """Goodput against size as producer CTAs shrink (16 to 1), and single-op latency."""
    metric_panels(fig, d, [*GOODPUT_METRICS, "completion_ns", "rtt_ns"], ["size"], logx=True,
                  keep=["ctas", "producer_ctas"])  # fmt: skip


@dataclass(frozen=True)
class PaperFigure:
    fig_id: str
    paper_ref: str
    experiment: str
    title: str
    draw: Callable[[pd.DataFrame, plt.Figure], None]


_FIGURES = [
    ("fig03", "Figure 3", "inline_payload", "Inline against pointer payload", fig03_inline_payload),
    ("fig04", "Figure 4", "completion_scope", "Completion scope", fig04_completion_scope),
    ("fig05", "Figure 5", "sm_clock", "SM-clock sensitivity", fig05_sm_clock),
    ("fig06", "Figure 6", "loaded_rtt", "Round trip under load", fig06_loaded_rtt),
    ("fig07", "Figure 7", "proxy_msgrate", "Proxy message rate", fig07_proxy_msgrate),
    ("fig08", "Figure 8", "goodput", "Pipelined goodput against payload", fig08_goodput),
    ("fig09", "Figure 9", "kernel_cost", "Cost to the enclosing kernel", fig09_kernel_cost),
    ("fig10", "Figure 10", "connection_scaling", "NIC active-connection scaling",
     fig10_connection_scaling),
    ("fig11", "Figure 11", "goodput", "Goodput as producer CTAs shrink", fig11_goodput_producers),
]  # fmt: skip
PAPER_FIGURES: dict[str, PaperFigure] = {f[0]: PaperFigure(*f) for f in _FIGURES}


# ---- drawing and saving -----------------------------------------------------------------------
def status_text(records: pd.DataFrame, experiment: str) -> str:
    d = records[records["experiment"] == experiment] if not records.empty else records
    if d.empty:
        return (
            f"{experiment}: not measured in this campaign\n(no records: the experiment was not "
            "run here, or is not part of this campaign)"
        )
    reasons = d["error"].dropna().astype(str).value_counts()
    lines_ = [f"{r} ({n} records)" for r, n in reasons.head(6).items()]
    status = "not runnable here" if set(d["status"]) == {"skipped"} else "not measured"
    return f"{experiment}: {status}\n\n" + "\n".join(lines_)


def save(fig: plt.Figure, outputs: Sequence[str | Path]) -> None:
    for out in outputs:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=110)
    plt.close(fig)


def message_figure(fig: plt.Figure, text: str) -> None:
    ax = fig.subplots()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=10)


def plot_paper_figure(
    summary: pd.DataFrame,
    records: pd.DataFrame,
    campaign: str,
    fig_id: str,
    outputs: Sequence[str | Path],
) -> None:
    spec = PAPER_FIGURES[fig_id]
    names = experiment_names(spec.experiment)
    d = summary[summary["experiment"].isin(names)] if not summary.empty else summary
    fig = plt.figure(figsize=FIGSIZE, layout="constrained")
    measured = sorted(set(d["experiment"])) if not d.empty else [spec.experiment]
    head = f"{campaign} / {spec.paper_ref}: {spec.title} ({', '.join(measured)})"
    if d.empty:
        message_figure(fig, status_text(records, spec.experiment))
        fig.suptitle(head, fontsize=10)
    else:
        spec.draw(d, fig)
        fig.suptitle(f"{head}\n{subtitle(d)}", fontsize=9)
    save(fig, outputs)


def generic_plot(df: pd.DataFrame, spec: dict, fig: plt.Figure) -> None:
    """p50 of each metric against the swept parameter (from a summary table); the experiment's
    `figure` spec names x, the metric shown first (y), the hue and a column split (kept varying)."""
    x = [spec["x"]] if spec.get("x") else []
    first = [spec["y"]] if spec.get("y") else []
    keep = [k for k in (spec.get("hue"), spec.get("col")) if k]
    metric_panels(fig, df, first + sorted(df["metric"].unique()), x, keep=keep,
                  logx=bool(spec.get("logx")), logy=bool(spec.get("logy")),
                  split=spec.get("col"))  # fmt: skip


def plot_experiment(
    summary: pd.DataFrame,
    records: pd.DataFrame,
    campaign: str,
    experiment: str,
    outputs: Sequence[str | Path],
) -> None:
    """The experiment's own figure: every metric against its swept parameter."""
    d = summary[summary["experiment"] == experiment] if not summary.empty else summary
    fig = plt.figure(figsize=FIGSIZE, layout="constrained")
    if d.empty:
        message_figure(fig, status_text(records, experiment))
        fig.suptitle(f"{campaign} / {experiment}")
    else:
        PLOTS.get(experiment, generic_plot)(d, figure_spec(experiment), fig)
        fig.suptitle(f"{campaign} / {experiment}\n{subtitle(d)}", fontsize=9)
    save(fig, outputs)


def plot_comparison(summary: pd.DataFrame, experiment: str, outputs: Sequence[str | Path]) -> None:
    """Across campaigns: p50 of each metric per sweep point, one hue per campaign, platform and
    NIC backend (platform against platform, software NIC against real NIC)."""
    d = summary[summary["experiment"] == experiment] if not summary.empty else summary
    fig = plt.figure(figsize=(FIGSIZE[0], 5.5), layout="constrained")
    if d.empty:
        message_figure(fig, f"{experiment}: no campaign measured it")
        fig.suptitle(f"across campaigns / {experiment}")
        save(fig, outputs)
        return
    d = display(d)
    d["where"] = d["campaign"] + " · " + d["platform"].astype(str) + " · " + d["nic_backend"]
    d["point"] = series_labels(d.assign(nic_backend="", host=""), exclude=[]).str.slice(0, 40)
    metrics = sorted(d["metric"].unique())
    axes = panel_grid(fig, len(metrics))
    for ax, metric in zip(axes, metrics, strict=True):
        dm = d[d["metric"] == metric]
        keep = dm["point"].drop_duplicates().head(24)
        dm = dm[dm["point"].isin(keep)]
        dodge = 0.3 if dm["where"].nunique() > 1 else False
        sns.pointplot(data=dm, x="point", y="value", hue="where", linestyle="none",
                      dodge=dodge, errorbar=None, ax=ax)  # fmt: skip
        ax.tick_params(axis="x", rotation=60, labelsize=7)
        ax.set_xlabel("")
        ylabel(ax, dm, metric)
        _legend(ax)
    fig.suptitle(
        f"across campaigns / {experiment} | {clock_label(d)} | software-NIC rows are model numbers",
        fontsize=9,
    )
    save(fig, outputs)
