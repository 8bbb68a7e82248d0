"""Figures of each experiment (every metric against its sweep, one figure per experiment and
campaign) and one comparison figure per experiment across campaigns; PNG and SVG. The paper's
figures, in the paper's form, are drawn by gicomm.paper_figures.

Every figure states its units, the SM clock it ran at and the NIC backend (and its kind: software
NIC, emulated NIC, real NIC), and says plainly when its experiment was not measured and why: a
figure is always produced, so the report has no hole. Values are medians over independent process
runs; bands and whiskers span min..max over runs.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from gicomm import CONFIG_DIR  # noqa: E402
from gicomm.columns import param_column, param_columns, param_name  # noqa: E402
from gicomm.labels import KIND_NOTE, clock_text, display_unit, nic_kind  # noqa: E402
from gicomm.status import why_not_measured  # noqa: E402
from gicomm.yamlio import load_yaml  # noqa: E402

PlotFn = Callable[[pd.DataFrame, dict, plt.Figure], None]
PLOTS: dict[str, PlotFn] = {}  # per-experiment figure overrides (default: generic_plot)
FIGSIZE = (11.5, 4.8)

sns.set_theme(style="whitegrid", context="notebook")
matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text (searchable, accessible)


# ---- shared helpers ---------------------------------------------------------------------------
def figure_spec(experiment: str) -> dict:
    path = CONFIG_DIR / "experiments" / f"{experiment}.yaml"
    return (load_yaml(path) or {}).get("figure", {}) if path.exists() else {}


def clock_label(df: pd.DataFrame) -> str:
    text = clock_text(df["sm_clock_mhz"] if "sm_clock_mhz" in df else pd.Series(dtype=float))
    return text if text.startswith("SM clock") else f"SM clock {text}"


def backend_label(df: pd.DataFrame) -> str:
    """'NIC backend: softnic-gpu (software NIC: model numbers, not real-NIC numbers)'."""
    provider = df["rdma_provider"] if "rdma_provider" in df else pd.Series(None, index=df.index)
    rows = zip(df["nic_backend"], provider, strict=True)
    pairs = sorted({(str(b), nic_kind(b, p)) for b, p in rows if pd.notna(b)})
    text = ", ".join(f"{b} ({KIND_NOTE[k]})" for b, k in pairs) or "n/a"
    return f"NIC backend: {text}"


def subtitle(df: pd.DataFrame) -> str:
    hosts = ", ".join(sorted(df["host"].dropna().astype(str).unique()))
    return f"host {hosts} | {backend_label(df)} | {clock_label(df)}"


def display(d: pd.DataFrame) -> pd.DataFrame:
    """Add value/lo/hi/disp_unit columns: p50 with min..max over runs, in display units."""
    d = d.copy()
    scale = d["unit"].map(lambda u: display_unit(u)[1]).astype(float)
    d["disp_unit"] = d["unit"].map(lambda u: display_unit(u)[0])
    lo = d["p50_min"] if "p50_min" in d else d["p50"]
    hi = d["p50_max"] if "p50_max" in d else d["p50"]
    d["value"], d["lo"], d["hi"] = d["p50"] * scale, lo * scale, hi * scale
    if "p99" in d:
        d["value_p99"] = d["p99"] * scale
    return d


def find_param(d: pd.DataFrame, *names: str) -> str | None:
    """The first of `names` that is a swept parameter of `d` (as a param_ column)."""
    for n in names:
        col = param_column(n)
        if col in d and d[col].notna().any():
            return col
    return None


def varying_params(d: pd.DataFrame, exclude: Sequence[str] = ()) -> list[str]:
    """Swept parameters that vary in `d` (observed values excluded)."""
    return [c for c in param_columns(d) if c not in exclude and d[c].nunique(dropna=True) > 1]


def series_labels(d: pd.DataFrame, exclude: Sequence[str] = ()) -> pd.Series:
    """One label per curve: transport, backend (if several) and every other varying parameter."""
    cols = ["transport"]
    if d["nic_backend"].nunique() > 1:
        cols.append("nic_backend")
    states = "cpu_clock_state" in d and d["cpu_clock_state"].nunique() > 1
    if states and param_column("state") not in d:  # the proxy driver's state param says the same
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
            name = param_name(c)
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
    ax.set_xlabel(param_name(x))
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
        fixed.append(f"{param_name(col)}={value}")
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
        dm, note = focus(dm, x, [c for c in (param_column(k) for k in keep) if c in dm])
        if numeric and dm[x].nunique() >= 2:
            lines(ax, dm, x, logx=logx, logy=logy)
        else:
            bars(ax, dm)
        ylabel(ax, dm, metric)
        if col is not None:
            ax.set_title(f"{metric}, {param_name(col)}={value}", fontsize=10)
        if note:
            ax.text(0.99, 0.01, note, transform=ax.transAxes, ha="right", va="bottom",
                    fontsize=6, color="gray")  # fmt: skip
    return list(axes)


# ---- drawing and saving -----------------------------------------------------------------------
def status_text(records: pd.DataFrame, experiment: str) -> str:
    why = why_not_measured(records, [experiment]) or "no measured value of any metric"
    head, _, rest = why.partition(": ")
    return f"{experiment}: {head}\n\n" + "\n".join(textwrap.wrap(rest, 90))


def save(fig: plt.Figure, outputs: Sequence[str | Path]) -> None:
    for out in outputs:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=110)
    plt.close(fig)


def message_figure(fig: plt.Figure, text: str) -> None:
    ax = fig.subplots()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=10)


def generic_plot(df: pd.DataFrame, spec: dict, fig: plt.Figure) -> None:
    """p50 of each metric against the swept parameter (from a summary table); the experiment's
    `figure` spec names x, the metric shown first (y), the hue and a column split (kept varying)."""
    x = [spec["x"]] if spec.get("x") else []
    first = [spec["y"]] if spec.get("y") else []
    keep = [k for k in (spec.get("hue"), spec.get("col")) if k]
    metric_panels(fig, df, first + sorted(df["metric"].unique()), x, keep=keep,
                  logx=bool(spec.get("logx")), logy=bool(spec.get("logy")),
                  split=spec.get("col"))  # fmt: skip


def with_overhead(d: pd.DataFrame) -> pd.DataFrame:
    """`d` plus, for each latency with a same-run floor (summary column overhead_ns), a metric
    `<metric>_over_floor` holding the overhead above that floor, so the figure shows it beside
    the latency."""
    if "overhead_ns" not in d:
        return d
    over = pd.to_numeric(d["overhead_ns"], errors="coerce")
    o = d[over.notna()].copy()
    if o.empty:
        return d
    o["metric"] = o["metric"] + "_over_floor"
    o["unit"] = "ns"
    for c in ("p50", "p50_min", "p50_max"):
        o[c] = over[over.notna()]
    for c in ("p50_ci_lo", "p50_ci_hi", "p99", "p99_min", "p99_max"):
        if c in o:
            o[c] = float("nan")
    return pd.concat([d, o], ignore_index=True)


def plot_experiment(
    summary: pd.DataFrame,
    records: pd.DataFrame,
    campaign: str,
    experiment: str,
    outputs: Sequence[str | Path],
) -> None:
    """The experiment's own figure: every metric against its swept parameter."""
    d = summary[summary["experiment"] == experiment] if not summary.empty else summary
    d = with_overhead(d)
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
