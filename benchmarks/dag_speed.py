#!/usr/bin/env python3
"""How fast the pipeline plans the full sweep, and how many Slurm jobs it submits per 1,000 points.

For each platform (config/platforms/{h100,h200,b200,gb200}.yaml) this dry-runs the default campaign
with the full sweep through the slurm profile, from the repository root, as a user would:

    snakemake -n --forceall --profile slurm \
        --configfile config/platforms/<p>.yaml --config sweep=full

(--forceall: every job of the sweep, whatever results already exist) and prints, per platform: the
wall time of that command (Python start, workflow parse, config and platform validation, sweep
expansion, DAG build and the dry-run listing; the target is under 10 s), the sweep size
(points, and point-runs = points x independent process runs), the Snakemake jobs, the Slurm jobs
that would be submitted (jobs of non-local rules, every group job counted once), and Slurm jobs per
1,000 point-runs.

    .venv/bin/python benchmarks/dag_speed.py [--platforms h200 b200] [--repeat 3] [--json out.json]

Exit status 1 when a platform's DAG takes 10 s or more (or the dry-run fails).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from gicomm.config import load_campaign  # noqa: E402

PLATFORMS = ("h100", "h200", "b200", "gb200")
TARGET_S = 10.0


@dataclass
class Result:
    platform: str
    dag_s: float
    points: int
    point_runs: int
    jobs: int
    slurm_jobs: int
    slurm_jobs_per_1000_point_runs: float
    jobs_by_rule: dict[str, int]


def sweep_size(platform: str) -> tuple[int, int]:
    """(points, point-runs) of the default campaign's full sweep on `platform`."""
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg.update(yaml.safe_load((REPO / "config" / "platforms" / f"{platform}.yaml").read_text()))
    cfg["sweep"] = "full"
    c = load_campaign(cfg)
    points = sum(len(e.points(c.sweep)) for e in c.experiments.values())
    runs = sum(c.runs_of(e) * len(e.points(c.sweep)) for e in c.experiments.values())
    return points, runs


def local_rules(platform: str) -> set[str]:
    """Rules that run on the submit host under a cluster executor (localrules, `localrule: True`),
    read from the parsed workflow (Snakemake 9 API; pinned in requirements.txt)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        ResourceSettings,
    )

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        w = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(
                configfiles=[REPO / "config" / "platforms" / f"{platform}.yaml"],
                config={"sweep": "full"},
            ),
            snakefile=REPO / "Snakefile",
            workdir=REPO,
        )
        w.dag(dag_settings=DAGSettings())
        wf = w._workflow
        return {r.name for r in wf.rules if r.name in wf._localrules or r.norun}


def grouped_rules() -> set[str]:
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "profile.yaml").read_text())
    return {g.split("=", 1)[0] for g in profile.get("groups") or []}


def count_jobs(out: str, local: set[str]) -> tuple[dict[str, int], int]:
    """Jobs per rule, and Slurm submissions, from a non-quiet `snakemake -n` listing (which prints
    local and remote jobs alike: `local` names the local rules)."""
    by_rule: dict[str, int] = {}
    remote_ungrouped = 0
    grouped = grouped_rules()
    groups = 0
    for line in out.splitlines():
        if re.search(r"\] Group job \S+ \(jobs", line) or re.match(
            r"\s*Group job \S+ \(jobs", line
        ):
            groups += 1
            continue
        m = re.match(r"\s*(local)?rule (\w+):$", line)
        if m:
            rule = m.group(2)
            by_rule[rule] = by_rule.get(rule, 0) + 1
            if not m.group(1) and rule not in grouped and rule not in local:
                remote_ungrouped += 1
    return by_rule, remote_ungrouped + groups


def measure(platform: str, repeat: int) -> Result:
    argv = [
        sys.executable, "-m", "snakemake", "-n", "--forceall", "--profile", "slurm",
        "--configfile", f"config/platforms/{platform}.yaml", "--config", "sweep=full",
    ]  # fmt: skip
    times = []
    out = ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"{platform}: dry-run failed:\n{proc.stderr[-3000:]}")
        out = proc.stdout
    by_rule, slurm_jobs = count_jobs(out, local_rules(platform) - grouped_rules())
    points, point_runs = sweep_size(platform)
    return Result(
        platform=platform,
        dag_s=round(statistics.median(times), 2),
        points=points,
        point_runs=point_runs,
        jobs=sum(by_rule.values()),
        slurm_jobs=slurm_jobs,
        slurm_jobs_per_1000_point_runs=round(1000 * slurm_jobs / max(point_runs, 1), 1),
        jobs_by_rule=dict(sorted(by_rule.items())),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--platforms", nargs="+", default=list(PLATFORMS), choices=PLATFORMS)
    ap.add_argument("--repeat", type=int, default=1, help="dry-runs per platform (median is shown)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the jobs per rule")
    args = ap.parse_args(argv)

    results = [measure(p, args.repeat) for p in args.platforms]
    cols = ("DAG s", 6), ("points", 7), ("pt-runs", 8), ("jobs", 6), ("slurm", 6), ("per 1000", 9)
    head = f"{'platform':9} " + " ".join(f"{name:>{width}}" for name, width in cols)
    print(head)
    print("-" * len(head))
    for r in results:
        print(
            f"{r.platform:9} {r.dag_s:6.2f} {r.points:7d} {r.point_runs:8d} {r.jobs:6d} "
            f"{r.slurm_jobs:6d} {r.slurm_jobs_per_1000_point_runs:9.1f}"
        )
    total = sum(r.dag_s for r in results)
    print(f"{'all':9} {total:6.2f}  (the {len(results)} DAGs one after the other)")
    print(
        "\nDAG s: wall time of `snakemake -n --forceall --profile slurm --configfile "
        f"config/platforms/<p>.yaml --config sweep=full` (target < {TARGET_S:.0f} s).\n"
        "slurm: Slurm jobs submitted (jobs of non-local rules; a group job counts once);\n"
        "per 1000: Slurm jobs per 1,000 point-runs (a point measured in one independent run)."
    )
    if args.verbose:
        for r in results:
            print(f"{r.platform}: {r.jobs_by_rule}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    slow = [r.platform for r in results if r.dag_s >= TARGET_S]
    if slow:
        print(f"DAG build of {', '.join(slow)} took {TARGET_S:.0f} s or more", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
