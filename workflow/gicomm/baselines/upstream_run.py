"""Run the upstream test programs of the library baselines that have no harness of ours (MSCCL++
PortChannel, UCCL-EP, DeepEP V1, fabric-lib) and turn what they print into records.

The batch runner calls this for a library_baselines point of these transports
(gicomm.baselines.dispatch). The source is the point's ``source`` parameter or the first source in
config/baselines.yaml ``use`` of the transport's library that has a ``run`` section; its prepared
root comes from ``build/baselines/<source>/manifest.json`` (``snakemake baselines``). The run's
argv (placeholders {root} {src} {build} {prefix} {python} {peer}) runs without a shell, its output
goes through the tool's parser (gicomm.baselines.parsers) and becomes records that carry the
point's id and parameters plus the parser's (``rank``, ``phase``, ``test``, ``upstream_stat``).

A point whose source is not prepared, or whose host lacks what the source needs (the source's and
its run's ``needs``, checked as the pipeline checks an experiment's), is recorded as ``skipped``
with the reason; a program that fails, times out or prints no result is ``failed``, with the end
of its output. Environment: GICOMM_BASELINES_FILE (default config/baselines.yaml),
GICOMM_BASELINES_DIR (default build/baselines), both relative to the repository.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gicomm.baselines.parsers import ParseError, Scalar, parse, to_records
from gicomm.baselines.sources import RUN_PLACEHOLDERS, Baselines, Source
from gicomm.needs import unmet_needs
from gicomm.records import RecordIdentity, new_record

# transport (library_baselines) -> library (config/baselines.yaml)
TRANSPORTS: dict[str, str] = {
    "mscclpp-port": "mscclpp",
    "uccl-ep": "uccl-ep",
    "deepep-v1": "deepep",
    "fabric-lib": "fabric-lib",
}
# What a skipped or failed point of each tool is reported under (the metrics its parser gives).
TOOL_METRICS: dict[str, list[str]] = {
    "mscclpp-mp-unit": ["rtt_ns"],
    "deepep-low-latency": ["time_ns", "goodput"],
    "uccl-ep-low-latency": ["time_ns", "goodput"],
    "fabric-debug": ["time_ns", "goodput", "msg_rate"],
    "nvshmem-perftest": ["time_ns"],
    "nccl-tests": ["time_ns"],
    "perftest": ["time_ns"],
}
DEFAULT_TIMEOUT_S = 600
TAIL_CHARS = 600
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")

HardwareFn = Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class Point:
    point_id: str
    params: dict[str, Scalar]


@dataclass(frozen=True)
class Outcome:
    status: str  # ok | skipped | failed
    records: list[dict[str, Any]]
    summary: str


class Runner:
    """Runs upstream points of one batch; `logs` keeps each program's output (evidence)."""

    def __init__(
        self, baselines: Baselines, builds: Path, hardware: HardwareFn, logs: Path
    ) -> None:
        self.baselines = baselines
        self.builds = builds
        self._hardware_fn = hardware
        self._hardware: dict[str, Any] | None = None
        self.logs = logs

    def hardware(self) -> dict[str, Any]:
        if self._hardware is None:
            self._hardware = self._hardware_fn()
        return self._hardware

    # ---- records ---------------------------------------------------------------------------------
    def status_records(
        self, who: RecordIdentity, p: Point, metrics: list[str], status: str, why: str
    ) -> list[dict[str, Any]]:
        return [
            new_record(who, params=p.params, metric=m, unit="", status=status, error=why)
            for m in metrics
        ]

    def skipped(self, who: RecordIdentity, p: Point, metrics: list[str], why: str) -> Outcome:
        why = "not measurable on this host: " + why
        return Outcome("skipped", self.status_records(who, p, metrics, "skipped", why), why)

    def failed(self, who: RecordIdentity, p: Point, metrics: list[str], why: str) -> Outcome:
        return Outcome("failed", self.status_records(who, p, metrics, "failed", why), why)

    # ---- one point -------------------------------------------------------------------------------
    def source_for(self, transport: str, p: Point) -> Source | str:
        """The source that serves the point, or why there is none."""
        library = TRANSPORTS[transport]
        named = p.params.get("source")
        if named is not None:
            src = self.baselines.sources.get(str(named))
            if src is None:
                return f"parameter source={named}: no such source in {self.baselines.path}"
            if src.library != library:
                return (
                    f"parameter source={named}: a {src.library} source, not {library} ({transport})"
                )
            if "run" not in src.spec:
                return f"source {named} in {self.baselines.path} has no `run` section"
            return src
        for name in self.baselines.use:
            src = self.baselines.sources[name]
            if src.library == library and "run" in src.spec:
                return src
        return (
            f"no source of library {library} in `use` of {self.baselines.path} has a `run` "
            "section (how to run its upstream test)"
        )

    def run_point(self, who: RecordIdentity, p: Point) -> Outcome:
        """Run point `p` (its params without transport and NIC backend, which `who` names)."""
        found = self.source_for(who.transport, p)
        if isinstance(found, str):
            if found.startswith("parameter source="):  # a bad parameter: the point fails
                return self.failed(who, p, ["upstream"], found)
            return self.skipped(who, p, ["upstream"], found)
        src = found
        run = dict(src.spec["run"])
        tool = str(run["tool"])
        metrics = TOOL_METRICS.get(tool, ["upstream"])
        needs = {**src.needs, **run.get("needs", {})}
        needs.pop("cuda_build", None)  # the upstream program is its own build, not native/'s
        nodes = int(needs.get("nodes", 1))
        peer = p.params.get("peer")
        reasons = unmet_needs(needs, self.hardware(), {"cuda": True}, max_nodes=2 if peer else 1)
        if nodes > 1 and not peer:
            reasons.append(
                f"{src.library}'s test runs across {nodes} nodes: give the point a `peer` "
                "parameter (the other node's address, where its server side runs)"
            )
        manifest_file = self.builds / src.name / "manifest.json"
        if not manifest_file.exists():
            reasons.append(
                f"source {src.name} ({src.library} {src.version}) is not prepared: no "
                f"{manifest_file} (`snakemake baselines` builds it from {self.baselines.path})"
            )
        if reasons:
            return self.skipped(who, p, metrics, f"{src.name}: " + "; ".join(reasons))
        manifest = json.loads(manifest_file.read_text())
        values = self.placeholders(src, manifest, p)
        try:
            argv = [substitute(a, values) for a in run["argv"]]
            env = {k: substitute(v, values) for k, v in run.get("env", {}).items()}
        except KeyError as exc:
            return self.failed(who, p, metrics, f"source {src.name}: run: {exc.args[0]}")
        timeout = int(run.get("timeout_s", DEFAULT_TIMEOUT_S))
        log(f"{src.name}: {' '.join(argv)}" + (f" (env {env})" if env else ""))
        try:
            proc = subprocess.run(
                argv,
                env={**os.environ, **env},
                cwd=values["src"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                timeout=timeout,
                check=False,
            )
        except FileNotFoundError:
            return self.failed(who, p, metrics, f"{src.name}: upstream program {argv[0]} not found")
        except subprocess.TimeoutExpired as exc:
            text = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode()
            return self.failed(
                who, p, metrics, f"{src.name}: {argv[0]} timed out after {timeout} s{tail(text)}"
            )
        self.keep_log(p, proc.stdout)
        if proc.returncode != 0:
            return self.failed(
                who,
                p,
                metrics,
                f"{src.name}: {os.path.basename(argv[0])} exited with code {proc.returncode}"
                f"{tail(proc.stdout)}",
            )
        try:
            rows = parse(tool, proc.stdout)
        except ParseError as exc:
            skipped_tests = skipped_by_upstream(tool, proc.stdout)
            if skipped_tests:
                return self.skipped(
                    who,
                    p,
                    metrics,
                    f"{src.name}: the upstream test skipped {', '.join(skipped_tests)} "
                    "(built or run without what it needs)",
                )
            return self.failed(
                who, p, metrics, f"{src.name}: {tool} printed no result: {exc}{tail(proc.stdout)}"
            )
        recs = to_records(rows, who, params={**p.params, "tool": tool, "source": src.name})
        return Outcome("ok", recs, f"{len(recs)} values from {tool}")

    def placeholders(self, src: Source, manifest: dict[str, Any], p: Point) -> dict[str, str]:
        root = Path(manifest["root"])
        if src.kind == "git":
            checkout = root / "src" / str(src.spec.get("subdir", "."))
            build, prefix = root / "build", root / "prefix"
        else:
            checkout = build = prefix = root
        values = {
            "root": str(root),
            "src": str(checkout.resolve()),
            "build": str(build),
            "prefix": str(prefix),
            "python": sys.executable,
        }
        if p.params.get("peer") is not None:
            values["peer"] = str(p.params["peer"])
        assert set(values) <= set(RUN_PLACEHOLDERS)
        return values

    def keep_log(self, p: Point, text: str) -> None:
        """The upstream output beside the records (evidence; <logs>/<point_id>.log)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", p.point_id)
        (self.logs / f"{safe}.log").write_text(text)


def substitute(text: str, values: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise KeyError(
                f"placeholder {{{key}}} has no value here (known: "
                f"{', '.join('{' + k + '}' for k in sorted(values))})"
            )
        return values[key]

    return _PLACEHOLDER.sub(one, text)


def skipped_by_upstream(tool: str, text: str) -> list[str]:
    if tool == "mscclpp-mp-unit":
        from gicomm.baselines.parsers.mscclpp import skipped

        return skipped(text)
    return []


def tail(text: str | None) -> str:
    text = (text or "").strip()
    if not text:
        return ""
    return "; output ends: " + text[-TAIL_CHARS:].replace("\n", " | ")


def log(msg: str) -> None:
    print(f"[gicomm] upstream_run: {msg}", file=sys.stderr, flush=True)


def default_hardware() -> dict[str, Any]:
    """GPUs and RDMA devices of this node; GICOMM_SYSFS_ROOT moves /sys (tests)."""
    from gicomm.probe import probe_gpus, probe_rdma

    sys_root = Path(os.environ.get("GICOMM_SYSFS_ROOT") or "/sys")
    return {"gpus": probe_gpus(), "rdma": probe_rdma(sys_root)}
