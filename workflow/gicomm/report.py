"""The HTML report of a campaign, and the page across campaigns.

Campaign report (results/<campaign>/report/):
  index.html              the claims table (paper value | this campaign | runs, interval, spread,
                          host load | verdict), every paper experiment with its status, the
                          paper figures and tables, hosts with provenance and the noise the
                          probe recorded
  tables.html             every paper table, paper first, ours under each row
  experiments/<exp>.html  figures, the tables of this experiment, claim checks, the sweep (median,
                          min..max, 95% interval and spread over runs, p99), same-run transport
                          ratios, clock fits, provenance, and the commands that regenerate it
  nic.html                NIC paths run here: each NIC path's experiment, transport, backend,
                          what it ran on (real NIC or emulated rdma-core), topology, points ok /
                          failed and the port counter check; the values measured on the emulated
                          NIC, labelled so
  model.html              the performance model: validation against the paper, fitted parameters,
                          predicted beside measured, the platform's predictions
  data/<exp>.csv          tidy CSV of every record of the experiment (and claims.csv, summary.csv,
                          model_*.csv; source-<host>.diff when the campaign measured a dirty tree)
Across campaigns (results/<configured campaign>/report/combined/index.html): a tally of verdicts
per campaign, each claim's verdict per campaign, and one comparison figure per experiment.
Statuses and reasons come from the records (gicomm.status): nothing is green that did not run.
"""

from __future__ import annotations

import html
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from gicomm import CONFIG_DIR, REPO_ROOT, hostload, status
from gicomm.catalogue import (
    CATALOGUE,
    FIGURES,
    PAPER_EXPERIMENTS,
    TABLES,
    TableSpec,
    paper_place,
)
from gicomm.claims import VERDICTS, decide_settings, where_ran
from gicomm.columns import PARAM_PREFIX, SERIES_KEYS, as_text, param_columns, param_name
from gicomm.fsutil import write_atomic
from gicomm.intervals import point_intervals
from gicomm.labels import model_nic_bound
from gicomm.layout import REPORT_INDEX
from gicomm.nicpaths import emulated_values, nic_paths
from gicomm.tables import NOTE, OURS, RUNS, SOURCE, WHERE, column_title
from gicomm.yamlio import load_yaml

TEMPLATES = REPO_ROOT / "report" / "templates"
MAX_TABLE_ROWS = 1500  # longer sweeps are cut in the page (the CSVs carry every row)
SWEEP_COLUMNS = ["transport", "nic_backend", "rdma_provider", "topology", "doorbell_target",
                 "cpu_clock_state", "host", "metric", "unit", "runs", "p50", "p50_min", "p50_max",
                 "ci95_lo", "ci95_hi", "run_spread", *hostload.SUMMARY_COLUMNS, "p99", "p99_max",
                 "sm_clock_mhz",
                 "engine_ceiling", "model_nic_bound", "path_check"]  # fmt: skip


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
    meta["paper_ref"] = paper_place(name, meta["title"])  # the catalogue's word, not the config's
    return meta


def experiment_status(name: str, df: pd.DataFrame, current: bool) -> ExperimentStatus:
    """Green only where records of status ok exist (its own, or of the experiments that back
    it); every other status carries the runner's recorded reason."""
    meta = experiment_meta(name)
    d = df[df["experiment"] == name] if not df.empty else df
    counts = {str(k): int(v) for k, v in d["status"].value_counts().items()} if len(d) else {}
    why = "; ".join(status.reasons(df, [name]))
    backing = [e for e in CATALOGUE.experiments.get(name, {}).get("reads", ())
               if status.ok_count(df, [e])]  # fmt: skip
    if counts.get("ok"):
        state = status.MEASURED if current else status.ARCHIVED
        detail = (
            f"{counts.get('failed', 0)} failed, {counts.get('skipped', 0)} skipped records"
            if len(counts) > 1
            else ""
        )
        if why:
            detail += f": {why}"
    elif backing:
        state = ("measured" if current else "archived") + " as " + ", ".join(backing)
        detail = "its figures, tables and claims read these experiments' records"
        if counts:
            detail += f"; its own points: {why or 'none ok'}"
    elif counts.get("failed"):
        state, detail = status.FAILED, why
    elif counts.get("skipped"):
        state, detail = status.NOT_RUNNABLE, why
    else:
        state, detail = status.ABSENT, "no records: not configured or not run"
    return ExperimentStatus(name, meta["title"], meta.get("paper_ref", ""), state, detail, counts)


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
        "git": git_text(git),
        "diff": f"data/source-{hw.get('host')}.diff" if git.get("diff") else "",
        "noise": noise_text(hw.get("noise")),
        "kernel": hw.get("kernel"),
        "json": html.escape(json.dumps(hw, indent=2)),
    }


def git_text(git: dict[str, Any]) -> str:
    """The commit measured, and whether the tree was dirty and its diff kept."""
    text = git.get("commit") or "n/a"
    if not git.get("dirty"):
        return text
    if git.get("diff"):
        lines = git["diff"].count("\n")
        return f"{text} + uncommitted changes ({lines} diff lines kept, sha256 " \
            f"{git.get('diff_sha256', '')[:12]})"  # fmt: skip
    return f"{text} + uncommitted changes ({git.get('diff_note') or 'diff not recorded'})"


def noise_text(noise: dict[str, Any] | None) -> str:
    """The noise sources the probe read, in one line ('not recorded' for older probes)."""
    if not noise:
        return "not recorded (this campaign's probe predates it)"
    parts = []
    if noise.get("loadavg"):
        parts.append(f"load {noise['loadavg'][0]:.2f} (1 min) on {noise.get('logical_cores')} "
                     "cores")  # fmt: skip
    busy = noise.get("busy_processes") or []
    if busy:
        parts.append("busy: " + ", ".join(f"{p['name']} {p['cpu_pct']:.0f}%" for p in busy[:4]))
    if noise.get("cpu_steal_pct") is not None:
        parts.append(f"CPU steal {noise['cpu_steal_pct']:.1f}%")
    for g in noise.get("gpus") or []:
        others = g.get("processes")
        parts.append(f"GPU {g['index']}: {g.get('utilization_pct')}% busy, {others} process(es), "
                     f"clock-event reasons {g.get('clock_event_reasons')}")  # fmt: skip
    return "; ".join(parts) + f" ({noise.get('note', '')})"


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )


def frame_html(d: pd.DataFrame, empty: str = "No measured points.") -> str:
    if d.empty:
        return f"<p class='empty'>{html.escape(empty)}</p>"
    # Data dumps (sweeps, ratios, fits) may be wider than the page: they scroll in their own box.
    table = d.to_html(
        index=False, classes="sweep", border=0, na_rep="",
        float_format=lambda v: f"{v:.4g}",
    )  # fmt: skip
    return f"<div class='wide'>{table}</div>"


def with_intervals(summary: pd.DataFrame, records: pd.DataFrame) -> pd.DataFrame:
    """The summary with each point's 95% t-interval over runs and its run spread (max/min), and
    the model-NIC mark of rate points near their engine ceiling."""
    if summary.empty:
        return summary
    iv = point_intervals(records)
    out = summary
    if not iv.empty:
        keys = [k for k in [*SERIES_KEYS, *param_columns(summary)] if k in summary and k in iv]
        left, right = as_text(summary[keys]), as_text(iv[keys])
        iv = pd.concat([right, iv.drop(columns=keys)], axis=1)
        out = pd.concat([summary.drop(columns=keys), left], axis=1).merge(iv, on=keys, how="left")
        out = out[summary.columns.tolist() + ["ci95_lo", "ci95_hi", "run_spread"]]
        out[keys] = summary[keys].to_numpy()
    bound = model_nic_bound(out)
    if bound.notna().any():
        out = out.assign(model_nic_bound=bound.map({True: "yes", False: "no"}))
    return out


def sweep_table(summary: pd.DataFrame, name: str) -> str:
    d = (
        summary[summary["experiment"] == name].dropna(axis=1, how="all")
        if len(summary)
        else summary
    )
    if d.empty:
        return frame_html(d)
    params = [c for c in d.columns if c.startswith(PARAM_PREFIX)]
    cols = [c for c in ["transport", "nic_backend", "cpu_clock_state"] if c in d]
    cols += params + [c for c in SWEEP_COLUMNS if c in d and c not in cols]
    d = d[list(dict.fromkeys(cols))].rename(columns=param_name)
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
    return {v: int(counts.get(v, 0)) for v in VERDICTS}


def paper_text(value: float, unit: str, platform: str) -> str:
    """The paper's value as the claims table shows it: 7.59x, 0.7 us, increasing order."""
    if unit == "ordering":
        return f"increasing in the listed order ({platform})"
    if unit == "ratio":
        return f"{value:.3g}x ({platform})"
    return f"{value:g} {unit} ({platform})"


VERDICT_ORDER = {v: i for i, v in enumerate(VERDICTS)}


def runs_text(r: dict[str, Any], host_load_warning: float = hostload.DEFAULT_WARNING) -> str:
    """'5 runs: 0.19..0.21 us, max/min 1.04x; host: others 12% of free cores, load 0.4' (blank
    where the claim was not measured); 'HIGH host load' leads the host part above the warning
    level."""
    runs = int(float(r.get("runs") or 0))
    if not runs:
        return ""
    text = f"{runs} run{'s' if runs > 1 else ''}"
    lo, hi = r.get("ci_lo"), r.get("ci_hi")
    if isinstance(lo, float) and isinstance(hi, float):
        unit = "" if r["paper_unit"] in ("ratio", "ordering") else f" {r['paper_unit']}"
        text += f": {lo:.3g}..{hi:.3g}{unit}"
    if isinstance(r.get("spread"), float):
        text += f", max/min {r['spread']:.2f}x"
    busy, loadavg = r.get("host_busy"), r.get("host_loadavg")
    load = hostload.load_text(busy, loadavg) or "host load not recorded"
    high = "HIGH " if hostload.loaded(busy, host_load_warning) else ""
    return f"{text}; {high}{load}"


def claim_rows(claims: pd.DataFrame, by_verdict: bool = False) -> list[dict[str, Any]]:
    """Rows for the claims table, in the paper's order (decided claims first if by_verdict)."""
    if claims.empty:
        return []
    rows = []
    threshold = float(decide_settings()["host_load_warning"])
    for r in claims.astype(object).where(claims.notna(), "").to_dict("records"):
        r["paper_text"] = paper_text(float(r["paper_value"]), r["paper_unit"], r["paper_platform"])
        r["css"] = str(r["verdict"]).replace(" ", "-")
        r["runs_text"] = runs_text(r, threshold)
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
    # the model's CSVs by name: calibration, beside_measured (this campaign's), validation (shared)
    # and predictions (the platform's); none: no model page
    model_tables: dict[str, Path] | None = None


def regenerate_commands(campaign: str, name: str, current: bool) -> list[str]:
    """Exact commands: re-measure the experiment (this machine's campaign only), and redraw every
    figure, table, claim check and page of the campaign from its records (archived ones too)."""
    cmds = []
    if current:
        cmds.append(
            f"rm -rf results/{campaign}/raw/{name} && .venv/bin/snakemake --profile "
            f"profiles/local --config campaign={campaign}"
        )
    cmds.append(
        ".venv/bin/snakemake --profile profiles/local --forcerun aggregate_runs "
        + REPORT_INDEX.format(campaign=campaign)
    )
    return cmds


MODEL_TABLES = ("calibration", "beside_measured", "validation", "predictions", "blind")


def model_summary(validation: pd.DataFrame, calibration: pd.DataFrame) -> dict[str, Any]:
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
    env: jinja2.Environment, campaign: str, files: dict[str, Path], out: Path
) -> dict[str, Any]:
    """model.html and data/model_*.csv of a campaign report; returns the summary counts."""
    t = {name: _read(files.get(name)) for name in MODEL_TABLES}
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
    summary["blind"] = render_blind_page(env, campaign, t["blind"], out)
    return summary


BLIND_SHOWN = ["key", "metric", "unit", "published", "predicted", "ratio", "role", "fitted_by",
               "in_validation", "how"]  # fmt: skip


def render_blind_page(
    env: jinja2.Environment, campaign: str, blind: pd.DataFrame, out: Path
) -> dict[str, int] | None:
    """blind.html: the model against published tables it was never fitted to, one section a
    table (its data is data/model_blind.csv); returns the counts the index shows, None if no
    table was checked."""
    if blind.empty:
        return None
    from gicomm.model.blind import summary as blind_summary  # pandas only, no numba

    sections = []
    for name, d in blind.groupby("table", sort=True):
        sections.append(
            {
                "name": name,
                "system": d["system"].iloc[0],
                "source": d["source"].iloc[0],
                "table": frame_html(d[BLIND_SHOWN].round(3)),
            }
        )
    totals = blind_summary(blind)
    page = env.get_template("blind.html.j2").render(
        campaign=campaign, sections=sections, summary=frame_html(totals.round(3))
    )
    write_atomic(out / "blind.html", page)
    roles = blind["role"].astype(str)
    return {
        "tables": int(blind["table"].nunique()), "points": len(blind),
        "blind": int((roles == "blind").sum()), "fitted": int((roles == "fitted").sum()),
    }  # fmt: skip


# ---- the paper's tables, paper first ------------------------------------------------------------
def paper_table_view(spec: TableSpec, tables_dir: Path) -> dict[str, Any]:
    """A paper table as the template draws it: the paper's rows, each followed by ours (same
    columns), ours saying where they ran; a row we cannot fill spans the value columns with why."""
    path = tables_dir / f"{spec.tab_id}.csv"
    frame = (
        pd.read_csv(path, dtype=str, keep_default_na=False)
        if path.exists() and path.stat().st_size
        else pd.DataFrame(columns=[SOURCE, *spec.label_columns, WHERE, RUNS, NOTE])
    )
    fixed = {SOURCE, WHERE, RUNS, NOTE, *spec.label_columns}
    numeric = [c for c in frame.columns if c not in fixed]
    header = [
        {"title": column_title(c, spec.terms), "ours": spec.columns.get(c, {}).get("ours", ""),
         "filled": c in spec.columns, "css": "num" if _numeric(frame[c]) else "text"}
        for c in numeric
    ]  # fmt: skip
    rows = []
    for r in frame.to_dict("records"):
        ours = r[SOURCE] == OURS
        values = [r.get(c, "") for c in numeric]
        empty = ours and not any(values)
        rows.append({
            "css": ("ours-none" if empty else "ours") if ours else "paper",
            "source": r[SOURCE], "where": r[WHERE], "note": r[NOTE], "runs": r[RUNS],
            "labels": [r.get(c, "") for c in spec.label_columns], "cells": values,
            "empty": empty,
        })  # fmt: skip
    return {
        "spec": spec,
        "labels": list(spec.label_columns),
        "header": header,
        "rows": rows,
        "csv": f"tables/{spec.tab_id}.csv",
        "measured": sum(1 for r in rows if r["css"] == "ours"),
    }


def _numeric(cells: pd.Series) -> bool:
    """A column of numbers as the paper prints them ('1.79', '~2x', '106-110', '1,350')."""
    # The en dash as a character: pyarrow's regex engine (pandas' string dtype) has no \u escape.
    return cells.astype(str).str.fullmatch("[~\\d.,\\-\u2013/ x%]*").all()


def render_campaign_report(r: CampaignReport) -> None:
    df = _read(r.records_csv)
    if df.empty:
        df = pd.DataFrame(columns=["experiment", "status", "error", "provenance_id"])
    summary, claims = _read(r.summary_csv), _read(r.claims_csv)
    fits, ratios = _read(r.fits_csv), _read(r.ratios_csv)
    summary = with_intervals(summary, df) if not summary.empty else summary
    hw_records = [json.loads(p.read_text()) for p in r.hardware_files]
    hosts = [host_summary(hw) for hw in hw_records]
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
    for hw in hw_records:  # the source a dirty campaign measured, beside its commit
        diff = (hw.get("git") or {}).get("diff")
        if diff:
            write_atomic(out / "data" / f"source-{hw.get('host')}.diff", diff)
    tables = {tab_id: paper_table_view(spec, r.tables_dir) for tab_id, spec in TABLES.items()}
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
            figures=[f for f in FIGURES.values() if f.experiment == s.name],
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
            hosts=hosts,
        )  # fmt: skip
        write_atomic(out / "experiments" / f"{s.name}.html", page)
    model = render_model_page(env, r.campaign, r.model_tables, out) if r.model_tables else None
    paths = nic_paths(df)
    write_atomic(
        out / "nic.html",
        env.get_template("nic.html.j2").render(
            campaign=r.campaign,
            paths=frame_html(paths, "No NIC point (mlx5 or verbs) in this campaign."),
            values=frame_html(
                emulated_values(summary), "No value was measured on the emulated NIC."
            ),
        ),
    )
    write_atomic(
        out / "tables.html",
        env.get_template("tables.html.j2").render(campaign=r.campaign, tables=tables.values()),
    )
    page = env.get_template("index.html.j2").render(
        campaign=r.campaign,
        model=model,
        doctor_page=(out / "doctor.html").exists(),
        hosts=hosts,
        experiments=statuses,
        current=r.current,
        n_records=len(df),
        claims=claim_rows(claims, by_verdict=True),
        counts=verdict_counts(claims),
        figures=list(FIGURES.values()),
        tables=list(tables.values()),
        combined=_relative(r.combined_index, out) if r.combined_index else None,
        nic_paths=len(paths),
    )
    write_atomic(r.index, page)


def _relative(target: Path, start: Path) -> str:
    return os.path.relpath(Path(target).resolve(), Path(start).resolve())


def backend_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Every point measured on more than one platform or NIC backend (in any campaigns): its p50
    per platform and backend side by side, e.g. softnic-gpu against mlx5, H200 against B200."""
    if summary.empty:
        return pd.DataFrame()
    d = summary.copy()
    d["where"] = d["platform"].astype(str) + " " + where_ran(d).astype(str)
    params = [c for c in param_columns(d) if d[c].notna().any()]
    keys = ["experiment", "transport", "metric", "unit", *params]
    d[keys] = as_text(d[keys])
    wide = d.pivot_table(index=keys, columns="where", values="p50", aggfunc="median")
    wide = wide[wide.notna().sum(axis=1) >= 2].reset_index()
    wide = wide.loc[:, (wide != "").any(axis=0)]
    return wide.rename(columns=lambda c: param_name(str(c)))


def platform_text(declared: str, hardware: list[dict[str, Any]]) -> str:
    """The platform as the campaign declared it, with what its probe found where it declared
    `local` (this machine): 'local: 2 x NVIDIA H200, no RDMA NIC'."""
    if declared != "local" or not hardware:
        return declared
    gpus = [d.get("name") for hw in hardware for d in (hw.get("gpus") or {}).get("devices") or []]
    nics = [d.get("name") for hw in hardware for d in (hw.get("rdma") or {}).get("devices") or []]
    found = ", ".join(f"{gpus.count(g)} x {g}" for g in dict.fromkeys(gpus)) or "no GPU"
    found += ", " + (", ".join(dict.fromkeys(nics)) if nics else "no RDMA NIC")
    return f"{declared}: {found}"


def render_combined_report(
    campaigns: list[str],
    claims_files: list[Path],
    summary_files: list[Path],
    comparison_figures: list[Path],
    index: Path,
    hardware: dict[str, list[dict[str, Any]]] | None = None,
) -> None:
    """Every campaign beside the others: a tally of verdicts per campaign, each claim's verdict
    per campaign, the points measured on several platforms or backends, the comparison figures."""
    out = index.parent
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TEMPLATES.parent / "style.css", out / "style.css")
    hardware = hardware or {}
    frames, tallies = [], {}
    for campaign, path in zip(campaigns, claims_files, strict=True):
        c = _read(path)
        tallies[campaign] = verdict_counts(c)
        if not c.empty:
            frames.append(c.assign(campaign=campaign))
    claims = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    threshold = float(decide_settings()["host_load_warning"])
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
                    "noise": runs_text(row.where(row.notna(), "").to_dict(), threshold),
                }  # fmt: skip
            matrix.append({
                "id": cid, "claim": first["claim"], "paper_ref": first["paper_ref"],
                "paper_text": paper_text(float(first["paper_value"]), first["paper_unit"],
                                         first["paper_platform"]),
                "cells": cells,
            })  # fmt: skip
    summaries = {c: _read(p) for c, p in zip(campaigns, summary_files, strict=True)}
    present = [s for s in summaries.values() if not s.empty]
    summary = pd.concat(present, ignore_index=True) if present else pd.DataFrame()
    summary.to_csv(out / "summary.csv", index=False)
    backends = backend_table(summary)
    backends.to_csv(out / "backends.csv", index=False)
    rows = []
    for c in campaigns:
        s = summaries[c]
        declared = sorted(set(map(str, s["platform"].dropna()))) if "platform" in s else []
        rows.append({
            "name": c,
            "link": _relative(index.parents[3] / c / "report" / "index.html", out),
            "platform": "; ".join(platform_text(p, hardware.get(c, [])) for p in declared)
            or "no measurements",
            "backends": ", ".join(sorted(set(where_ran(s)))) if not s.empty else "none",
            "tally": tallies.get(c, verdict_counts(pd.DataFrame())),
        })  # fmt: skip
    page = environment().get_template("combined.html.j2").render(
        campaign="across campaigns",
        campaigns=rows,
        verdicts=VERDICTS,
        matrix=matrix,
        figures=[f"figures/{p.name}" for p in comparison_figures if p.suffix == ".png"],
        backends=frame_html(backends.head(MAX_TABLE_ROWS), "No point was measured on two NIC "
                            "backends (or platforms) yet."),
    )  # fmt: skip
    write_atomic(index, page)
