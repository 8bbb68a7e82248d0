"""The NVLink dissection table: each library's cost split into the mechanism's share (what the
minimal direct store pays for the same operation on the same host) and the library's own share
(the rest), for every metric and point of the nvlink experiments.

Input: the campaign's summary table (gicomm.aggregate.summarize_runs; one row per point and metric
with the median of the per-run p50 over independent runs). Output: one row per (experiment,
library path, point, metric) with `mechanism`, `library` (= path - mechanism) and `library_pct` of
the path.
"""

from __future__ import annotations

import pandas as pd

MECHANISM = "direct-store"
EXPERIMENTS = ("nvlink_dissection", "nvlink_put_size")
KEY = ["campaign", "host", "experiment", "nic_backend", "param_op", "param_size", "metric", "unit"]


def dissect(summary: pd.DataFrame) -> pd.DataFrame:
    df = summary[summary["experiment"].isin(EXPERIMENTS)]
    cols = [*KEY, "transport", "p50", "runs", "sm_clock_mhz"]
    if df.empty or any(c not in df.columns for c in cols):
        return pd.DataFrame(columns=[*KEY, "transport", "path", "mechanism", "library",
                                     "library_pct", "runs", "sm_clock_mhz"])  # fmt: skip
    df = df[cols]
    base = df[df["transport"] == MECHANISM][[*KEY, "p50"]].rename(columns={"p50": "mechanism"})
    libs = df[df["transport"] != MECHANISM].rename(columns={"p50": "path"})
    out = libs.merge(base, on=KEY, how="left")
    out["library"] = out["path"] - out["mechanism"]
    out["library_pct"] = (100.0 * out["library"] / out["path"]).where(out["path"] != 0)
    order = [*KEY, "transport", "path", "mechanism", "library", "library_pct", "runs",
             "sm_clock_mhz"]  # fmt: skip
    return out[order].sort_values(KEY + ["transport"]).reset_index(drop=True)
