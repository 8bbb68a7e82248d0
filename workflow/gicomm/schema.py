"""JSON Schema validation with messages that name the key, the value and what is allowed."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from gicomm import SCHEMA_DIR


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """Load workflow/schemas/<name>.schema.yaml."""
    with open(SCHEMA_DIR / f"{name}.schema.yaml") as f:
        return yaml.safe_load(f)


@functools.cache
def validator(name: str) -> jsonschema.protocols.Validator:
    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


# JSON Schema type names in words.
TYPE_WORDS = {
    "array": "a list",
    "object": "a mapping",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def type_words(types: str | list[str]) -> str:
    return " or ".join(TYPE_WORDS.get(t, t) for t in ([types] if isinstance(types, str) else types))


def key_path(path: Any) -> str:
    """Render a jsonschema path deque as a dotted key: native.cuda_archs, sweep.qps[2]."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def describe(error: jsonschema.ValidationError) -> str:
    """One line: key, offending value, and what the schema allows."""
    key = key_path(error.absolute_path)
    value = error.instance
    schema = error.schema if isinstance(error.schema, dict) else {}
    v = error.validator
    if v == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(value) - set(allowed)) if isinstance(value, dict) else []
        where = f" under '{key}'" if error.absolute_path else ""
        unknown = ", ".join(repr(e) for e in extra)
        return f"unknown key(s) {unknown}{where}; allowed: {', '.join(allowed)}"
    if v == "required":
        return f"'{key}': {error.message}"
    if v == "enum":
        allowed = ", ".join(repr(a) for a in error.validator_value)
        return f"'{key}': value {value!r} is not allowed; allowed: {allowed}"
    if v == "const":
        return f"'{key}': value {value!r} is not allowed; allowed: {error.validator_value!r}"
    if v in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return f"'{key}': value {value!r} is out of range ({v} {error.validator_value})"
    if v == "pattern":
        return (
            f"'{key}': value {value!r} does not match the allowed pattern {error.validator_value}"
        )
    if v == "type":
        return (
            f"'{key}': value {value!r} has the wrong type; allowed: "
            f"{type_words(error.validator_value)}"
        )
    if v in ("maxLength", "minLength"):
        how = "long" if v == "maxLength" else "short"
        shown = value if len(str(value)) <= 40 else f"{str(value)[:37]}..."
        return f"'{key}': value {shown!r} is too {how} ({v} {error.validator_value})"
    if v == "oneOf":
        options = []
        for sub in error.validator_value:
            if "const" in sub:
                options.append(repr(sub["const"]))
            elif "type" in sub:
                options.append(type_words(sub["type"]))
        allowed = " or ".join(options) if options else "one of the schema's alternatives"
        return f"'{key}': value {value!r} is not allowed; allowed: {allowed}"
    if v == "not":
        return f"'{key}': value {value!r} is reserved and not allowed"
    return f"'{key}': {error.message}"


def validate(instance: Any, schema_name: str, source: str | Path) -> list[str]:
    """Return every violation of schema `schema_name` as a readable line prefixed by `source`."""
    errors = sorted(validator(schema_name).iter_errors(instance), key=lambda e: list(e.path))
    return [f"{source}: {describe(e)}" for e in errors]


def apply_defaults(instance: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Fill schema defaults into a (validated) mapping, recursively for object properties."""
    out = dict(instance)
    for key, sub in schema.get("properties", {}).items():
        if key not in out and "default" in sub:
            out[key] = sub["default"]
        if isinstance(out.get(key), dict) and sub.get("type") == "object":
            out[key] = apply_defaults(out[key], sub)
    return out
