"""The HTML report of a campaign, and the report across campaigns.

Campaign report (results/<campaign>/report/):
  index.html              the claims table (paper value | this campaign | verdict), every paper
                          experiment with its status, the paper figures and tables, hosts/provenance
  experiments/<exp>.html  figures, this campaign's tables beside the paper's, claim checks, the
                          sweep (median, min..max and CI over runs, p99), same-run transport
                          ratios, clock fits, provenance, and the commands that regenerate it
  model.html              the performance model: validation against the paper, fitted parameters,
                          predicted beside measured, the platform's predictions
  data/<exp>.csv          tidy CSV of every record of the experiment (and claims.csv, summary.csv,
                          model_*.csv)
Across campaigns (results/combined/report/index.html): each claim's verdict per campaign and one
comparison figure per experiment (platform against platform, software NIC against real NIC).
"""

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
from gicomm.aggregate import as_text, param_columns
from gicomm.claims import NOT_MEASURABLE, NOT_REPRODUCED, REPRODUCED
from gicomm.fsutil import write_atomic
from gicomm.layout import MODEL_OUTPUTS
from gicomm.paper import EXPERIMENT_ALIASES, PAPER_EXPERIMENTS
from gicomm.plots import PAPER_FIGURES
from gicomm.tables import PAPER_TABLES, paper_table
from gicomm.yamlio import load_yaml

TEMPLATES = REPO_ROOT / "report" / "templates"
MAX_TABLE_ROWS = 1500  # longer sweeps are cut in the page (the CSVs carry every row)
SWEEP_COLUMNS = ["transport", "nic_backend", "cpu_clock_state", "host", "metric", "unit", "runs",
                 "p50", "p50_min", "p50_max", "p50_ci_lo", "p50_ci_hi", "p99", "p99_max",
                 "sm_clock_mhz"]  # fmt: skip


@dataclass
class ExperimentStatus:
    name: str
    title: str
    paper_ref: str
    status: str  # measured here | archived | not runnable here | failed | not in this campaign
    detail: str
    counts: dict[str, int]


def experiment_meta(name: str) -> dict[str, Any]:
    path = CONFIG_DIR / "experiments" / f"{name}.yaml"
    meta = load_yaml(path) if path.exists() else {}
    meta = meta if isinstance(meta, dict) else {}
    meta.setdefault("title", name.replace("_", " "))
    meta.setdefault("paper_ref", PAPER_EXPERIMENTS.get(name, ""))
    return meta


def experiment_status(name: str, df: pd.DataFrame, current: bool) -> ExperimentStatus:
    meta = experiment_meta(name)
    d = df[df["experiment"] == name] if not df.empty else df
    counts = {str(k): int(v) for k, v in d["status"].value_counts().items()} if len(d) else {}
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
        status, detail = "not in this campaign", "no records: not configured or not run"
    aliases = [e for e in EXPERIMENT_ALIASES.get(name, ()) if (df["experiment"] == e).any()]
    if aliases and not counts.get("ok"):
        status = "measured as " + ", ".join(aliases)
        detail = "its figures, tables and claims read these experiments' records"
    return ExperimentStatus(name, meta["title"], meta.get("paper_ref", ""), status, detail, counts)


def _gpu_line(d: dict[str, Any]) -> str:
    clock = f"{d.get('sm_clock_mhz')}/{d.get('sm_clock_max_mhz')} MHz"
    return f"{d['name']} ({d.get('sm_count')} SMs, SM clock now/max {clock})"


def _nic_line(d: dict[str, Any]) -> str:
    return (
        f"{d['name']} fw {d.get('firmware')} PCIe {d.get('pci_address')} NUMA {d.get('numa_node')}"
    )


def host_summary(hw: dict[str, Any]) -> dict[str, Any]:
    """The probe record of a host, as lines for the report's host section."""
    cpu, gpus = hw.get("cpu") or {}, hw.get("gpus") or {}
    rdma, git = hw.get("rdma") or {}, hw.get("git") or {}
    numa = len(cpu.get("numa_nodes") or [])
    return {
        "host": hw.get("host"),
        "hostname": hw.get("hostname"),
        "provenance_id": hw.get("provenance_id"),
        "date": hw.get("date"),
        "cpu": f"{cpu.get('model')} ({cpu.get('logical_cores')} logical cores, {numa} NUMA "
        f"nodes, governor {cpu.get('governor') or 'n/a'})",
        "gpus": ", ".join(map(_gpu_line, gpus.get("devices", []) or []))
        or gpus.get("note")
        or "none",
        "driver": f"{gpus.get('driver') or 'n/a'} / CUDA "
        f"{gpus.get('cuda_driver_version') or 'n/a'}",
        "nics": ", ".join(map(_nic_line, rdma.get("devices", []) or []))
        or rdma.get("note")
        or "none",
        "tools": ", ".join(f"{k} {v}" for k, v in (hw.get("tools") or {}).items() if v),
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


def frame_html(d: pd.DataFrame, empty: str = "No measured points.") -> str:
    if d.empty:
        return f"<p class='empty'>{html.escape(empty)}</p>"
    return d.to_html(
        index=False, classes="sweep", border=0, na_rep="",
        float_format=lambda v: f"{v:.4g}",
    )  # fmt: skip


def sweep_table(summary: pd.DataFrame, name: str) -> str:
    d = (
        summary[summary["experiment"] == name].dropna(axis=1, how="all")
        if len(summary)
        else summary
    )
    if d.empty:
        return frame_html(d)
    params = [c for c in d.columns if c.startswith("param_")]
    cols = [c for c in ["transport", "nic_backend", "cpu_clock_state"] if c in d]
    cols += params + [c for c in SWEEP_COLUMNS if c in d and c not in cols]
    d = d[list(dict.fromkeys(cols))].rename(columns=lambda c: c.removeprefix("param_"))
    if len(d) > MAX_TABLE_ROWS:
        note = (f"<p>First {MAX_TABLE_ROWS} of {len(d)} rows; every row is in "
                "<a href='../data/summary.csv'>summary.csv</a>.</p>")  # fmt: skip
        return note + frame_html(d.head(MAX_TABLE_ROWS))
    return frame_html(d)


def _read(path: Path | None) -> pd.DataFrame:
    if path is None or not Path(path).exists() or Path(path).stat().st_size == 0:
        return pd.DataFrame()
    try:
        return pd.read_csv(path, low_memory=False)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def verdict_counts(claims: pd.DataFrame) -> dict[str, int]:
    counts = claims["verdict"].value_counts() if not claims.empty else pd.Series(dtype=int)
    return {v: int(counts.get(v, 0)) for v in (REPRODUCED, NOT_REPRODUCED, NOT_MEASURABLE)}


def paper_text(value: float, unit: str, platform: str) -> str:
    """The paper's value as the claims table shows it: 7.59x, 0.7 us, increasing order."""
    if unit == "ordering":
        return f"increasing in the listed order ({platform})"
    if unit == "ratio":
        return f"{value:.3g}x ({platform})"
    return f"{value:g} {unit} ({platform})"


VERDICT_ORDER = {REPRODUCED: 0, NOT_REPRODUCED: 1, NOT_MEASURABLE: 2}


def claim_rows(claims: pd.DataFrame, by_verdict: bool = False) -> list[dict[str, Any]]:
    """Rows for the claims table, in the paper's order (decided claims first if by_verdict)."""
    if claims.empty:
        return []
    rows = []
    for r in claims.astype(object).where(claims.notna(), "").to_dict("records"):
        r["paper_text"] = paper_text(float(r["paper_value"]), r["paper_unit"], r["paper_platform"])
        r["css"] = str(r["verdict"]).replace(" ", "-")
        rows.append(r)
    if by_verdict:
        rows.sort(key=lambda r: VERDICT_ORDER.get(r["verdict"], 3))
    return rows


@dataclass
class CampaignReport:
    """Everything a campaign report is rendered from (paths as produced by the pipeline)."""

    campaign: str
    records_csv: Path
    summary_csv: Path
    claims_csv: Path
    fits_csv: Path
    ratios_csv: Path
    tables_dir: Path
    hardware_files: list[Path]
    index: Path
    current: bool
    combined_index: Path | None = None
    model_dir: Path | None = None  # results/<campaign>/model (the model stage's CSVs)


def regenerate_commands(campaign: str, name: str, current: bool) -> list[str]:
    """Exact commands: re-measure the experiment (this machine's campaign only), and redraw every
    figure, table, claim check and page of the campaign from its records (archived ones too)."""
    cmds = []
    if current:
        cmds.append(
            f"rm -rf results/{campaign}/raw/{name} && snakemake --profile profiles/local "
            f"--config campaign={campaign}"
        )
    cmds.append(
        f"snakemake --profile profiles/local --forcerun aggregate_runs "
        f"results/{campaign}/report/index.html"
    )
    return cmds


MODEL_TABLES = tuple(f.removesuffix(".csv") for f in MODEL_OUTPUTS if f.endswith(".csv"))


def model_summary(validation: pd.DataFrame, calibration: pd.DataFrame) -> dict[str, int]:
    """Counts the index and the model page state: checks within tolerance per role, and how many
    parameters the campaign's records set."""

    def passed(role: str) -> tuple[int, int]:
        d = validation[validation["role"] == role] if len(validation) else validation
        return int((d["passed"].astype(str) == "True").sum()) if len(d) else 0, len(d)

    (hp, ht), (vp, vt) = passed("headline"), passed("validation")
    from_records = int((calibration["origin"] == "records").sum()) if len(calibration) else 0
    return {
        "headline_pass": hp, "headline_total": ht, "validation_pass": vp,
        "validation_total": vt, "from_records": from_records, "parameters": len(calibration),
    }  # fmt: skip


def render_model_page(
    env: jinja2.Environment, campaign: str, model_dir: Path, out: Path
) -> dict[str, int]:
    """model.html and data/model_*.csv of a campaign report; returns the summary counts."""
    t = {name: _read(model_dir / f"{name}.csv") for name in MODEL_TABLES}
    for name, d in t.items():
        d.to_csv(out / "data" / f"model_{name}.csv", index=False)
    summary = model_summary(t["validation"], t["calibration"])
    beside = t["beside_measured"]
    if len(beside):
        beside = beside.sort_values(["experiment", "metric", "point_id"])
    page = env.get_template("model.html.j2").render(
        campaign=campaign,
        summary=summary,
        validation=frame_html(t["validation"], "No validation checks."),
        calibration=frame_html(t["calibration"], "No parameters."),
        beside=frame_html(beside.head(MAX_TABLE_ROWS), "No measured point the model represents."),
    )
    write_atomic(out / "model.html", page)
    return summary


def render_campaign_report(r: CampaignReport) -> None:
    df = _read(r.records_csv)
    if df.empty:
        df = pd.DataFrame(columns=["experiment", "status", "error", "provenance_id"])
    summary, claims = _read(r.summary_csv), _read(r.claims_csv)
    fits, ratios = _read(r.fits_csv), _read(r.ratios_csv)
    hosts = [host_summary(json.loads(p.read_text())) for p in r.hardware_files]
    names = list(PAPER_EXPERIMENTS) + sorted(
        set(df["experiment"].dropna().astype(str)) - set(PAPER_EXPERIMENTS)
    )
    statuses = [experiment_status(n, df, r.current) for n in names]
    env = environment()
    out = r.index.parent
    for sub in ("experiments", "data"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TEMPLATES.parent / "style.css", out / "style.css")
    claims.to_csv(out / "data" / "claims.csv", index=False)
    summary.to_csv(out / "data" / "summary.csv", index=False)
    tables = {}
    for tab_id, spec in PAPER_TABLES.items():
        measured = _read(r.tables_dir / f"{tab_id}.csv")
        tables[tab_id] = {
            "spec": spec,
            "measured": frame_html(measured, "Not measured in this campaign."),
            "paper": frame_html(paper_table(spec)),
            "csv": f"../tables/{tab_id}.csv",
        }
    for s in statuses:
        d = df[df["experiment"] == s.name]
        d.to_csv(out / "data" / f"{s.name}.csv", index=False)
        exp_claims = claims[claims["experiment"] == s.name] if not claims.empty else claims
        exp_fits = fits[fits["experiment"] == s.name] if not fits.empty else fits
        exp_ratios = ratios[ratios["experiment"] == s.name] if not ratios.empty else ratios
        page = env.get_template("experiment.html.j2").render(
            campaign=r.campaign,
            exp=s,
            meta=experiment_meta(s.name),
            figures=[f for f in PAPER_FIGURES.values() if f.experiment == s.name],
            own_figure=(out / "figures" / f"{s.name}.png").exists(),
            tables=[t for t in tables.values() if t["spec"].experiment == s.name],
            claims=claim_rows(exp_claims),
            table=sweep_table(summary, s.name),
            fits=frame_html(exp_fits.dropna(axis=1, how="all"), "No clock fit (fewer than "
                            "three SM clocks measured).") if s.name == "sm_clock" else "",
            ratios=frame_html(exp_ratios.dropna(axis=1, how="all").head(200), "")
            if not exp_ratios.empty else "",
            provenance=sorted(d["provenance_id"].dropna().astype(str).unique()),
            commands=regenerate_commands(r.campaign, s.name, r.current),
            current=r.current,
        )  # fmt: skip
        write_atomic(out / "experiments" / f"{s.name}.html", page)
    model = render_model_page(env, r.campaign, r.model_dir, out) if r.model_dir else None
    page = env.get_template("index.html.j2").render(
        campaign=r.campaign,
        model=model,
        hosts=hosts,
        experiments=statuses,
        current=r.current,
        n_records=len(df),
        claims=claim_rows(claims, by_verdict=True),
        counts=verdict_counts(claims),
        figures=list(PAPER_FIGURES.values()),
        tables=list(tables.values()),
        combined=_relative(r.combined_index, out) if r.combined_index else None,
    )
    write_atomic(r.index, page)


def _relative(target: Path, start: Path) -> str:
    import os

    return os.path.relpath(Path(target).resolve(), Path(start).resolve())


def backend_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Every point measured on more than one platform or NIC backend (in any campaigns): its p50
    per platform and backend side by side, e.g. softnic-gpu against mlx5, H200 against B200."""
    if summary.empty:
        return pd.DataFrame()
    d = summary.copy()
    d["where"] = d["platform"].astype(str) + " " + d["nic_backend"].astype(str)
    echoes = ("param_transport", "param_nic_backend", "param_backend")  # the ids, echoed
    params = [c for c in param_columns(d) if c not in echoes and d[c].notna().any()]
    keys = ["experiment", "transport", "metric", "unit", *params]
    d[keys] = as_text(d[keys])
    wide = d.pivot_table(index=keys, columns="where", values="p50", aggfunc="median")
    wide = wide[wide.notna().sum(axis=1) >= 2].reset_index()
    wide = wide.loc[:, (wide != "").any(axis=0)]
    return wide.rename(columns=lambda c: str(c).removeprefix("param_"))


def render_combined_report(
    campaigns: list[str],
    claims_files: list[Path],
    summary_files: list[Path],
    comparison_figures: list[Path],
    index: Path,
) -> None:
    """Across campaigns: verdict of every claim per campaign, and the comparison figures."""
    out = index.parent
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TEMPLATES.parent / "style.css", out / "style.css")
    frames = []
    for campaign, path in zip(campaigns, claims_files, strict=True):
        c = _read(path)
        if not c.empty:
            frames.append(c.assign(campaign=campaign))
    claims = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    matrix = []
    if not claims.empty:
        for cid, g in claims.groupby("id", sort=False):
            first = g.iloc[0]
            cells = {}
            for _, row in g.iterrows():
                cells[row["campaign"]] = {
                    "verdict": row["verdict"],
                    "css": str(row["verdict"]).replace(" ", "-"),
                    "text": row["measured_text"] if isinstance(row["measured_text"], str)
                    and row["measured_text"] else row["reason"],
                    "backend": row["backend"] if isinstance(row["backend"], str) else "",
                }  # fmt: skip
            matrix.append({
                "id": cid, "claim": first["claim"], "paper_ref": first["paper_ref"],
                "paper_text": paper_text(float(first["paper_value"]), first["paper_unit"],
                                         first["paper_platform"]),
                "cells": cells,
            })  # fmt: skip
    summaries = [s for s in (_read(p) for p in summary_files) if not s.empty]
    summary = pd.concat(summaries, ignore_index=True) if summaries else pd.DataFrame()
    summary.to_csv(out / "summary.csv", index=False)
    backends = backend_table(summary)
    backends.to_csv(out / "backends.csv", index=False)
    platforms = (
        summary.groupby("campaign")
        .agg(platform=("platform", lambda s: ", ".join(sorted(set(map(str, s))))),
             backends=("nic_backend", lambda s: ", ".join(sorted(set(map(str, s))))))
        .to_dict("index") if not summary.empty else {}
    )  # fmt: skip
    page = environment().get_template("combined.html.j2").render(
        campaign="across campaigns",
        campaigns=[
            {"name": c, "link": f"../../{c}/report/index.html",
             **platforms.get(c, {"platform": "n/a", "backends": "no measurements"})}
            for c in campaigns
        ],
        matrix=matrix,
        figures=[f"figures/{p.name}" for p in comparison_figures if p.suffix == ".png"],
        backends=frame_html(backends.head(MAX_TABLE_ROWS), "No point was measured on two NIC "
                            "backends (or platforms) yet."),
    )  # fmt: skip
    write_atomic(index, page)
