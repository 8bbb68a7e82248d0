"""Selectors: which measured points (rows of an aggregate summary) a claim, a table row or a figure
panel reads. The vocabulary of config/claims.yaml and report/paper/catalogue.yaml:

- experiment: one name or a list (default: the caller's); metric and transport: one or a list
  (absent: any);
- params: every named sweep parameter must match (one value or a list of alternatives);
- where_swept: like params, but only where the experiment sweeps that parameter (a driver that does
  not sweep it runs its default);
- cpu_clock_state (or state): cold | warm, the record's cpu_clock_state, else its `state` param;
- max_of / min_of: keep only the rows at the largest / smallest value of that parameter.

Rows with a `responder` param (a round trip between two ranks whose answer came from rank 1's
responder) are selected only by a selector that names the responder in its params, with one
exception: proxy_one_op's round trip (rtt_ns) answered by a GPU thread on rank 1 through its
mini-proxy worker is, structurally, the one-process round trip (a GPU thread polls and enqueues
through the proxy on each side), so it counts where that one does. A host thread's answer lacks the
GPU poll and enqueue; gda_rtt's answer, even from a GPU thread, goes through a proxy (rank 1 has no
DEVX QPs), never a GPU-built WQE, so neither stands for the paper's round trips.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from gicomm.columns import param_column


def as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list | tuple) else [v]


def same(a: Any, b: Any) -> bool:
    """Equal as numbers (8 == 8.0) or, failing that, as case-insensitive text."""
    try:
        return math.isclose(float(a), float(b))
    except (TypeError, ValueError):
        return str(a).strip().lower() == str(b).strip().lower()


def clock_states(d: pd.DataFrame) -> pd.Series:
    """cold/warm of each row: the record's cpu_clock_state, else the driver's `state` param."""
    state = d["cpu_clock_state"].astype(object) if "cpu_clock_state" in d else None
    param = d[param_column("state")].astype(object) if param_column("state") in d else None
    if state is None and param is None:
        return pd.Series("", index=d.index)
    if state is None:
        return param.fillna("").astype(str)
    if param is not None:
        state = state.where(state.notna() & (state.astype(str) != ""), param)
    return state.fillna("").astype(str)


# What rank 1's GPU responder writes into params.responder (native/bench/harness/responder.h).
GPU_RESPONDER = "rank 1 GPU thread via its mini-proxy worker (verbs)"
# (experiment, transport, metric) whose rows with the GPU responder have the one-process form.
GPU_ANSWER_AS_ONE_PROCESS = {("proxy_one_op", "mini-proxy", "rtt_ns")}


def answered_as_in_one_process(d: pd.DataFrame) -> pd.Series:
    """Rows whose round trip has the one-process form: no responder, or (proxy_one_op's rtt_ns)
    rank 1's GPU responder."""
    responder = d[param_column("responder")]
    none = responder.isna() | (responder.astype(str) == "")
    blank = pd.Series("", index=d.index)
    kinds = zip(
        d["experiment"], d.get("transport", blank).astype(str), d.get("metric", blank), strict=True
    )
    same_form = pd.Series([k in GPU_ANSWER_AS_ONE_PROCESS for k in kinds], index=d.index)
    return none | ((responder.astype(str) == GPU_RESPONDER) & same_form.astype(bool))


def _matches(column: pd.Series, value: Any) -> pd.Series:
    options = as_list(value)
    return column.map(lambda v: any(same(v, x) for x in options)).astype(bool)


def match_rows(d: pd.DataFrame, sel: dict[str, Any], experiments: list[str]) -> pd.DataFrame:
    """The rows of `d` that `sel` selects; `experiments` when the selector names none."""
    if d.empty:
        return d
    names = [str(e) for e in as_list(sel["experiment"])] if "experiment" in sel else experiments
    d = d[d["experiment"].isin(names)]
    if "metric" in sel:
        d = d[d["metric"].isin([str(m) for m in as_list(sel["metric"])])]
    if "transport" in sel:
        d = d[d["transport"].astype(str).isin([str(t) for t in as_list(sel["transport"])])]
    if param_column("responder") in d and "responder" not in sel.get("params", {}):
        d = d[answered_as_in_one_process(d)]
    for name, value in sel.get("params", {}).items():
        col = param_column(name)
        if col not in d:
            return d.iloc[0:0]
        d = d[_matches(d[col], value)]
    for name, value in sel.get("where_swept", {}).items():
        col = param_column(name)
        if col in d and d[col].notna().any():
            d = d[(d[col].isna() | _matches(d[col], value)).astype(bool)]
    state = sel.get("cpu_clock_state") or sel.get("state")
    if state and not d.empty:
        d = d[clock_states(d) == state]
    for key, pick in (("max_of", max), ("min_of", min)):
        col = param_column(sel[key]) if key in sel else None
        if col and col in d and d[col].notna().any():
            values = pd.to_numeric(d[col], errors="coerce")
            d = d[values == pick(values.dropna())]
    return d


def describe_selector(sel: dict[str, Any]) -> str:
    metrics = "|".join(map(str, as_list(sel.get("metric", "any metric"))))
    parts = [f"{metrics} of {'|'.join(map(str, as_list(sel.get('transport', 'any transport'))))}"]
    parts += [f"{k}={'|'.join(map(str, as_list(v)))}" for k, v in sel.get("params", {}).items()]
    parts += [f"({k}={v} where swept)" for k, v in sel.get("where_swept", {}).items()]
    if sel.get("cpu_clock_state") or sel.get("state"):
        parts.append(f"cpu {sel.get('cpu_clock_state') or sel.get('state')}")
    return " ".join(parts)
