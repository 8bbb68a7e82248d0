"""The floor table (config/floors.yaml) and the same-run floor of each latency record.

``attach_floors`` gives every row of a tidy table that the table names its floor (``floor``: the
floor id), the floor's p50 measured in the same campaign, host and run (``floor_ns``) and the
overhead above it (``overhead_ns`` = p50 - floor_ns). A message rate's floor is the fastest rate
the bare path reaches (a ceiling): it is carried as the time per message at that rate
(``floor_ns`` = 1000 / Mmsg/s) and the overhead as the measured time per message above it, so
every floor column is in ns. A floor the run did not measure leaves the three empty: nothing is
borrowed from another run or host."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from gicomm import REPO_ROOT
from gicomm.columns import FLOOR_COLUMNS, param_column
from gicomm.errors import ConfigError
from gicomm.yamlio import load_yaml

FLOORS_FILE = REPO_ROOT / "config" / "floors.yaml"
RUN_KEYS = ["campaign", "host", "run_index"]


@dataclass(frozen=True)
class Floor:
    id: str
    title: str
    metric: str
    params: dict[str, Any] = field(default_factory=dict)
    same_point: bool = False
    rate: bool = False  # a message rate (Mmsg/s): the floor is its time per message


@dataclass(frozen=True)
class Expectation:
    transport: str
    metric: str
    floors: tuple[str, ...]
    experiments: tuple[str, ...] = ()
    where: dict[str, Any] = field(default_factory=dict)
    model_path: str | None = None
    model_value: str | None = None
    overhead_ns: float | None = None
    range_rel: float | None = None
    range_source: str = ""


@dataclass(frozen=True)
class FloorTable:
    floors: dict[str, Floor]
    expected: tuple[Expectation, ...]

    def for_row(self, experiment: str, transport: str, metric: str) -> Expectation | None:
        for e in self.expected:
            same = e.transport == transport and e.metric == metric
            if same and (not e.experiments or experiment in e.experiments):
                return e
        return None


def _key(where: str, d: dict[str, Any], name: str) -> Any:
    if name not in d:
        raise ConfigError(f"{where}: missing key {name!r}")
    return d[name]


def parse_table(doc: dict[str, Any], where: str) -> FloorTable:
    floors = {}
    for fid, f in (doc.get("floors") or {}).items():
        floors[fid] = Floor(
            fid,
            str(f.get("title", fid)),
            str(_key(f"{where}: floors.{fid}", f, "metric")),
            dict(f.get("params") or {}),
            bool(f.get("same_point", False)),
            bool(f.get("rate", False)),
        )
    default_range = doc.get("model_range") or {}
    expected = []
    for i, e in enumerate(doc.get("expected") or []):
        at = f"{where}: expected[{i}]"
        ids = tuple(_key(at, e, "floor"))
        unknown = [x for x in ids if x not in floors]
        if unknown:
            raise ConfigError(f"{at}: floor {unknown[0]!r} is not one of floors: {sorted(floors)}")
        model = e.get("model") or {}
        rng = e.get("range") or (default_range if model else {})
        if model and model.get("value") not in ("issue", "completion", "rtt"):
            raise ConfigError(
                f"{at}: model.value {model.get('value')!r}: allowed issue, completion, rtt"
            )
        expected.append(
            Expectation(
                transport=str(_key(at, e, "transport")),
                metric=str(_key(at, e, "metric")),
                floors=ids,
                experiments=tuple(e.get("experiments") or ()),
                where=dict(e.get("where") or {}),
                model_path=model.get("path"),
                model_value=model.get("value"),
                overhead_ns=e.get("overhead_ns"),
                range_rel=rng.get("rel"),
                range_source=str(rng.get("source", "")),
            )
        )
    return FloorTable(floors, tuple(expected))


@cache
def load_table(path: Path = FLOORS_FILE) -> FloorTable:
    return parse_table(load_yaml(path), str(path))


def _matches(rows: pd.DataFrame, params: dict[str, Any]) -> pd.Series:
    keep = pd.Series(True, index=rows.index)
    for k, v in params.items():
        col = param_column(k)
        if col not in rows:
            return pd.Series(False, index=rows.index)
        keep &= rows[col].astype(str) == str(v)
    return keep


def floor_values(tidy: pd.DataFrame, floor: Floor) -> pd.DataFrame:
    """The ok records measuring `floor`: the run keys (and point_id for a same-point floor)
    with their p50 as floor_ns."""
    if tidy.empty or "metric" not in tidy:
        return pd.DataFrame(columns=[*RUN_KEYS, "point_id", "floor_ns"])
    rows = tidy[(tidy["metric"] == floor.metric) & (tidy["status"] == "ok")]
    if not floor.same_point:
        rows = rows[rows["experiment"] == "floors"]
    rows = rows[_matches(rows, floor.params)]
    keys = [*RUN_KEYS, "point_id"] if floor.same_point else RUN_KEYS
    if floor.rate:  # the fastest rate, as time per message
        best = rows.groupby(keys, dropna=False)["p50"].max()
        return (ns_per_message(best)).rename("floor_ns").reset_index()
    return rows.groupby(keys, dropna=False)["p50"].min().rename("floor_ns").reset_index()


def ns_per_message(rate_mmsg_s: Any) -> Any:
    """Mmsg/s as ns per message (a rate of 0 or less has no time per message)."""
    r = pd.to_numeric(rate_mmsg_s, errors="coerce")
    return 1e3 / r.where(r > 0)


def is_rate(metric: str) -> bool:
    """A message-rate metric (Mmsg/s): msg_rate, floor_nic_msg_rate, floor_wqe_doorbell_rate."""
    return metric.endswith("_rate")


def attach_floors(tidy: pd.DataFrame, table: FloorTable | None = None) -> pd.DataFrame:
    """`tidy` with floor, floor_ns and overhead_ns (empty where no floor applies or was measured).
    A record that carries its own floor_ns keeps it."""
    table = table or load_table()
    out = tidy.copy()
    for c in FLOOR_COLUMNS:
        if c not in out:
            out[c] = pd.Series([None] * len(out), index=out.index, dtype=object)
    if out.empty:
        return out
    values = {fid: floor_values(out, f) for fid, f in table.floors.items()}
    for (exp, tr, metric), rows in out.groupby(["experiment", "transport", "metric"], dropna=False):
        e = table.for_row(str(exp), str(tr), str(metric))
        if e is None:
            continue
        for fid in e.floors:
            f = table.floors[fid]
            v = values[fid]
            if v.empty:
                continue
            keys = [*RUN_KEYS, "point_id"] if f.same_point else RUN_KEYS
            joined = rows[keys].merge(v, on=keys, how="left")
            joined.index = rows.index
            have = joined["floor_ns"].notna() & out.loc[rows.index, "floor_ns"].isna()
            idx = have[have].index
            out.loc[idx, "floor"] = fid
            out.loc[idx, "floor_ns"] = joined.loc[idx, "floor_ns"]
    measured = pd.to_numeric(out["floor_ns"], errors="coerce")
    out["floor_ns"] = measured
    p50 = pd.to_numeric(out["p50"], errors="coerce")
    rate = out["metric"].astype(str).map(is_rate)
    out["overhead_ns"] = p50.where(~rate, ns_per_message(p50)) - measured
    return out
