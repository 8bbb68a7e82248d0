"""Figures: one seaborn figure per experiment and campaign, PNG and SVG.

Every figure states its units, the SM clock it ran at and the NIC backend, and says plainly when an
experiment was not measured and why (a figure is always produced, so the report never has a hole).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from gicomm import CONFIG_DIR  # noqa: E402
from gicomm.yamlio import load_yaml  # noqa: E402

PlotFn = Callable[[pd.DataFrame, dict, plt.Figure], None]
PLOTS: dict[str, PlotFn] = {}


def figure_spec(experiment: str) -> dict:
    path = CONFIG_DIR / "experiments" / f"{experiment}.yaml"
    return (load_yaml(path) or {}).get("figure", {}) if path.exists() else {}


def clock_label(df: pd.DataFrame) -> str:
    clocks = df["sm_clock_mhz"].dropna()
    if clocks.empty:
        return "SM clock: n/a (no GPU in this measurement)"
    lo, hi = clocks.min(), clocks.max()
    return f"SM clock {lo:.0f} MHz" if hi - lo < 1 else f"SM clock {lo:.0f}-{hi:.0f} MHz"


def subtitle(df: pd.DataFrame) -> str:
    backends = ", ".join(sorted(df["nic_backend"].dropna().astype(str).unique())) or "n/a"
    hosts = ", ".join(sorted(df["host"].dropna().astype(str).unique()))
    softnic = (
        " (software NIC: model numbers, not real-NIC numbers)" if "softnic" in backends else ""
    )
    return f"host {hosts} | NIC backend: {backends}{softnic} | {clock_label(df)}"


def default_x(df: pd.DataFrame, spec: dict) -> str | None:
    if spec.get("x") and f"param_{spec['x']}" in df:
        return f"param_{spec['x']}"
    varying = [c for c in df.columns if c.startswith("param_") and df[c].nunique(dropna=True) > 1]
    return varying[0] if varying else None


def generic_plot(df: pd.DataFrame, spec: dict, fig: plt.Figure) -> None:
    """p50 (with p99 whiskers where present) of each metric against the swept parameter."""
    metrics = sorted(df["metric"].unique())
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    x = default_x(df, spec)
    hue = (
        f"param_{spec['hue']}" if spec.get("hue") and f"param_{spec['hue']}" in df else "transport"
    )
    for ax, metric in zip(axes, metrics, strict=True):
        d = df[df["metric"] == metric]
        unit = d["unit"].iloc[0] if not d.empty else ""
        if x is None:
            sns.barplot(data=d, x="transport", y="p50", hue=hue, ax=ax, errorbar=None)
        else:
            sns.lineplot(data=d, x=x, y="p50", hue=hue, marker="o", ax=ax, errorbar=("pi", 100))
            ax.set_xlabel(x.removeprefix("param_"))
            if spec.get("logx"):
                ax.set_xscale("log", base=2)
        if spec.get("logy"):
            ax.set_yscale("log")
        ax.set_ylabel(f"{metric} p50 [{unit}]")
        ax.set_title(metric)


def status_panel(df: pd.DataFrame, fig: plt.Figure) -> None:
    ax = fig.subplots()
    ax.axis("off")
    if df.empty:
        text = "no records for this experiment in this campaign"
    else:
        reasons = df["error"].dropna().astype(str).value_counts()
        lines = [f"{df['status'].iloc[0]}: {r} ({n} records)" for r, n in reasons.head(6).items()]
        text = "not measured here\n\n" + "\n".join(lines)
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=10)


def plot_experiment(
    df: pd.DataFrame, campaign: str, experiment: str, outputs: Sequence[str | Path]
) -> None:
    d = df[df["experiment"] == experiment]
    ok = d[d["status"] == "ok"]
    fig = plt.figure(figsize=(11, 4.8), layout="constrained")
    if ok.empty:
        status_panel(d, fig)
        fig.suptitle(f"{campaign} / {experiment}")
    else:
        PLOTS.get(experiment, generic_plot)(ok, figure_spec(experiment), fig)
        fig.suptitle(f"{campaign} / {experiment}\n{subtitle(ok)}", fontsize=10)
    for out in outputs:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=110)
    plt.close(fig)
