"""The HTML report of a campaign: an index (campaign, hosts, provenance, every experiment with its
status) and one page per experiment (figure, sweep table, status, provenance, the command that
regenerates it)."""

from __future__ import annotations

import html
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from gicomm import CONFIG_DIR, REPO_ROOT
from gicomm.fsutil import write_atomic
from gicomm.yamlio import load_yaml

TEMPLATES = REPO_ROOT / "report" / "templates"


@dataclass
class ExperimentStatus:
    name: str
    title: str
    paper_ref: str
    status: str  # measured here | archived | not runnable here | failed | no records
    detail: str
    counts: dict[str, int]


def experiment_meta(name: str) -> dict[str, Any]:
    path = CONFIG_DIR / "experiments" / f"{name}.yaml"
    return load_yaml(path) if path.exists() else {"title": name, "paper_ref": ""}


def experiment_status(name: str, df: pd.DataFrame, current: bool) -> ExperimentStatus:
    meta = experiment_meta(name)
    d = df[df["experiment"] == name]
    counts = {str(k): int(v) for k, v in d["status"].value_counts().items()}
    reasons = "; ".join(
        sorted(d.loc[d["status"] != "ok", "error"].dropna().astype(str).unique())[:3]
    )
    if counts.get("ok"):
        status = "measured here" if current else "archived"
        detail = (
            f"{counts.get('failed', 0)} failed, {counts.get('skipped', 0)} skipped records"
            if len(counts) > 1
            else ""
        )
        if reasons:
            detail += f": {reasons}"
    elif counts.get("failed"):
        status, detail = "failed", reasons
    elif counts.get("skipped"):
        status, detail = "not runnable here", reasons
    else:
        status, detail = "no records", ""
    return ExperimentStatus(
        name, meta.get("title", name), meta.get("paper_ref", ""), status, detail, counts
    )


def _gpu_line(d: dict[str, Any]) -> str:
    clock = f"{d.get('sm_clock_mhz')}/{d.get('sm_clock_max_mhz')} MHz"
    return f"{d['name']} ({d.get('sm_count')} SMs, SM clock now/max {clock})"


def _nic_line(d: dict[str, Any]) -> str:
    return (
        f"{d['name']} fw {d.get('firmware')} PCIe {d.get('pci_address')} NUMA {d.get('numa_node')}"
    )


def host_summary(hw: dict[str, Any]) -> dict[str, Any]:
    """The probe record of a host, as lines for the report's host section."""
    cpu, gpus, rdma, git = hw["cpu"], hw.get("gpus", {}), hw.get("rdma", {}), hw.get("git") or {}
    numa = len(cpu.get("numa_nodes") or [])
    return {
        "host": hw.get("host"),
        "hostname": hw.get("hostname"),
        "provenance_id": hw.get("provenance_id"),
        "date": hw.get("date"),
        "cpu": f"{cpu.get('model')} ({cpu.get('logical_cores')} logical cores, {numa} NUMA "
        f"nodes, governor {cpu.get('governor') or 'n/a'})",
        "gpus": ", ".join(map(_gpu_line, gpus.get("devices", []))) or gpus.get("note") or "none",
        "driver": f"{gpus.get('driver') or 'n/a'} / CUDA "
        f"{gpus.get('cuda_driver_version') or 'n/a'}",
        "nics": ", ".join(map(_nic_line, rdma.get("devices", []))) or rdma.get("note") or "none",
        "tools": ", ".join(f"{k} {v}" for k, v in hw.get("tools", {}).items() if v),
        "git": f"{git.get('commit') or 'n/a'}{' (dirty)' if git.get('dirty') else ''}",
        "kernel": hw.get("kernel"),
        "json": html.escape(json.dumps(hw, indent=2)),
    }


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )


def sweep_table(summary: pd.DataFrame, name: str) -> str:
    d = summary[summary["experiment"] == name].dropna(axis=1, how="all")
    if d.empty:
        return "<p>No measured points.</p>"
    d = d.drop(columns=[c for c in ("campaign", "experiment", "point_id") if c in d])
    d = d.rename(columns=lambda c: c.removeprefix("param_"))
    return d.to_html(index=False, classes="sweep", float_format=lambda v: f"{v:.4g}", border=0)


def render_campaign_report(
    campaign: str,
    records_csv: Path,
    summary_csv: Path,
    hardware_files: list[Path],
    figure_files: list[Path],
    index: Path,
    current: bool,
) -> None:
    df = pd.read_csv(records_csv, low_memory=False)
    summary = pd.read_csv(summary_csv, low_memory=False)
    hosts = [host_summary(json.loads(p.read_text())) for p in hardware_files]
    figures = {p.stem for p in figure_files}
    names = sorted(figures | set(df["experiment"].dropna().unique()))
    statuses = [experiment_status(n, df, current) for n in names]
    env = environment()
    out = index.parent
    (out / "experiments").mkdir(parents=True, exist_ok=True)
    (out / "data").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TEMPLATES.parent / "style.css", out / "style.css")
    for s in statuses:
        d = df[df["experiment"] == s.name]
        d.to_csv(out / "data" / f"{s.name}.csv", index=False)
        page = env.get_template("experiment.html.j2").render(
            campaign=campaign,
            exp=s,
            meta=experiment_meta(s.name),
            has_figure=s.name in figures,
            table=sweep_table(summary, s.name),
            provenance=sorted(d["provenance_id"].dropna().astype(str).unique()),
            current=current,
        )
        write_atomic(out / "experiments" / f"{s.name}.html", page)
    page = env.get_template("index.html.j2").render(
        campaign=campaign, hosts=hosts, experiments=statuses, current=current, n_records=len(df)
    )
    write_atomic(index, page)
