"""Figures of the performance model for a campaign's report: predicted against the paper
(validation), predicted beside this campaign's measured points, and the platform's predicted
sweeps. PNG and SVG, one function per figure. Reads the model stage's CSVs only (no numba), so the
report's environment draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import NullFormatter

from gicomm.plots import FIGSIZE, message_figure, save

# beside_measured metrics, in the units they are shown in
_SHOWN = {
    "issue_ns": ("issue", "us", 1e-3),
    "completion_ns": ("put+completion", "us", 1e-3),
    "rtt_ns": ("round trip", "us", 1e-3),
    "msg_rate": ("message rate", "Mmsg/s", 1.0),
}


def plot_validation(validation: pd.DataFrame, outputs: Sequence[str | Path]) -> None:
    """Predicted over paper for every headline and validation check, pass or fail."""
    d = validation[validation["role"].isin(["headline", "validation"])].copy()
    fig = plt.figure(figsize=(FIGSIZE[0], max(3.0, 0.42 * len(d) + 1.6)))
    if d.empty:
        message_figure(fig, "No validation checks.")
        save(fig, outputs)
        return
    d["ratio"] = pd.to_numeric(d["predicted"], errors="coerce") / pd.to_numeric(
        d["paper"], errors="coerce"
    )
    d["result"] = np.where(d["passed"].astype(str) == "True", "within tolerance", "outside")
    d["label"] = d["role"] + ": " + d["check"] + " (" + d["tolerance"].astype(str) + ")"
    ax = fig.subplots()
    sns.scatterplot(
        data=d, x="ratio", y="label", hue="result", style="role", s=90, ax=ax,
        palette={"within tolerance": "tab:green", "outside": "tab:red"},
    )  # fmt: skip
    ax.axvline(1.0, color="0.3", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("model / paper (log scale; 1 = the paper's number)")
    ax.set_ylabel("")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.set_title("Model (paper-only parameters) over the paper's number, per check", fontsize=10)
    fig.tight_layout()
    save(fig, outputs)


def plot_beside_measured(beside: pd.DataFrame, outputs: Sequence[str | Path]) -> None:
    """Measured p50 against the model's prediction at the same point, one panel per metric."""
    d = beside[beside["metric"].isin(list(_SHOWN))].copy()
    d = d[np.isfinite(pd.to_numeric(d["predicted"], errors="coerce"))]
    fig = plt.figure(figsize=FIGSIZE)
    if d.empty:
        message_figure(fig, "No measured point of this campaign is one the model represents.")
        save(fig, outputs)
        return
    metrics = [m for m in _SHOWN if m in set(d["metric"])]
    axes = np.atleast_1d(fig.subplots(1, len(metrics)))
    for ax, metric in zip(axes, metrics, strict=True):
        name, unit, scale = _SHOWN[metric]
        m = d[d["metric"] == metric].copy()
        m["measured"] = m["p50"] * scale
        m["model"] = m["predicted"] * scale
        sns.scatterplot(data=m, x="measured", y="model", hue="experiment", s=30, ax=ax)
        lo = float(np.nanmin(m[["measured", "model"]].to_numpy())) * 0.7
        hi = float(np.nanmax(m[["measured", "model"]].to_numpy())) * 1.4
        ax.plot([lo, hi], [lo, hi], color="0.3", lw=1)
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi))
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"measured {name} ({unit}, p50)")
        ax.set_ylabel(f"model ({unit})")
        ax.legend(fontsize=6, title=None)
    backends = ", ".join(sorted(d["nic_backend"].dropna().astype(str).unique()))
    fig.suptitle(
        "Model (parameters fitted from this campaign where it has them) beside the measured "
        f"points; NIC backend: {backends}",
        fontsize=10,
    )
    fig.tight_layout()
    save(fig, outputs)


def plot_predictions(predictions: pd.DataFrame, outputs: Sequence[str | Path]) -> None:
    """The platform's predicted sweeps: GPU message rate, loaded round trip, connection scaling."""
    fig = plt.figure(figsize=(FIGSIZE[0] * 1.3, FIGSIZE[1]))
    if predictions.empty:
        message_figure(fig, "No predictions.")
        save(fig, outputs)
        return
    ax_rate, ax_rtt, ax_conn = fig.subplots(1, 3)
    p = predictions
    rate = p[(p["sweep"] == "msg_rate") & (p["metric"] == "msg_rate")].copy()
    rate = rate[rate["qps"].isin([1, 64]) & rate["batch"].isin([1, 16])]
    qps, batch = rate["qps"].astype(int).astype(str), rate["batch"].astype(int).astype(str)
    rate["series"] = "QPs " + qps + ", batch " + batch
    sns.lineplot(data=rate, x="threads", y="value", hue="series", marker="o", ax=ax_rate)
    ax_rate.set(xscale="log", yscale="log", xlabel="threads", ylabel="Mmsg/s")
    ax_rate.set_title("mini-gda message rate", fontsize=10)
    rtt = p[(p["sweep"] == "loaded_rtt") & (p["metric"] == "rtt_p50")].copy()
    rtt["series"] = rtt["path"] + ", " + rtt["mode"]
    sns.lineplot(data=rtt, x="bg_ctas", y="value", hue="series", marker="o", ax=ax_rtt)
    ax_rtt.set(yscale="log", xlabel="background CTAs", ylabel="round trip p50 (us)")
    ax_rtt.set_title("round trip under load", fontsize=10)
    conn = p[(p["sweep"] == "connections") & (p["metric"] == "msg_rate")]
    sns.lineplot(data=conn, x="connections", y="value", hue="traffic", marker="o", ax=ax_conn)
    ax_conn.set(xscale="log", xlabel="active connections", ylabel="Mmsg/s", ylim=(0, None))
    ax_conn.set_title("NIC connection scaling", fontsize=10)
    for ax in (ax_rate, ax_rtt, ax_conn):
        ax.legend(fontsize=7, title=None)
    platform = ", ".join(sorted(p["platform"].dropna().astype(str).unique()))
    fig.suptitle(f"Model predictions for platform {platform}", fontsize=10)
    fig.tight_layout()
    save(fig, outputs)


# each figure: its plot function and the model CSV (results/<campaign>/model/<name>.csv) it draws
FIGURES = {
    "model_validation": (plot_validation, "validation"),
    "model_beside_measured": (plot_beside_measured, "beside_measured"),
    "model_predictions": (plot_predictions, "predictions"),
}
