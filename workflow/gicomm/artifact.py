"""ARTIFACT.md, generated from config/claims.yaml and the experiment configs so it never drifts:
every claim with the one command that tests it, the hardware it needs, the expected run time and
disk, and what a pass looks like; plus the short "kick the tires" paths.

Run time and disk come from measured campaigns (ESTIMATE_CAMPAIGNS, on a two-GPU H200): per
experiment, the span of its records' timestamps per process run, and the bytes of its raw records,
scaled to the full sweep and the experiment's number of runs by the ratio of point and run counts.
Experiments never measured there (they need a NIC) get an upper bound instead, marked as such: the
pipeline stops every point at its time limit (the experiment's point_s, else config.yaml's), so
points x runs x limit bounds the time; disk is their record count at the largest record size seen.

`python -m gicomm.artifact` rewrites ARTIFACT.md; tests/test_artifact.py fails when it is stale
or when a claim lacks a command, hardware or time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gicomm import REPO_ROOT
from gicomm.claims import (
    _selectors,
    decide_settings,
    load_claims,
    requirement_text,
    selector_experiments,
)
from gicomm.experiments import Experiment, load_experiment

# Campaigns measured on the same two-GPU H200 kind, in order of preference (the pipeline's own
# campaign first; then the developers' runs of each driver).
ESTIMATE_CAMPAIGNS = ("h200x2-pipeline", "h200x2-2026-11-30")
# Fixed costs around the measurements (seen on the same machine: build on 32 cores, report).
BUILD_MIN = 2.0
REPORT_MIN = 1.0
# Archived raw records are under 1 kB each (all but four soak summaries of 4,869).
RECORD_BYTES = 1000


@dataclass(frozen=True)
class Cost:
    minutes: float | None  # full sweep, all runs
    disk_mb: float | None
    basis: str
    bound: bool = False  # an upper bound from the time limits, not a measurement


def claim_experiments(claim: dict[str, Any], configured: set[str]) -> list[str]:
    """The configured experiments whose records decide a claim."""
    names: list[str] = []
    for sel in _selectors(claim["check"]):
        names += selector_experiments(sel, claim["experiment"])
    return [n for n in dict.fromkeys(names) if n in configured]


def claim_command(claim_id: str) -> str:
    return f"make claim CLAIM={claim_id}"


def _scan(path: Path) -> tuple[list[dt.datetime], set[str], int]:
    """Timestamps and point ids of the measured (status ok) records of a raw file, and its size."""
    stamps, points = [], set()
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("status") != "ok":
            continue  # skipped points took no time to measure: they say nothing about cost
        points.add(rec.get("point_id", ""))
        if rec.get("timestamp"):
            stamps.append(dt.datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00")))
    return stamps, points, path.stat().st_size


def measured_cost(e: Experiment, archive: Path) -> Cost:
    """Time and disk of the full sweep, scaled from the first archived campaign that measured it."""
    others = sorted(p.name for p in archive.iterdir() if p.name not in ESTIMATE_CAMPAIGNS)
    for campaign in (*ESTIMATE_CAMPAIGNS, *others):
        raw = archive / campaign / "raw" / e.name
        spans: dict[str, list[dt.datetime]] = {}
        points: set[str] = set()
        size = 0
        for f in sorted(raw.rglob("*.jsonl")) if raw.is_dir() else []:
            stamps, ids, nbytes = _scan(f)
            size += nbytes
            points |= ids
            # one process run per folder (pipeline: run<r>/batch<b>.jsonl) or file (run<r>.jsonl)
            run = f.parent.name if f.parent.name.startswith("run") else f.stem
            spans.setdefault(run, []).extend(stamps)
        if points:
            break
    else:
        return bounded_cost(e)
    seconds = sum((max(s) - min(s)).total_seconds() + 1 for s in spans.values() if s)
    runs = max(1, len(spans))
    # to the full sweep, at the number of independent runs `make claim` measures
    want = claim_runs()
    scale = len(e.points("full")) / max(1, len(points)) * want / runs
    return Cost(
        seconds * scale / 60,
        size * scale / 1e6,
        f"{runs} run(s) of {len(points)} points in {campaign} took {seconds:.0f} s; "
        f"x{scale:.1f} for {want} runs of the full sweep ({len(e.points('full'))} points)",
    )


def claim_runs() -> int:
    """The independent runs `make claim` measures: as many as a verdict needs."""
    return int(decide_settings()["min_runs"])


def default_point_s(root: Path = REPO_ROOT) -> int:
    return int(yaml.safe_load((root / "config" / "config.yaml").read_text())["timeouts"]["point_s"])


def bounded_cost(e: Experiment, root: Path = REPO_ROOT) -> Cost:
    """An experiment never measured on our machines: the bound the pipeline's time limits give."""
    runs = len(e.points("full")) * claim_runs()
    limit = e.point_s or default_point_s(root)
    return Cost(
        runs * limit / 60,
        runs * len(e.metrics) * RECORD_BYTES / 1e6,
        f"never measured in an archived campaign (needs hardware we lack): at most "
        f"{len(e.points('full'))} points x {claim_runs()} runs x {limit} s per-point limit; "
        f"disk at most {len(e.metrics)} records of {RECORD_BYTES} B per point-run",
        bound=True,
    )


def fmt_minutes(m: float | None, bound: bool = False) -> str:
    if m is None:
        return "unknown"
    text = f"{m:.0f} min" if m >= 1 else "< 1 min"
    return f"at most {text}" if bound else text


@dataclass
class Row:
    claim: dict[str, Any]
    experiments: list[str]
    minutes: float | None
    disk_mb: float | None
    basis: str
    bound: bool = False


def experiment_costs(root: Path = REPO_ROOT) -> dict[str, Cost]:
    exp_dir = root / "config" / "experiments"
    archive = root / "results" / "archive"
    return {
        p.stem: measured_cost(load_experiment(p), archive) for p in sorted(exp_dir.glob("*.yaml"))
    }


def claim_rows(root: Path = REPO_ROOT) -> list[Row]:
    costs = experiment_costs(root)
    rows = []
    for c in load_claims(root / "config" / "claims.yaml"):
        names = claim_experiments(c, set(costs))
        known = [costs[n] for n in names]
        bound = any(k.bound for k in known)
        if names and all(k.minutes is not None for k in known):
            minutes = BUILD_MIN + REPORT_MIN + sum(k.minutes or 0 for k in known)
            disk = sum(k.disk_mb or 0 for k in known)
            unmeasured = [n for n, k in zip(names, known, strict=True) if k.bound]
            basis = f"upper bound ({', '.join(unmeasured)} never measured)" if bound else "measured"
        else:
            minutes, disk = None, None
            basis = "no experiment of this repository measures it yet"
        rows.append(Row(c, names, minutes, disk, basis, bound))
    return rows


def pass_text(check: dict[str, Any], claim: dict[str, Any]) -> str:
    paper = claim["paper"]
    kind = check["kind"]
    tol = check.get("tolerance")
    if kind == "value":
        return f"within {tol:.0%} of {paper['value']} {paper['unit']}" if tol else "matches"
    if kind in ("ratio", "difference"):
        cmp = check.get("compare", "within")
        return f"{kind} {cmp} {check.get('threshold', paper['value'])}" + (
            f" (tolerance {tol:.0%})" if tol else ""
        )
    if kind == "ordering":
        return "the measured values keep the paper's order"
    return kind


HEADER = REPO_ROOT / "report" / "artifact" / "header.md"  # the prose; the tables are generated


def render(root: Path = REPO_ROOT) -> str:
    rows = claim_rows(root)
    out = [HEADER.read_text().format(build=BUILD_MIN, report=REPORT_MIN)]
    out.append(
        "| claim | paper | command | needs | time | disk | passes when |\n"
        "|---|---|---|---|---|---|---|"
    )
    for r in rows:
        c = r.claim
        disk = "unknown" if r.disk_mb is None else f"{max(r.disk_mb, 0.1):.1f} MB"
        disk = f"at most {disk}" if r.bound and r.disk_mb is not None else disk
        p = c["paper"]
        paper = f"{p['value']} {p['unit']} ({c['paper_ref']}, {p['platform']})"
        out.append(
            f"| `{c['id']}`: {c['claim']} | {paper} | `{claim_command(c['id'])}` | "
            f"{requirement_text(c['requires'])} | {fmt_minutes(r.minutes, r.bound)} | {disk} | "
            f"{pass_text(c['check'], c)} |"
        )
    out.append("\n## What each claim runs\n")
    for r in rows:
        out.append(f"- `{r.claim['id']}`: {', '.join(r.experiments) or 'no experiment yet'}")
    out.append("\n## Basis of the time and disk estimates\n")
    read = {n for r in rows for n in r.experiments}
    for name, cost in sorted(experiment_costs(root).items()):
        if name in read:
            out.append(f"- `{name}`: {cost.basis}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", type=Path, default=REPO_ROOT)
    args = ap.parse_args(argv)
    (args.root / "ARTIFACT.md").write_text(render(args.root))
    print(f"wrote {args.root / 'ARTIFACT.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
