"""Experiments: their configuration, sweep expansion into points, and batching into jobs."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gicomm.errors import ConfigError
from gicomm.schema import apply_defaults, load_schema, validate
from gicomm.yamlio import load_yaml

Params = dict[str, str | int | float | bool]
Block = dict[str, list[Any]]


@dataclass(frozen=True)
class Point:
    """One sweep point: a stable id and its parameters."""

    point_id: str
    params: Params

    def to_json(self) -> str:
        return json.dumps({"point_id": self.point_id, "params": self.params}, sort_keys=True)


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    paper_ref: str
    description: str
    driver: str
    needs: dict[str, Any]
    needs_when: tuple[tuple[dict[str, Any], dict[str, Any]], ...]
    opt_in: bool
    point_s: int | None
    repetitions: int
    warmup: int
    iters: int
    metrics: tuple[str, ...]
    points_per_job: int
    sweeps: dict[str, list[Block]]
    figure: dict[str, Any]
    path: Path

    def needs_of(self, point: Point) -> dict[str, Any]:
        """The experiment's needs plus those of every `needs_when` entry the point matches."""
        needs = dict(self.needs)
        for when, extra in self.needs_when:
            if all(point.params.get(k) == v for k, v in when.items()):
                for k, v in extra.items():
                    needs[k] = (
                        max(needs.get(k, v), v) if isinstance(v, int) else (needs.get(k) or v)
                    )
        return needs

    def points(self, mode: str = "full") -> list[Point]:
        blocks = self.sweeps.get(mode) or self.sweeps["full"]
        points: dict[str, Point] = {}
        for block in blocks:
            for p in expand_sweep(self.name, block):
                points.setdefault(p.point_id, p)
        return list(points.values())

    @property
    def swept(self) -> list[str]:
        """Every parameter any block of the full sweep varies, in first-seen order."""
        return list(dict.fromkeys(k for block in self.sweeps["full"] for k in block))

    def batches(self, mode: str = "full") -> list[list[Point]]:
        pts = self.points(mode)
        n = self.points_per_job
        return [pts[i : i + n] for i in range(0, len(pts), n)]


def point_id(experiment: str, params: Params) -> str:
    blob = json.dumps({"experiment": experiment, "params": params}, sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def expand_sweep(experiment: str, sweep: dict[str, list[Any]]) -> list[Point]:
    """Cartesian product of the sweep, in file order (the first key varies slowest)."""
    keys = list(sweep)
    points = []
    for values in itertools.product(*(sweep[k] for k in keys)):
        params = dict(zip(keys, values, strict=True))
        points.append(Point(point_id(experiment, params), params))
    return points


def known_values() -> dict[str, list[str]]:
    """Parameters whose values gicomm knows: transport (experiment schema) and nic_backend (the
    record schema's enum), so a typo fails at load instead of producing skipped points."""
    return {
        "transport": load_schema("experiment")["$defs"]["transport"]["enum"],
        "nic_backend": list(load_schema("record")["properties"]["nic_backend"]["enum"]),
    }


def check_known_values(path: Path, blocks: list[dict[str, Any]]) -> None:
    for name, allowed in known_values().items():
        for block in blocks:
            values = block.get(name, [])
            for v in values if isinstance(values, list) else [values]:
                if v not in allowed:
                    raise ConfigError(
                        f"{path}: '{name}': value {v!r} is not a known {name}; "
                        f"allowed: {', '.join(allowed)}"
                    )


def as_blocks(sweep: Block | list[Block]) -> list[Block]:
    return sweep if isinstance(sweep, list) else [sweep]


def load_experiment(path: str | Path) -> Experiment:
    path = Path(path)
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    problems = validate(data, "experiment", path)
    if problems:
        raise ConfigError("invalid experiment:\n  " + "\n  ".join(problems))
    if data["name"] != path.stem:
        raise ConfigError(
            f"{path}: 'name': value {data['name']!r} must equal the file name {path.stem!r}"
        )
    schema = load_schema("experiment")
    data = apply_defaults(data, schema)
    needs = apply_defaults(data["needs"], schema["properties"]["needs"])
    full = as_blocks(data["sweep"])
    swept = list(dict.fromkeys(k for block in full for k in block))
    sweeps = {"full": full}
    if "reduced" in data:
        reduced = data["reduced"]
        keys = {k for block in as_blocks(reduced) for k in block}
        extra = sorted(keys - set(swept))
        if extra:
            raise ConfigError(
                f"{path}: 'reduced': parameter(s) {', '.join(map(repr, extra))} are not in "
                f"'sweep'; allowed: {', '.join(swept)}"
            )
        # A list replaces the sweep; a mapping overrides those values in every block that has them.
        sweeps["reduced"] = (
            reduced
            if isinstance(reduced, list)
            else [{k: reduced.get(k, v) for k, v in block.items()} for block in full]
        )
    check_known_values(path, full + [w["when"] for w in data.get("needs_when", [])])
    for i, w in enumerate(data.get("needs_when", [])):
        unknown = sorted(set(w["when"]) - set(swept))
        if unknown:
            raise ConfigError(
                f"{path}: 'needs_when[{i}].when': parameter(s) {', '.join(map(repr, unknown))} are "
                f"not swept; allowed: {', '.join(swept)}"
            )
    return Experiment(
        name=data["name"],
        title=data["title"],
        paper_ref=data.get("paper_ref", ""),
        description=data.get("description", ""),
        driver=data["driver"],
        needs=needs,
        needs_when=tuple((w["when"], w["needs"]) for w in data.get("needs_when", [])),
        opt_in=data["opt_in"],
        point_s=data.get("point_s"),
        repetitions=data["repetitions"],
        warmup=data["warmup"],
        iters=data["iters"],
        metrics=tuple(data["metrics"]),
        points_per_job=data["points_per_job"],
        sweeps=sweeps,
        figure=data.get("figure", {}),
        path=path,
    )
