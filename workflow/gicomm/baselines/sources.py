"""Library sources (config/baselines.yaml): load and check them, and prepare one.

A source is one library at one version, of one of three kinds:

- ``pip``: a package at a pinned version, downloaded (no install) and unpacked; its root is a folder
  inside the wheel (``nvidia/nvshmem``), the layout the native CMake options point at.
- ``git``: a repository at a pinned commit, checked out and built by argument-list steps run
  without a shell; the only substitutions are the placeholders below.
- ``path``: an install that already exists (a cluster module, a container image), named by an
  absolute path with ``$VARS`` or as ``python:<module>`` (the folder of an importable package).

Preparing a source writes ``<dest>/manifest.json`` last, so a Snakemake rule can depend on it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gicomm.errors import ConfigError, GicommError
from gicomm.fsutil import write_atomic
from gicomm.layout import BASELINE_MANIFEST
from gicomm.schema import validate
from gicomm.yamlio import load_yaml

PLACEHOLDERS = ("src", "prefix", "build", "jobs", "cuda_archs", "python")
# Placeholders of a source's `run` section (gicomm.baselines.upstream_run fills them per point).
RUN_PLACEHOLDERS = ("root", "src", "build", "prefix", "python", "peer")
_RUN_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)(?::([a-z0-9][a-z0-9_.+-]*))?\}")


class SourceError(GicommError):
    """A source could not be prepared (download, checkout, build step or expected file)."""


@dataclass(frozen=True)
class Source:
    name: str
    library: str
    kind: str
    spec: dict[str, Any] = field(repr=False)

    @property
    def version(self) -> str:
        """The pinned version (pip), commit (git) or path (path)."""
        return str(self.spec.get("version") or self.spec.get("commit") or self.spec.get("path"))

    @property
    def needs(self) -> dict[str, Any]:
        return dict(self.spec.get("needs", {}))

    def depends_on(self) -> list[str]:
        """Other sources whose prepared root this one's steps or environment use ({root:NAME})."""
        texts = [a for step in self.spec.get("steps", []) for a in step]
        texts += list(self.spec.get("env", {}).values())
        names = []
        for text in texts:
            for m in _PLACEHOLDER.finditer(text):
                if m.group(1) == "root" and m.group(2) and m.group(2) not in names:
                    names.append(m.group(2))
        return names


def manifest_path(name: str) -> str:
    """Where a prepared source's manifest lives (relative to the workflow's directory)."""
    return BASELINE_MANIFEST.format(source=name)


@dataclass(frozen=True)
class Baselines:
    sources: dict[str, Source]
    use: tuple[str, ...]
    path: Path

    def targets(self) -> list[str]:
        """The manifests of every source in `use` (what `snakemake baselines` builds)."""
        return [manifest_path(name) for name in self.use]

    def dependency_manifests(self, name: str) -> list[str]:
        """The manifests a source's preparation needs first ({root:OTHER} in its steps/env)."""
        return [manifest_path(dep) for dep in self.source(name).depends_on()]

    def source(self, name: str) -> Source:
        try:
            return self.sources[name]
        except KeyError:
            raise ConfigError(
                f"{self.path}: no source {name!r}; defined: {', '.join(sorted(self.sources))}"
            ) from None


def load_baselines(path: str | Path) -> Baselines:
    """Load and check config/baselines.yaml: the schema, `use` names, placeholders, dependencies."""
    path = Path(path)
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    problems = validate(data, "baselines", path)
    if problems:
        raise ConfigError("invalid baselines file:\n  " + "\n  ".join(problems))
    sources = {
        name: Source(name=name, library=spec["library"], kind=spec["kind"], spec=spec)
        for name, spec in data["sources"].items()
    }
    for name in data["use"]:
        if name not in sources:
            raise ConfigError(
                f"{path}: 'use': {name!r} is not a source; defined: {', '.join(sorted(sources))}"
            )
    for src in sources.values():
        texts = [a for step in src.spec.get("steps", []) for a in step]
        texts += list(src.spec.get("env", {}).values())
        for text in texts:
            for m in _PLACEHOLDER.finditer(text):
                key, arg = m.group(1), m.group(2)
                if key == "root":
                    if arg not in sources:
                        raise ConfigError(
                            f"{path}: 'sources.{src.name}': {{root:{arg}}} names no source; "
                            f"defined: {', '.join(sorted(sources))}"
                        )
                elif key not in PLACEHOLDERS or arg is not None:
                    raise ConfigError(
                        f"{path}: 'sources.{src.name}': unknown placeholder {m.group(0)!r} in "
                        f"{text!r}; allowed: {', '.join('{' + p + '}' for p in PLACEHOLDERS)}, "
                        "{root:SOURCE}"
                    )
    for src in sources.values():
        run = src.spec.get("run", {})
        for text in [*run.get("argv", []), *run.get("env", {}).values()]:
            for m in _RUN_PLACEHOLDER.finditer(text):
                if m.group(1) not in RUN_PLACEHOLDERS:
                    raise ConfigError(
                        f"{path}: 'sources.{src.name}.run': unknown placeholder {m.group(0)!r} in "
                        f"{text!r}; allowed: {', '.join('{' + p + '}' for p in RUN_PLACEHOLDERS)}"
                    )
    _check_acyclic(path, sources)
    return Baselines(sources=sources, use=tuple(data["use"]), path=path)


def _check_acyclic(path: Path, sources: Mapping[str, Source]) -> None:
    state: dict[str, int] = {}

    def visit(name: str, chain: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise ConfigError(f"{path}: sources depend on each other: {' -> '.join(chain)}")
        state[name] = 1
        for dep in sources[name].depends_on():
            visit(dep, [*chain, dep])
        state[name] = 2

    for name in sources:
        visit(name, [name])


def substitute(text: str, values: Mapping[str, str], roots: Mapping[str, str]) -> str:
    """Replace the allowed placeholders in one argument; everything else stays literal."""

    def one(m: re.Match[str]) -> str:
        key, arg = m.group(1), m.group(2)
        if key == "root":
            if arg not in roots:
                raise SourceError(f"{{root:{arg}}} is not prepared (its manifest is missing)")
            return roots[arg]
        if key not in values:
            raise SourceError(f"unknown placeholder {m.group(0)!r}")
        return values[key]

    return _PLACEHOLDER.sub(one, text)


def _run(argv: list[str], cwd: Path, env: Mapping[str, str] | None = None) -> None:
    """One step: an argument list, no shell, output into our log."""
    print("+", " ".join(argv), f"(in {cwd})", flush=True)
    full_env = None if env is None else {**os.environ, **env}
    try:
        proc = subprocess.run(
            argv, cwd=cwd, env=full_env, stdout=sys.stdout, stderr=sys.stderr, check=False
        )
    except FileNotFoundError:
        raise SourceError(f"step {argv[0]!r} not found (is it installed?)") from None
    if proc.returncode != 0:
        raise SourceError(f"step {' '.join(argv)!r} failed with exit code {proc.returncode}")


def _git(args: list[str], cwd: Path) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SourceError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _check_expected(src: Source, root: Path) -> None:
    missing = [p for p in src.spec.get("expect", []) if not (root / p).exists()]
    if missing:
        raise SourceError(
            f"source {src.name}: expected file(s) missing under {root}: {', '.join(missing)}"
        )


def _prepare_pip(src: Source, dest: Path, python: str) -> tuple[Path, dict[str, Any]]:
    wheels = dest / "wheels"
    if wheels.exists():
        shutil.rmtree(wheels)
    wheels.mkdir(parents=True)
    spec = src.spec
    argv = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(wheels)]
    if "find_links" in spec:
        argv += ["--no-index", "--find-links", str(spec["find_links"])]
    elif "index_url" in spec:
        argv += ["--index-url", str(spec["index_url"])]
    argv.append(f"{spec['package']}=={spec['version']}")
    _run(argv, cwd=dest)
    found = sorted(wheels.glob("*.whl"))
    if len(found) != 1:
        raise SourceError(f"source {src.name}: expected one wheel, pip left {len(found)}")
    unpacked = dest / "unpacked"
    if unpacked.exists():
        shutil.rmtree(unpacked)
    with zipfile.ZipFile(found[0]) as z:
        for member in z.namelist():
            target = (unpacked / member).resolve()
            if not str(target).startswith(str(unpacked.resolve())):
                raise SourceError(f"source {src.name}: wheel member {member!r} escapes its folder")
        z.extractall(unpacked)
    root = unpacked / spec.get("root", ".")
    # The wheels ship versioned shared objects only; linkers look for the plain name.
    lib = root / "lib"
    if lib.is_dir():
        for so in lib.glob("*.so.*"):
            plain = lib / (so.name.split(".so.")[0] + ".so")
            if not plain.exists():
                plain.symlink_to(so.name)
    return root, {"wheel": found[0].name}


def _prepare_git(
    src: Source, dest: Path, values: dict[str, str], roots: Mapping[str, str]
) -> tuple[Path, dict[str, Any]]:
    spec = src.spec
    checkout = dest / "src"
    if checkout.exists():
        shutil.rmtree(checkout)
    dest.mkdir(parents=True, exist_ok=True)
    _run(["git", "clone", "--quiet", "--no-checkout", str(spec["url"]), str(checkout)], cwd=dest)
    _run(["git", "checkout", "--quiet", "--detach", str(spec["commit"])], cwd=checkout)
    resolved = _git(["rev-parse", "HEAD"], checkout)
    if not resolved.startswith(str(spec["commit"])):
        raise SourceError(
            f"source {src.name}: checked out {resolved}, which is not the pinned {spec['commit']}"
        )
    workdir = checkout / spec.get("subdir", ".")
    if not workdir.is_dir():
        raise SourceError(f"source {src.name}: subdir {spec.get('subdir')!r} not in the checkout")
    build = dest / "build"
    prefix = dest / "prefix"
    build.mkdir(exist_ok=True)
    prefix.mkdir(exist_ok=True)
    values = {**values, "src": str(workdir), "build": str(build), "prefix": str(prefix)}
    env = {k: substitute(v, values, roots) for k, v in spec.get("env", {}).items()}
    for step in spec.get("steps", []):
        _run([substitute(a, values, roots) for a in step], cwd=workdir, env=env)
    return dest, {"url": spec["url"], "resolved_commit": resolved}


def _prepare_path(src: Source, python: str) -> tuple[Path, dict[str, Any]]:
    raw = str(src.spec["path"])
    if raw.startswith("python:"):
        module = raw.split(":", 1)[1]
        code = f"import {module} as m; print(list(m.__path__)[0])"
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", module):
            raise SourceError(f"source {src.name}: {raw!r} is not a module name")
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SourceError(f"source {src.name}: {python} cannot import {module}")
        return Path(proc.stdout.strip()), {"module": module}
    expanded = os.path.expandvars(raw)
    if "$" in expanded:
        raise SourceError(f"source {src.name}: path {raw!r} names an unset variable")
    root = Path(expanded)
    if not root.exists():
        raise SourceError(f"source {src.name}: path {root} does not exist")
    return root, {}


def prepare_source(
    src: Source,
    dest: str | Path,
    *,
    roots: Mapping[str, str] | None = None,
    jobs: int = 2,
    cuda_archs: str = "90",
    python: str | None = None,
) -> dict[str, Any]:
    """Prepare `src` into `dest` and write `dest/manifest.json` (returned)."""
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    python = python or sys.executable
    values = {"jobs": str(jobs), "cuda_archs": cuda_archs, "python": python}
    roots = dict(roots or {})
    if src.kind == "pip":
        root, extra = _prepare_pip(src, dest, python)
    elif src.kind == "git":
        root, extra = _prepare_git(src, dest, values, roots)
    elif src.kind == "path":
        root, extra = _prepare_path(src, python)
    else:  # the schema allows no other kind
        raise SourceError(f"source {src.name}: unknown kind {src.kind!r}")
    _check_expected(src, root)
    manifest = {
        "name": src.name,
        "library": src.library,
        "kind": src.kind,
        "version": src.version,
        "root": str(root),
        "prepared_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **extra,
    }
    write_atomic(dest / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def roots_from_manifests(paths: list[str | Path]) -> dict[str, str]:
    """{source name: prepared root} from dependency manifests."""
    out = {}
    for p in paths:
        m = json.loads(Path(p).read_text())
        out[m["name"]] = m["root"]
    return out
