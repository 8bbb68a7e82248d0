"""The campaign configuration: load, validate, fill defaults, and resolve experiments.

Everything here runs when the Snakefile loads, so a bad key or value fails before any job runs,
naming the file, the key, the value and what is allowed.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gicomm import CONFIG_DIR, REPO_ROOT
from gicomm.errors import ConfigError
from gicomm.experiments import Experiment, load_experiment, with_sweep
from gicomm.ranks import NicSetup, nic_setup
from gicomm.schema import apply_defaults, load_schema, validate
from gicomm.yamlio import MAX_EXPANDED, load_yaml

ARCHIVE_DIR = REPO_ROOT / "results" / "archive"
_INTEGER = re.compile(r"[-+]?[0-9]+")
_NUMBER = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")


@dataclass(frozen=True)
class Campaign:
    """A validated campaign: what to run, where, and what to report beside it."""

    name: str
    platform: str
    host: str
    sweep: str
    runs: int | None
    native: dict[str, Any]
    timeouts: dict[str, Any]
    experiments: dict[str, Experiment]
    archived: tuple[str, ...]
    baselines_file: Path = REPO_ROOT / "config" / "baselines.yaml"
    platform_spec: dict[str, Any] = field(repr=False, default_factory=dict)
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    nic: NicSetup = field(default_factory=NicSetup)

    @property
    def max_nodes(self) -> int:
        """Nodes one job may span on this platform (1 on the local machine)."""
        return int((self.platform_spec.get("nodes") or {}).get("per_job_max") or 1)

    @property
    def may_lock_clocks(self) -> bool:
        return bool((self.platform_spec.get("clocks") or {}).get("user_may_lock"))

    def runs_of(self, experiment: Experiment) -> int:
        return self.runs if self.runs is not None else experiment.repetitions


def available_experiments(config_dir: Path = CONFIG_DIR) -> list[str]:
    return sorted(p.stem for p in (config_dir / "experiments").glob("*.yaml"))


def archived_campaigns(archive_dir: Path = ARCHIVE_DIR) -> list[str]:
    if not archive_dir.is_dir():
        return []
    return sorted(p.name for p in archive_dir.iterdir() if (p / "raw").is_dir())


def default_host(platform: str) -> str:
    return socket.gethostname().split(".")[0] if platform == "local" else platform


def load_platform_spec(cfg: dict[str, Any], source: str, config_dir: Path) -> dict[str, Any]:
    """The platform's spec: from the config (a platform file given as --configfile) or from
    config/platforms/<platform>.yaml; validated against workflow/schemas/platform.schema.yaml."""
    name = cfg["platform"]
    if "platform_spec" in cfg:
        doc, where = {"platform": name, "platform_spec": cfg["platform_spec"]}, source
    else:
        path = config_dir / "platforms" / f"{name}.yaml"
        if not path.exists():
            known = sorted(p.stem for p in (config_dir / "platforms").glob("*.yaml"))
            raise ConfigError(
                f"{source}: 'platform': value {name!r} is not a known platform; "
                f"allowed: {', '.join(known) or '(no config/platforms/*.yaml)'}"
            )
        doc, where = load_yaml(path), str(path)
        if not isinstance(doc, dict) or doc.get("platform") != name:
            found = doc.get("platform") if isinstance(doc, dict) else None
            raise ConfigError(
                f"{path}: 'platform': value {found!r} must equal the file name {name!r}"
            )
    problems = validate(doc, "platform", where)
    if problems:
        raise ConfigError("invalid platform:\n  " + "\n  ".join(problems))
    return doc["platform_spec"]


def check_config_files(paths: Iterable[str | Path]) -> None:
    """Read each config file again as gicomm reads YAML (Snakemake read it before the workflow
    started, keeping the last of two equal keys): a key given twice, an alias bomb or a malformed
    file fails here with file:line."""
    for path in paths:
        load_yaml(path)


def values_in(value: Any, memo: dict[int, int] | None = None) -> int:
    """How many values `value` holds, a shared list or mapping counted at each place it appears,
    without walking it more than once (so an aliased structure is measured, not expanded)."""
    memo = {} if memo is None else memo
    if not isinstance(value, Mapping | list):
        return 1
    if id(value) in memo:
        return memo[id(value)]
    memo[id(value)] = 1  # a structure that contains itself counts once
    children = list(value.values()) if isinstance(value, Mapping) else value
    memo[id(value)] = 1 + sum(values_in(c, memo) for c in children)
    return memo[id(value)]


def from_command_line(value: Any, schema: dict[str, Any]) -> Any:
    """A --config value as its schema types it: Snakemake parses the inside of --config
    'timeouts={"wait_ms": 1}' as strings ('1'), which would fail as the wrong type. A string
    becomes an integer, number, boolean or null only where the schema allows that type and not a
    string; anything else is left for validation to name."""
    if isinstance(value, Mapping):
        props = schema.get("properties", {})
        return {k: from_command_line(v, props.get(k, {})) for k, v in value.items()}
    if isinstance(value, list):
        return [from_command_line(v, schema.get("items", {})) for v in value]
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    if not isinstance(value, str) or "string" in types:
        return value
    if "integer" in types and _INTEGER.fullmatch(value):
        return int(value)
    if "number" in types and _NUMBER.fullmatch(value):
        return float(value)
    if "boolean" in types and value in ("true", "false"):
        return value == "true"
    if "null" in types and value in ("null", "~"):
        return None
    return value


def load_campaign(
    config: dict[str, Any],
    source: str = "config",
    config_dir: Path = CONFIG_DIR,
    archive_dir: Path = ARCHIVE_DIR,
    command_line: Iterable[str] = (),
) -> Campaign:
    """Validate a Snakemake `config` mapping and resolve it into a Campaign; `command_line` names
    the keys given with --config (typed by the schema: from_command_line)."""
    if not isinstance(config, dict) or not config:
        raise ConfigError(
            f"{source}: empty configuration; expected a mapping with 'campaign' and 'platform'"
        )
    too_big = [k for k, v in config.items() if values_in(v) > MAX_EXPANDED]
    if too_big:
        raise ConfigError(
            f"{source}: {', '.join(map(repr, too_big))}: more than {MAX_EXPANDED:,} values "
            "(an alias bomb?); refused before anything walks it"
        )
    props = load_schema("config")["properties"]
    config = {
        k: from_command_line(v, props.get(k, {})) if k in command_line else v
        for k, v in config.items()
    }
    problems = validate(config, "config", source)
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
    cfg = apply_defaults(config, load_schema("config"))

    platform_spec = load_platform_spec(cfg, source, config_dir)

    known = available_experiments(config_dir)
    names = known if cfg["experiments"] == "all" else cfg["experiments"]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            f"{source}: 'experiments': unknown experiment(s) {', '.join(map(repr, unknown))}; "
            f"allowed: all, {', '.join(known)}"
        )
    experiments = {n: load_experiment(config_dir / "experiments" / f"{n}.yaml") for n in names}
    if cfg["experiments"] == "all":  # opt-in experiments run only when named
        experiments = {n: e for n, e in experiments.items() if not e.opt_in}
    for name, sweep in cfg["sweeps"].items():
        if name not in experiments:
            raise ConfigError(
                f"{source}: 'sweeps.{name}': not an experiment of this campaign; allowed: "
                f"{', '.join(experiments)}"
            )
        experiments[name] = with_sweep(experiments[name], sweep, source, f"sweeps.{name}")

    archived_all = archived_campaigns(archive_dir)
    archived = archived_all if cfg["report"]["archived"] == "all" else cfg["report"]["archived"]
    missing = [a for a in archived if a not in archived_all]
    if missing:
        raise ConfigError(
            f"{source}: 'report.archived': no archived campaign "
            f"{', '.join(map(repr, missing))} under {archive_dir}; "
            f"allowed: all, {', '.join(archived_all) or '(none archived)'}"
        )
    archived = [a for a in archived if a != cfg["campaign"]]

    host = cfg["host"] if cfg["host"] != "auto" else default_host(cfg["platform"])
    return Campaign(
        name=cfg["campaign"],
        platform=cfg["platform"],
        host=host,
        sweep=cfg["sweep"],
        runs=cfg["runs"],
        native=cfg["native"],
        timeouts=cfg["timeouts"],
        experiments=experiments,
        archived=tuple(archived),
        baselines_file=REPO_ROOT / cfg["baselines_file"],
        platform_spec=platform_spec,
        raw=cfg,
        nic=nic_setup(cfg["nic"], cfg["platform"], platform_spec),
    )


def load_campaign_file(path: str | Path, **overrides: Any) -> Campaign:
    """Load a config file (as `snakemake --configfile` would) and resolve it."""
    data = load_yaml(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping at the top level, found {type(data).__name__}"
        )
    data.update(overrides)
    return load_campaign(data, source=str(path))
