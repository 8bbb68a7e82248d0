"""python -m gicomm.doctor: measure this host's floors (when the floors driver is built), read
the latest campaign of this host kind (or, when there is none, measure the reduced points the
verdicts judge), check the host, print the verdict table and write the report page. Exit 0
whatever the verdicts are (they are findings); 2 for bad arguments."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
from pathlib import Path

import pandas as pd

from gicomm import REPO_ROOT
from gicomm.doctor import shortrun
from gicomm.doctor.checks import run_checks
from gicomm.doctor.host import Host, nvidia_gpus
from gicomm.doctor.render import floors_text, render_page, terminal_text
from gicomm.doctor.verdict import verdict_rows
from gicomm.records import read_records
from gicomm.tidy import tidy_frame

SHORT_RUN = ("auto", "all", "proxy", "none")


def host_gpus(host: Host) -> list[str]:
    out = host.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    return [line.strip() for line in (out or "").splitlines() if line.strip()]


def campaign_gpus(campaign_dir: Path) -> list[list[str]]:
    kinds = []
    for hw in campaign_dir.glob("hosts/*/hardware.json"):
        try:
            kinds.append(list(json.loads(hw.read_text()).get("gpus", {}).get("devices") or []))
        except (OSError, ValueError):
            continue
    return kinds


def cpu_model(host: Host) -> str | None:
    for line in (host.read(host.proc("cpuinfo")) or "").splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return None


def same_host(host: Host, hardware: Path, hostname: str, gpus: list[str]) -> bool:
    """Whether a campaign's host probe describes this machine: the host name alone is not
    enough (lent machines share names), so the GPUs, CPU model and core count must match too."""
    try:
        hw = json.loads(hardware.read_text())
    except (OSError, ValueError):
        return False
    cpu = hw.get("cpu") or {}
    return (
        hw.get("hostname") == hostname
        and list(hw.get("gpus", {}).get("devices") or []) == gpus
        and cpu.get("model") == cpu_model(host)
        and cpu.get("logical_cores") == os.cpu_count()
    )


def latest_campaign(results: Path, gpus: list[str], skip: str) -> Path | None:
    """The campaign under results/ (archive included) of this host kind (same GPU models and
    count) whose raw records are newest; None when there is none."""
    best: tuple[float, Path] | None = None
    for raw in [*results.glob("*/raw"), *results.glob("archive/*/raw")]:
        c = raw.parent
        if c.name == skip or gpus not in campaign_gpus(c):
            continue
        newest = max((f.stat().st_mtime for f in raw.rglob("*.jsonl")), default=0.0)
        if newest and (best is None or newest > best[0]):
            best = (newest, c)
    return best[1] if best else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gicomm.doctor", description=__doc__)
    ap.add_argument("--results", type=Path, default=REPO_ROOT / "results")
    ap.add_argument("--campaign", default="doctor", help="where this run's floors and page go")
    ap.add_argument(
        "--records",
        type=Path,
        help="a campaign folder (with raw/) to judge; default: the latest of this host kind",
    )
    ap.add_argument(
        "--measured-here",
        action="store_true",
        help="the --records were measured on this machine (else its host probe must match)",
    )
    ap.add_argument(
        "--floors-driver", type=Path, help="gicomm-bench-floors: measure the floors here first"
    )
    ap.add_argument(
        "--driver-prefix",
        default="",
        help="a command the floors driver runs under, e.g. 'build/ctest/bin/gicomm-emu-run' for "
        "the NIC floors over the emulated rdma-core (its records say rdma_provider emulated)",
    )
    ap.add_argument(
        "--bin-dir",
        type=Path,
        help="the drivers of the short run (default: the floors driver's folder)",
    )
    ap.add_argument(
        "--short-run",
        choices=SHORT_RUN,
        default="auto",
        help="also measure the reduced points the verdicts judge with the drivers beside the "
        "floors driver: auto (when no campaign of this host kind exists), all, proxy (only "
        "mini-proxy's), none",
    )
    ap.add_argument(
        "--numa-node",
        type=int,
        help="NUMA node of the short run's proxy workers (default: GPU 0's, from sysfs)",
    )
    ap.add_argument(
        "--nic",
        action="append",
        choices=sorted(shortrun.NIC_FLOORS),
        default=[],
        help="also measure the NIC floors through this backend (repeatable): mlx5 (a GPU "
        "thread's RDMA writes through mini-gda), verbs (a CPU thread's, through rdma-core)",
    )
    ap.add_argument(
        "--ranks",
        type=int,
        choices=[1, 2],
        default=1,
        help="the NIC floors in one process looping back on its device (1), or between two "
        "ranks (2: two local processes, or srun across the two nodes of a Slurm allocation)",
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--report-dir", type=Path, help="default: <results>/<campaign>/report")
    ap.add_argument("--sys-root", type=Path, default=Path("/sys"))
    ap.add_argument("--proc-root", type=Path, default=Path("/proc"))
    ap.add_argument("--boot-root", type=Path, default=Path("/boot"))
    a = ap.parse_args(argv)
    if a.runs < 1 or a.iters < 1:
        ap.error(f"--runs {a.runs} and --iters {a.iters} must be at least 1")
    if a.floors_driver is not None and not a.floors_driver.is_file():
        ap.error(
            f"--floors-driver {a.floors_driver}: no such file "
            "(build it: cmake --build <build> --target gicomm-bench-floors)"
        )
    host = Host(a.sys_root, a.proc_root, a.boot_root)
    hostname = socket.gethostname()
    gpus = host_gpus(host)
    files: list[Path] = []
    here = a.results / a.campaign
    if a.floors_driver:
        prefix = shlex.split(a.driver_prefix)
        step = shortrun.floors_step(a.iters, nic_apart=bool(a.nic))
        files += shortrun.run_step(
            a.floors_driver.parent, step, here, hostname, a.runs, prefix=prefix
        )
        if a.nic:
            nic_step = shortrun.nic_floors_step(a.iters, a.nic)
            files += shortrun.run_step(
                a.floors_driver.parent, nic_step, here, hostname, a.runs, prefix=prefix,
                world=a.ranks, name="nic",
            )  # fmt: skip
    source = a.records or latest_campaign(a.results, gpus, a.campaign)
    records_here = source is None
    if source is not None:
        files += sorted((source / "raw").rglob("*.jsonl"))
        records_here = a.measured_here or any(
            same_host(host, hw, hostname, gpus) for hw in source.glob("hosts/*/hardware.json")
        )
    short = a.short_run if a.short_run != "auto" else ("none" if source else "all")
    bin_dir = a.bin_dir or (a.floors_driver.parent if a.floors_driver else None)
    if short != "none" and bin_dir is not None:
        gpu = nvidia_gpus(host)
        node = a.numa_node if a.numa_node is not None else (gpu[0].numa_node if gpu else None)
        steps = [shortrun.proxy_step(node if node is not None else 0, a.iters)]
        if short == "all":
            steps.insert(0, shortrun.gda_step(a.iters))
        for step in steps:
            files += shortrun.run_step(bin_dir, step, here, hostname, a.runs)
    kind = ", ".join(gpus) or "no GPU"
    how = "given" if a.records else f"the latest of this host kind: {kind}"
    records_from = (
        (
            f"campaign {source} ({how})"
            if source
            else f"no campaign of this host kind ({kind}) under {a.results}"
        )
        + (
            f"; floors measured now by {a.floors_driver.name}"
            if a.floors_driver
            else "; floors not measured now (no --floors-driver)"
        )
        + (
            f"; NIC floors through {', '.join(a.nic)}, "
            + ("two ranks" if a.ranks == 2 else "one process looped back")
            + (f", under {a.driver_prefix}" if a.driver_prefix else "")
            if a.nic and a.floors_driver
            else ""
        )
        + (f"; reduced points measured now: {short}" if bin_dir is not None else "")
    )
    recs = read_records(sorted(set(files)))
    tidy = tidy_frame(recs)
    logs = sorted(source.glob("**/*.log")) if source else []
    checks = run_checks(host, tidy if len(tidy) else None, logs, records_here=records_here)
    verdicts = verdict_rows(tidy, checks)
    floors = tidy[tidy["experiment"] == "floors"] if len(tidy) else pd.DataFrame()
    if len(floors):
        keep = [
            "run_index",
            "metric",
            "unit",
            "status",
            "error",
            "p50",
            "p99",
            "min",
            "sm_clock_mhz",
            "topology",
            "rdma_provider",
            *[c for c in floors if c.startswith("param_")],
        ]
        floors = floors[[c for c in keep if c in floors]]
    print(f"gicomm doctor: {records_from}")
    print(terminal_text(verdicts, checks), end="")
    print(floors_text(floors), end="")
    page = render_page(
        a.report_dir or a.results / a.campaign / "report",
        a.campaign,
        verdicts,
        floors,
        checks,
        records_from,
        f"{hostname} ({kind})",
    )
    print(f"gicomm doctor: page {page}")
    return 0
