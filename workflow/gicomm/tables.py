"""One table per paper table (3 to 16; Table 15 is qualitative and has none), per campaign.

Each table is this campaign's measurements in the shape of the paper's table (one row per
transport, backend and swept configuration, one column per metric: median p50 over runs, in the
paper's units), written as CSV, beside the paper's own numbers (report/paper/*.csv) in the report.
Table 6 is the clock fit T = C/f + B of every series measured at three or more SM clocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gicomm.aggregate import as_text, param_columns
from gicomm.claims import PAPER_DIR
from gicomm.paper import experiment_names
from gicomm.plots import display


@dataclass(frozen=True)
class PaperTable:
    tab_id: str
    paper_ref: str
    experiment: str
    paper_csv: str
    title: str
    metrics: tuple[str, ...] = ()  # empty: every metric of the experiment
    with_p99: bool = False


PAPER_TABLES: dict[str, PaperTable] = {
    t.tab_id: t
    for t in (
        PaperTable("tab03", "Table 3", "one_op", "table03_one_op_8B.csv",
                   "One 8 B operation: issue, put+completion, round trip", with_p99=True),
        PaperTable("tab04", "Table 4", "ordering", "table04_minigda_ordering.csv",
                   "mini-gda under each memory-ordering choice"),
        PaperTable("tab05", "Table 5", "gpu_msgrate", "table05_minigda_msgrate_8B_PIB.csv",
                   "GPU 8 B message rate against threads, QPs, SMs and WQEs per doorbell"),
        PaperTable("tab06", "Table 6", "sm_clock", "table06_smclock_fits_PRoCE.csv",
                   "Fits of T(f) = C/f + B against the SM clock"),
        PaperTable("tab07", "Table 7", "completion_scope", "table07_completion_scope_PRoCE.csv",
                   "Put+completion, all-QP against used-QP quiet"),
        PaperTable("tab08", "Table 8", "completion_scope", "table08_gb200_dci.csv",
                   "Put+completion against RC/DCI pool sizing"),
        PaperTable("tab09", "Table 9", "proxy_msgrate", "table09_proxy_cold_warm_latency_PIB.csv",
                   "Proxy latency with cold and warm CPU workers",
                   metrics=("completion_ns", "rtt_ns"), with_p99=True),
        PaperTable("tab10", "Table 10", "proxy_msgrate", "table10_proxy_capacity_PIB.csv",
                   "Proxy message rate, cold and warm", metrics=("msg_rate",)),
        PaperTable("tab11", "Table 11", "loaded_rtt", "table11_loaded_rtt_64CTAs.csv",
                   "RTT p50 under background CTAs, shared against reserved queue"),
        PaperTable("tab12", "Table 12", "goodput", "table12_gb200_goodput.csv",
                   "Goodput at 4 KiB and 64 KiB", metrics=("goodput",)),
        PaperTable("tab13", "Table 13", "gpu_msgrate", "table13_msgrate_controls.csv",
                   "Message-rate controls", metrics=("msg_rate",)),
        PaperTable("tab14", "Table 14", "kernel_cost", "table14_kernel_resources_PIB.csv",
                   "Registers per thread and waiting loss"),
        PaperTable("tab16", "Table 16", "connection_scaling", "table16_payload_controls_PH100.csv",
                   "Send-only against send+receive goodput", metrics=("goodput",)),
    )
}  # fmt: skip

FIT_COLUMNS = ["transport", "nic_backend", "metric", "series", "c_cycles", "b_us", "r2",
               "clocks", "clock_share_pct"]  # fmt: skip


def measured_table(summary: pd.DataFrame, spec: PaperTable, fits: pd.DataFrame) -> pd.DataFrame:
    """This campaign's numbers in the shape of the paper table (empty when not measured)."""
    if spec.tab_id == "tab06":
        return fit_table(fits)
    names = experiment_names(spec.experiment)
    d = summary[summary["experiment"].isin(names)] if not summary.empty else summary
    if spec.metrics:
        d = d[d["metric"].isin(spec.metrics)]
    if d.empty:
        return pd.DataFrame()
    d = display(d)
    d["column"] = d["metric"].str.removesuffix("_ns") + " p50 [" + d["disp_unit"] + "]"
    frames = [d[["column", "value"]]]
    if spec.with_p99 and "value_p99" in d:
        p99 = d[d["value_p99"].notna()].copy()
        p99["column"] = p99["metric"].str.removesuffix("_ns") + " p99 [" + p99["disp_unit"] + "]"
        frames.append(p99[["column", "value_p99"]].rename(columns={"value_p99": "value"}))
    index = ["experiment", "transport", "nic_backend"]
    if d["cpu_clock_state"].notna().any() and (d["cpu_clock_state"].astype(str) != "").any():
        index.append("cpu_clock_state")
    index += [c for c in param_columns(d) if d[c].notna().any()]
    long = pd.concat([d[index].join(f) for f in frames], ignore_index=True)
    long[index] = as_text(long[index])
    table = long.pivot_table(index=index, columns="column", values="value", aggfunc="median")
    table = table.reset_index()
    table.columns = [str(c).removeprefix("param_") for c in table.columns]
    return table


def fit_table(fits: pd.DataFrame) -> pd.DataFrame:
    if fits.empty:
        return pd.DataFrame()
    f = fits.copy()
    f["b_us"] = f["b_ns"] / 1000.0
    f["clock_share_pct"] = 100.0 * f["clock_share_at_max"]
    return f[FIT_COLUMNS]


def paper_table(spec: PaperTable, paper_dir: Path = PAPER_DIR) -> pd.DataFrame:
    return pd.read_csv(paper_dir / spec.paper_csv, dtype=str, keep_default_na=False)


def write_tables(
    summary: pd.DataFrame, fits: pd.DataFrame, out_dir: Path
) -> dict[str, pd.DataFrame]:
    """Write tables/<tab_id>.csv (this campaign; header only when not measured) for every table."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = {}
    for tab_id, spec in PAPER_TABLES.items():
        t = measured_table(summary, spec, fits)
        t.to_csv(out_dir / f"{tab_id}.csv", index=False)
        tables[tab_id] = t
    return tables
