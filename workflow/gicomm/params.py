"""Parameter declarations of an experiment (its YAML `params`) and the checks of swept values
against them. The native harness reads the same declarations (compiled into the drivers) and
applies the same rules, so a value refused here is refused there too."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gicomm.errors import ConfigError
from gicomm.vocabulary import nic_backends, transports

Scalar = str | int | float | bool

# Parameters that travel beside a point's params, not in them; values from the vocabulary.
FIRST_CLASS = ("transport", "nic_backend")


def _is_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return type(value) is int
    if kind == "number":
        return type(value) in (int, float) and math.isfinite(value)
    if kind == "boolean":
        return type(value) is bool
    return type(value) is str


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(v)


@dataclass(frozen=True)
class ParamSpec:
    name: str
    type: str
    doc: str
    values: tuple[Scalar, ...] | None = None
    min: float | None = None
    max: float | None = None
    pow2: bool = False
    default: Scalar | None = None
    derived: str | None = None
    transports: tuple[str, ...] | None = None

    def allowed(self) -> str:
        """What the parameter accepts, in words."""
        if self.values is not None:
            return ", ".join(repr(v) for v in self.values)
        what = {"integer": "an integer", "number": "a number", "boolean": "true or false"}
        text = what.get(self.type, "a string")
        if self.pow2:
            text = "a power of two"
        if self.min is not None and self.max is not None:
            text += f" from {_fmt(self.min)} to {_fmt(self.max)}"
        elif self.min is not None:
            text += f" of at least {_fmt(self.min)}"
        elif self.max is not None:
            text += f" of at most {_fmt(self.max)}"
        return text

    def problem(self, value: Any) -> str | None:
        """Why `value` is not allowed (naming the value and what is), or None."""
        bad = f"parameter '{self.name}': value {value!r}"
        if not _is_type(value, self.type):
            return f"{bad} has the wrong type; allowed: {self.allowed()}"
        if self.values is not None and not any(
            type(value) is type(v) and value == v for v in self.values
        ):
            return f"{bad} is not allowed; allowed: {self.allowed()}"
        if (self.min is not None and value < self.min) or (
            self.max is not None and value > self.max
        ):
            return f"{bad} is out of range; allowed: {self.allowed()}"
        if self.pow2 and (value <= 0 or value & (value - 1)):
            return f"{bad} is not a power of two; allowed: {self.allowed()}"
        return None


def parse_specs(data: dict[str, dict[str, Any]], where: str) -> dict[str, ParamSpec]:
    """The declarations of an experiment's `params` (schema-valid), each checked for consistency:
    a type (implied for transport and nic_backend), values of that type, a valid default."""
    specs = {}
    for name, d in data.items():
        here = f"{where}: 'params.{name}'"
        if name in FIRST_CLASS:
            known = transports() if name == "transport" else nic_backends()
            unknown = [v for v in d.get("values", []) if v not in known]
            if "values" not in d or unknown:
                raise ConfigError(
                    f"{here}: declare the allowed {name} values; "
                    f"{', '.join(map(repr, unknown)) or 'none given'}: allowed: {', '.join(known)}"
                )
            kind = "string"
        elif "type" not in d:
            raise ConfigError(
                f"{here}: 'type' is missing; allowed: integer, number, boolean, string"
            )
        else:
            kind = d["type"]
        spec = ParamSpec(
            name=name,
            type=kind,
            doc=d["doc"],
            values=tuple(d["values"]) if "values" in d else None,
            min=d.get("min"),
            max=d.get("max"),
            pow2=d.get("pow2", False),
            default=d.get("default"),
            derived=d.get("derived"),
            transports=tuple(d["transports"]) if "transports" in d else None,
        )
        if spec.pow2 and kind != "integer":
            raise ConfigError(f"{here}: 'pow2' applies to integers only")
        for v in spec.values or ():
            if not _is_type(v, kind):
                raise ConfigError(f"{here}: value {v!r} in 'values' is not of type {kind}")
        if spec.default is not None and (why := spec.problem(spec.default)):
            raise ConfigError(f"{here}: the default: {why}")
        for t in spec.transports or ():
            if t not in transports():
                raise ConfigError(f"{here}: 'transports': {t!r} is not a transport")
        specs[name] = spec
    if "transport" not in specs:
        raise ConfigError(
            f"{where}: 'params.transport' is missing: declare the transports it measures"
        )
    return specs


def point_problems(specs: dict[str, ParamSpec], params: dict[str, Any]) -> list[str]:
    """Every reason the parameters of one point are not allowed: unknown names, bad values, and
    parameters given for a transport they do not apply to."""
    problems = []
    for name, value in params.items():
        spec = specs.get(name)
        if spec is None:
            problems.append(f"unknown parameter '{name}'; allowed: {', '.join(sorted(specs))}")
        elif why := spec.problem(value):
            problems.append(why)
    transport = params.get("transport", specs["transport"].default)
    for name in params:
        spec = specs.get(name)
        if spec and spec.transports and transport not in spec.transports:
            problems.append(
                f"parameter '{name}' applies to transport {', '.join(spec.transports)} only, "
                f"not to {transport}"
            )
    return problems
