"""What ran and what did not, from the records themselves: a status is green only when records of
status ok exist, and every reason is the one the benchmark runner recorded for the points it skipped
or lost (no GPU, no CUDA build, no NIC, a driver that died), never a guess."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

MEASURED = "measured here"
ARCHIVED = "archived"
NOT_RUNNABLE = "not runnable here"
FAILED = "failed"
ABSENT = "not in this campaign"
RUNNER_PREFIX = r"^not runnable on this host: "  # the runner's words; the status already says so


def of(records: pd.DataFrame, experiments: Sequence[str]) -> pd.DataFrame:
    if records.empty or "experiment" not in records:
        return records.iloc[0:0] if len(records.columns) else pd.DataFrame(columns=["experiment"])
    return records[records["experiment"].isin(list(experiments))]


def ok_count(records: pd.DataFrame, experiments: Sequence[str]) -> int:
    d = of(records, experiments)
    return int((d["status"] == "ok").sum()) if "status" in d else 0


def reasons(records: pd.DataFrame, experiments: Sequence[str], limit: int = 3) -> list[str]:
    """The distinct reasons of the records that are not ok, most frequent first, with counts."""
    d = of(records, experiments)
    if d.empty or "status" not in d:
        return []
    bad = d.loc[d["status"] != "ok", "error"].dropna().astype(str)
    counts = bad.str.replace(RUNNER_PREFIX, "", regex=True).value_counts()
    return [f"{r} ({n} records)" for r, n in counts.head(limit).items()]


def why_not_measured(records: pd.DataFrame, experiments: Sequence[str], limit: int = 3) -> str:
    """'' when some record of these experiments is ok; else why none is, in the runner's words."""
    d = of(records, experiments)
    names = ", ".join(experiments)
    if d.empty:
        return f"not measured in this campaign: no records of {names} (not configured or not run)"
    if ok_count(records, experiments):
        return ""
    state = NOT_RUNNABLE if set(d["status"]) == {"skipped"} else FAILED
    return f"{state}: " + "; ".join(reasons(records, experiments, limit) or ["no reason recorded"])


def why_none(
    records: pd.DataFrame, experiments: Sequence[str], transports: Sequence[str], wanted: str
) -> str:
    """Why no point of `transports` (any, when empty) matched `wanted` in these experiments: per
    experiment, the runner's reason, or that it measured no such transport or point."""
    parts = []
    for e in experiments:
        why = why_not_measured(records, [e], limit=1)
        if why:
            parts.append(f"{e}: {why}")
            continue
        d = of(records, [e])
        ok = d[d["status"] == "ok"]
        if transports and not ok["transport"].astype(str).isin(list(transports)).any():
            parts.append(f"{e} measured no {' or '.join(transports)}")
        else:
            parts.append(f"{e} has no point with {wanted}")
    return "; ".join(parts)
