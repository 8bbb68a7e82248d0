"""Experiments: their configuration, sweep expansion into points, and batching into jobs."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gicomm.errors import ConfigError
from gicomm.params import FIRST_CLASS, ParamSpec, parse_specs, point_problems
from gicomm.schema import apply_defaults, load_schema, validate
from gicomm.vocabulary import default_nic_backend
from gicomm.yamlio import load_yaml

Params = dict[str, str | int | float | bool]
Block = dict[str, list[Any]]


@dataclass(frozen=True)
class Point:
    """One sweep point: a stable id and its swept parameters (`params`, transport and nic_backend
    included, as the id hashes them), with the transport and NIC backend it runs on resolved from
    the experiment's declared defaults (None where the experiment derives them)."""

    point_id: str
    params: Params
    transport: str | None = None
    nic_backend: str | None = None

    def to_json(self) -> str:
        return json.dumps({"point_id": self.point_id, "params": self.params}, sort_keys=True)

    @property
    def driver_params(self) -> Params:
        """The params a driver gets and a record carries: without transport and nic_backend."""
        return {k: v for k, v in self.params.items() if k not in FIRST_CLASS}

    @staticmethod
    def from_line(text: str) -> Point:
        """A points-file line (transport and nic_backend beside the params, or, in the first
        points files, inside them), with `params` the full swept parameters again."""
        d = json.loads(text)
        params = dict(d.get("params", {}))
        for key in FIRST_CLASS:
            if key in d:
                if key in params:
                    raise ValueError(f"points line {d.get('point_id')}: '{key}' given twice")
                params[key] = d[key]
        return Point(str(d["point_id"]), params, params.get("transport"), params.get("nic_backend"))

    def line(self) -> str:
        """The point as a line of a driver's points file (native/bench/README.md)."""
        ids = {k: v for k in FIRST_CLASS if (v := getattr(self, k)) is not None}
        return json.dumps(
            {"point_id": self.point_id, **ids, "params": self.driver_params}, sort_keys=True
        )


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
    params: dict[str, ParamSpec] = field(default_factory=dict)

    def needs_of(self, point: Point) -> dict[str, Any]:
        """The experiment's needs plus those of every `needs_when` entry the point matches (its
        transport and NIC backend as resolved where it does not sweep them)."""
        needs = dict(self.needs)
        resolved = {"transport": point.transport, "nic_backend": point.nic_backend}
        for when, extra in self.needs_when:
            if all(point.params.get(k, resolved.get(k)) == v for k, v in when.items()):
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
                points.setdefault(p.point_id, self.resolve(p))
        return list(points.values())

    def resolve(self, p: Point) -> Point:
        """`p` with its transport and NIC backend: swept, else the declared default, else (NIC
        backend) the transport's default from the vocabulary; None where the experiment derives
        them from other parameters."""
        if not self.params:
            return p
        transport = p.params.get("transport", self.params["transport"].default)
        nic = self.params.get("nic_backend")
        backend = p.params.get("nic_backend")
        if backend is None and nic is not None and nic.default is not None:
            backend = nic.default
        if backend is None and transport is not None and (nic is None or nic.derived is None):
            backend = default_nic_backend(str(transport))
        return Point(
            p.point_id,
            p.params,
            None if transport is None else str(transport),
            None if backend is None else str(backend),
        )

    @property
    def swept(self) -> list[str]:
        """Every parameter any block of the full sweep varies, in first-seen order."""
        return list(dict.fromkeys(k for block in self.sweeps["full"] for k in block))

    def batches(self, mode: str = "full") -> list[list[Point]]:
        pts = self.points(mode)
        n = self.points_per_job
        return [pts[i : i + n] for i in range(0, len(pts), n)]


def point_id(experiment: str, params: Params) -> str:
    """Stable id: experiment and the full swept parameters (transport and nic_backend included)."""
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


def declared_params(path: Path, data: dict[str, Any]) -> dict[str, ParamSpec]:
    """The experiment's parameter declarations: its own `params`, or those of the experiment
    `params_of` names (same driver code)."""
    if ("params" in data) == ("params_of" in data):
        raise ConfigError(
            f"{path}: declare the experiment's parameters under 'params', or name the experiment "
            f"whose parameters it takes under 'params_of' (one of the two)"
        )
    if "params" in data:
        return parse_specs(data["params"], str(path))
    other = path.with_name(f"{data['params_of']}.yaml")
    if not other.exists():
        raise ConfigError(f"{path}: 'params_of': no experiment {data['params_of']!r} ({other})")
    source = load_yaml(other)
    if not isinstance(source, dict) or "params" not in source:
        raise ConfigError(f"{path}: 'params_of': {other} declares no 'params' of its own")
    return parse_specs(source["params"], str(other))


def check_sweep(path: Path, what: str, specs: dict[str, ParamSpec], blocks: list[Block]) -> None:
    """Every point of `blocks` names declared parameters with allowed values (first problem)."""
    for i, block in enumerate(blocks):
        where = f"{path}: '{what}'" + (f" block {i + 1}" if len(blocks) > 1 else "")
        for name, values in block.items():
            spec = specs.get(name)
            if spec is None:
                raise ConfigError(
                    f"{where}: unknown parameter '{name}'; allowed: {', '.join(sorted(specs))}"
                )
            for v in values:
                if why := spec.problem(v):
                    raise ConfigError(f"{where}: {why}")
        for p in expand_sweep(path.stem, block):
            if problems := point_problems(specs, p.params):
                raise ConfigError(f"{where}: {problems[0]}")


def with_sweep(e: Experiment, sweep: Block | list[Block], source: str, key: str) -> Experiment:
    """`e` measuring the sweep a campaign gives it under `key` (in place of its full and reduced
    sweeps), checked against its declared parameters like its own; point ids are computed as for
    its own sweep, so a point of both has one id."""
    blocks = as_blocks(sweep)
    where = f"{source}: '{key}'"
    if not blocks or any(not isinstance(b, dict) or not b for b in blocks):
        raise ConfigError(f"{where}: expected a mapping of parameter lists, or a list of them")
    for i, block in enumerate(blocks):
        for k, v in block.items():
            if not isinstance(v, list) or not v:
                at = f" block {i + 1}" if len(blocks) > 1 else ""
                raise ConfigError(f"{where}{at}: '{k}': expected a non-empty list of values")
    check_sweep(Path(source), key, e.params, blocks)
    return replace(e, sweeps={**e.sweeps, "full": blocks, "reduced": blocks})


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
    specs = declared_params(path, data)
    for mode, blocks in sweeps.items():
        check_sweep(path, "sweep" if mode == "full" else mode, specs, blocks)
    check_sweep(
        path,
        "needs_when",
        specs,
        [{k: [v] for k, v in w["when"].items()} for w in data.get("needs_when", [])],
    )
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
        params=specs,
    )
