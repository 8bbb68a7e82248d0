"""The paper's claims checked against one campaign: paper value | this campaign | verdict.

config/claims.yaml (validated by workflow/schemas/claims.schema.yaml) lists each claim with a
selector of the measured points (gicomm.select), a check and the hardware it needs. The check is
evaluated on the medians over runs (the value shown) and again on each independent process run
alone; the verdict is decided on the runs (config/claims.yaml `decide`):

- reproduced: the 95% Student-t interval of the per-run values lies inside the tolerance (an
  ordering: it holds in every run);
- not reproduced: the interval lies wholly outside it (an ordering: it holds in no run);
- unstable: the interval straddles the edge of the tolerance: the runs disagree about the verdict;
- too few runs: fewer independent runs than `decide.min_runs` (default 5) measured it;
- not measurable here: the campaign cannot test it, and the reason says why (the experiment was
  not run or not runnable here, it needs an mlx5 NIC and only a software or emulated NIC was
  measured, it needs another GPU, locked SM clocks, or the selected points are absent).

Beside the spread, each claim carries the worst host load over its points' runs (host_busy: the
share of the cores the benchmark left free that other work kept busy; host_loadavg), and its reason
warns when host_busy exceeds `decide.host_load_warning` (gicomm.hostload).

A software NIC (softnic) or an emulated NIC never reproduces a claim that needs a real NIC.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gicomm import CONFIG_DIR, hostload, labels
from gicomm.catalogue import PAPER_DIR, experiment_names
from gicomm.columns import param_column
from gicomm.errors import ConfigError
from gicomm.fits import clock_fit, first_reaching, linear_slope, plateau_power_fit
from gicomm.intervals import per_run_summaries, spread, t_interval
from gicomm.labels import REAL_NIC, nic_kind
from gicomm.paper import cell_text, leading_number
from gicomm.schema import describe, validator
from gicomm.select import as_list, clock_states, describe_selector
from gicomm.select import match_rows as select_rows
from gicomm.yamlio import load_yaml

CLAIMS_FILE = CONFIG_DIR / "claims.yaml"
REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
UNSTABLE = "unstable"
TOO_FEW_RUNS = "too few runs"
NOT_MEASURABLE = "not measurable here"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, UNSTABLE, TOO_FEW_RUNS, NOT_MEASURABLE)
DEFAULT_DECIDE = {
    "min_runs": 5,
    "spread_warning": 1.5,
    "host_load_warning": hostload.DEFAULT_WARNING,
}
# Preference among backends when a point was measured on several: real NIC first.
BACKEND_PREFERENCE = ("mlx5", "verbs", "softnic-gpu", "softnic-cpu", "nvlink", "none", "")
RESULT_COLUMNS = [
    "id",
    "experiment",
    "paper_ref",
    "claim",
    "headline",
    "paper_value",
    "paper_unit",
    "paper_platform",
    "measured",
    "measured_text",
    "backend",
    "runs",
    "ci_lo",
    "ci_hi",
    "spread",
    "host_busy",
    "host_loadavg",
    "verdict",
    "reason",
    "requires",
]


class NotMeasurable(Exception):
    """Raised while evaluating a check: the campaign cannot decide this claim (the reason)."""


def load_claims(path: Path = CLAIMS_FILE) -> list[dict[str, Any]]:
    data = load_yaml(path)
    errors = sorted(validator("claims").iter_errors(data), key=lambda e: list(e.path))
    if errors:
        raise ConfigError(f"{path}: invalid claims: " + "; ".join(describe(e) for e in errors[:5]))
    ids = [c["id"] for c in data["claims"]]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ConfigError(f"{path}: duplicate claim id(s): {', '.join(dup)}")
    return data["claims"]


def decide_settings(path: Path = CLAIMS_FILE) -> dict[str, Any]:
    """How verdicts are decided (config/claims.yaml `decide`: min_runs, spread_warning,
    host_load_warning)."""
    return DEFAULT_DECIDE | (load_yaml(path).get("decide") or {})


# ---- the campaign a claim is checked against ------------------------------------------------
@dataclass
class CampaignContext:
    summary: pd.DataFrame
    records: pd.DataFrame
    gpus: list[str] = field(default_factory=list)
    runs: dict[int, pd.DataFrame] | None = None  # per-run summaries, made when first needed

    def experiment_rows(self, experiment: str) -> pd.DataFrame:
        if self.summary.empty:
            return self.summary
        return self.summary[self.summary["experiment"].isin(experiment_names(experiment))]

    def skip_reasons(self, experiment: str) -> list[str]:
        if self.records.empty:
            return []
        d = self.records[self.records["experiment"] == experiment]
        return sorted(d.loc[d["status"] != "ok", "error"].dropna().astype(str).unique())[:2]

    def run_contexts(self) -> dict[int, CampaignContext]:
        """One context per independent run: its summary holds that run's p50s alone."""
        if self.runs is None:
            self.runs = per_run_summaries(self.records)
        return {r: CampaignContext(s, self.records, self.gpus, {}) for r, s in self.runs.items()}


PLATFORM_GPUS = {"h100": "H100", "h200": "H200", "b200": "B200", "gb200": "GB200"}


def platform_gpus(summary: pd.DataFrame) -> list[str]:
    """GPU models named by the records' platform (used when no host probe was archived)."""
    if summary.empty or "platform" not in summary:
        return []
    names = {PLATFORM_GPUS.get(str(p).lower()) for p in summary["platform"].dropna().unique()}
    return sorted(n for n in names if n)


def gpu_models(hardware: list[dict[str, Any]]) -> list[str]:
    names = []
    for hw in hardware:
        for dev in (hw.get("gpus") or {}).get("devices", []) or []:
            if dev.get("name"):
                names.append(str(dev["name"]))
    return sorted(set(names))


# ---- selecting measured points ----------------------------------------------------------------
def selector_experiments(sel: dict[str, Any], default: str) -> list[str]:
    """The experiments a selector reads: its own (or the claim's) and those that back them."""
    names = [str(e) for e in as_list(sel.get("experiment", default))]
    return list(dict.fromkeys(n for e in names for n in experiment_names(e)))


def match_rows(ctx: CampaignContext, sel: dict[str, Any], experiment: str) -> pd.DataFrame:
    return select_rows(ctx.summary, sel, selector_experiments(sel, experiment))


def where_ran(d: pd.DataFrame) -> pd.Series:
    """The backend of each row, with '(emulated NIC)' where an emulated rdma-core served it:
    emulated and real-NIC values are never pooled."""
    provider = d["rdma_provider"] if "rdma_provider" in d else pd.Series(None, index=d.index)
    return pd.Series(
        [
            f"{b} (emulated NIC)" if nic_kind(b, p) == "emulated NIC" else str(b)
            for b, p in zip(d["nic_backend"], provider, strict=True)
        ],
        index=d.index,
        dtype=object,
    )


def convert(value: float, unit: str, target: str) -> float:
    try:
        return labels.convert(value, unit, target)
    except ValueError as exc:
        raise NotMeasurable(str(exc)) from None


def _values(rows: pd.DataFrame, sel: dict[str, Any], unit: str) -> pd.Series:
    stat = sel.get("stat", "p50")
    vals = [convert(float(v), str(u), unit) for v, u in zip(rows[stat], rows["unit"], strict=True)]
    return pd.Series(vals, index=rows.index, dtype=float).dropna()


# ---- evaluation -------------------------------------------------------------------------------
@dataclass
class Evaluation:
    measured: float
    text: str
    passed: bool
    backend: str


def _selectors(check: dict[str, Any]) -> list[dict[str, Any]]:
    if check["kind"] in ("ratio", "difference"):
        return [check["numerator"], check["denominator"]]
    if check["kind"] == "ordering":
        return list(check["sequence"])
    return [check["of"]]


def choose_backend(
    ctx: CampaignContext, claim: dict[str, Any], backend: str | None = None
) -> tuple[str, dict[int, pd.DataFrame]]:
    """The backend on which every selector of the claim has points (real NIC first), or the
    given one (each run is decided on the backend the medians were)."""
    sels = _selectors(claim["check"])
    matched = [match_rows(ctx, s, claim["experiment"]) for s in sels]
    for i, rows in enumerate(matched):
        if rows.empty:
            raise NotMeasurable(f"no measured points for {describe_selector(sels[i])}")
    matched = [r.assign(_where=where_ran(r)) for r in matched]
    common = set.intersection(*(set(r["_where"]) for r in matched))
    if claim["requires"]["real_nic"]:
        real = {w for w in common if nic_kind(w) == REAL_NIC}
        if not real:
            seen = ", ".join(sorted(common)) or "none in common"
            raise NotMeasurable(f"needs an mlx5 NIC (this campaign measured: {seen})")
        common = real
    if backend is not None:
        common &= {backend}
    if not common:
        raise NotMeasurable("the selected points were not measured on one common NIC backend")
    where = min(common, key=_backend_rank)
    return where, {i: r[r["_where"] == where] for i, r in enumerate(matched)}


def _backend_rank(b: str) -> int:
    return BACKEND_PREFERENCE.index(b) if b in BACKEND_PREFERENCE else len(BACKEND_PREFERENCE)


def _point_value(rows: pd.DataFrame, sel: dict[str, Any], unit: str) -> tuple[float, str]:
    vals = _values(rows, sel, unit)
    if vals.empty:
        raise NotMeasurable(f"no {sel.get('stat', 'p50')} for {describe_selector(sel)}")
    note = f" (median of {vals.size} points)" if vals.size > 1 else ""
    return float(vals.median()), note


def within(measured: float, paper: float, tolerance: float) -> bool:
    return abs(measured - paper) <= tolerance * abs(paper)


def _compare(measured: float, check: dict[str, Any], paper: float) -> bool:
    if "op" in check:
        return measured >= check["bound"] if check["op"] == ">=" else measured <= check["bound"]
    return within(measured, paper, check.get("tolerance", 0.25))


def _fmt(v: float, unit: str) -> str:
    if not math.isfinite(v):
        return "n/a"
    return f"{v:.3g}x" if unit == "ratio" else f"{v:.3g} {unit}"


def evaluate_check(
    ctx: CampaignContext, claim: dict[str, Any], backend: str | None = None
) -> Evaluation:
    check, paper = claim["check"], claim["paper"]["value"]
    unit, kind = check["unit"], check["kind"]
    backend, rows = choose_backend(ctx, claim, backend)
    if kind in ("value", "threshold"):
        v, note = _point_value(rows[0], check["of"], unit)
        return Evaluation(v, _fmt(v, unit) + note, _compare(v, check, paper), backend)
    if kind in ("ratio", "difference"):
        src = unit if kind == "difference" else _ratio_unit(rows)
        a, _ = _point_value(rows[0], check["numerator"], src)
        b, _ = _point_value(rows[1], check["denominator"], src)
        v = a / b if kind == "ratio" else a - b
        text = f"{_fmt(v, unit)} ({a:.4g} vs {b:.4g} {src})"
        return Evaluation(v, text, _compare(v, check, paper), backend)
    if kind == "ordering":
        src = _ratio_unit(rows)
        vals = [_point_value(rows[i], s, src)[0] for i, s in enumerate(check["sequence"])]
        tol = check.get("tolerance", 0.0)
        ok = all(b >= a * (1.0 - tol) for a, b in zip(vals, vals[1:], strict=False))
        text = ", ".join(f"{v:.4g}" for v in vals) + f" {src}"
        return Evaluation(1.0 if ok else 0.0, text, ok, backend)
    return _evaluate_fit(check, rows[0], paper, backend)


def _ratio_unit(rows: dict[int, pd.DataFrame]) -> str:
    """Ratios and orderings compare like with like: the unit of the first selected rows."""
    units = {str(u) for r in rows.values() for u in r["unit"].dropna().unique()}
    first = str(rows[0]["unit"].iloc[0])
    if len(units) > 1 and not all(labels.norm_unit(u) in labels.TIME_SCALE for u in units):
        raise NotMeasurable(f"selected points have different units: {', '.join(sorted(units))}")
    return first


def _evaluate_fit(
    check: dict[str, Any], rows: pd.DataFrame, paper: float, backend: str
) -> Evaluation:
    kind, sel, unit = check["kind"], check["of"], check["unit"]
    if kind == "clock_fit":
        t_ns = _values(rows, sel, "ns")
        fit = clock_fit(rows.loc[t_ns.index, "sm_clock_mhz"].to_numpy(), t_ns.to_numpy())
        if fit is None:
            clocks = rows["sm_clock_mhz"].round(-1).nunique()
            raise NotMeasurable(
                f"needs locked SM clocks: {clocks} distinct SM clock(s) measured, 3 or more needed"
            )
        v = {
            "c_cycles": fit.c_cycles,
            "b_us": fit.b_ns / 1000.0,
            "r2": fit.r2,
            "clock_share": 100.0 * fit.clock_share_at_max,
        }[check["quantity"]]
        text = (
            f"{_fmt(v, unit)} (C={fit.c_cycles:.0f} cycles, B={fit.b_ns / 1000:.3g} us, "
            f"R2={fit.r2:.4f}, {fit.clocks} clocks)"
        )
        return Evaluation(v, text, _compare(v, check, paper), backend)
    col = param_column(check["x"])
    if col not in rows:
        raise NotMeasurable(f"sweep parameter {check['x']!r} absent")
    x = pd.to_numeric(rows[col], errors="coerce")
    y = _values(rows, sel, unit if kind != "scaling" else str(rows["unit"].iloc[0]))
    xs = x.loc[y.index].to_numpy()
    if kind == "first_reaching":
        v = first_reaching(xs, y.to_numpy(), check["level"])
        if v is None:
            return Evaluation(math.nan, f"never reaches {check['level']:g} {unit}", False, backend)
        return Evaluation(v, f"{v:g} {check['x']}", _compare(v, check, paper), backend)
    if kind == "slope":
        fit = linear_slope(xs, y.to_numpy())
        if fit is None:
            raise NotMeasurable(f"needs two or more values of {check['x']!r}")
        v = fit[0] * check.get("per", 1.0)
        text = f"{_fmt(v, unit)} per {check.get('per', 1.0):g} {check['x']} (R2={fit[1]:.3f})"
        return Evaluation(v, text, _compare(v, check, paper), backend)
    pfit = plateau_power_fit(xs, y.to_numpy())
    if pfit is None:
        raise NotMeasurable(f"needs three or more values of {check['x']!r}")
    q = check["quantity"]
    if q == "loss":
        v = 100.0 * pfit.loss_at(check.get("at", float(np.max(xs))))
    else:
        v = pfit.onset if q == "onset" else pfit.plateau
    text = (
        f"{_fmt(v, unit)} (plateau {pfit.plateau:.3g}, onset {pfit.onset:g}, "
        f"exponent {pfit.exponent:.2f}, R2={pfit.r2:.3f})"
    )
    return Evaluation(v, text, _compare(v, check, paper), backend)


def requirement_text(req: dict[str, Any]) -> str:
    parts = [("/".join(req["gpu"]) if req["gpu"] else "any GPU")]
    parts.append("real mlx5 NIC" if req["real_nic"] else "softnic or real NIC")
    parts.append(f"{req['nodes']} node{'s' if req['nodes'] > 1 else ''}")
    if req["clock_lock"]:
        parts.append("locked SM clocks")
    if req.get("cpu_clock_states"):
        parts.append("cold and warm proxy cores")
    if req.get("libraries"):
        parts.append(", ".join(req["libraries"]))
    return "; ".join(parts)


def _precheck(ctx: CampaignContext, claim: dict[str, Any]) -> None:
    exp = claim["experiment"]
    for sel in _selectors(claim["check"]):
        names = selector_experiments(sel, exp)
        if all(ctx.experiment_rows(e).empty for e in names):
            reasons = [r for e in names for r in ctx.skip_reasons(e)][:2]
            why = f"not runnable here: {'; '.join(reasons)}" if reasons else "not run"
            which = " or ".join(names)
            raise NotMeasurable(f"experiment {which} has no measurements in this campaign ({why})")
    req = claim["requires"]
    if req["gpu"]:
        have = " ".join(ctx.gpus).lower()
        if not any(g.lower() in have for g in req["gpu"]):
            this = ", ".join(ctx.gpus) or "no GPU recorded"
            raise NotMeasurable(f"needs {'/'.join(req['gpu'])} (this campaign: {this})")
    if req.get("cpu_clock_states"):
        states = set(clock_states(ctx.experiment_rows(exp)))
        if not {"cold", "warm"} <= states:
            raise NotMeasurable("needs proxy cores measured both cold and warm")


def check_claim(
    ctx: CampaignContext, claim: dict[str, Any], decide: dict[str, Any] | None = None
) -> dict[str, Any]:
    decide = DEFAULT_DECIDE | (decide or {})
    paper = claim["paper"]
    row = {
        "id": claim["id"],
        "experiment": claim["experiment"],
        "paper_ref": claim["paper_ref"],
        "claim": claim["claim"],
        "headline": bool(claim.get("headline", False)),
        "paper_value": paper["value"],
        "paper_unit": paper["unit"],
        "paper_platform": paper["platform"],
        "measured": math.nan,
        "measured_text": "",
        "backend": "",
        "runs": 0,
        "ci_lo": math.nan,
        "ci_hi": math.nan,
        "spread": math.nan,
        "host_busy": math.nan,
        "host_loadavg": math.nan,
        "requires": requirement_text(claim["requires"]),
    }
    try:
        _precheck(ctx, claim)
        ev = evaluate_check(ctx, claim)
    except NotMeasurable as why:
        return row | {"verdict": NOT_MEASURABLE, "reason": str(why)}
    per_run = []
    for run_ctx in ctx.run_contexts().values():
        try:
            per_run.append(evaluate_check(run_ctx, claim, ev.backend))
        except NotMeasurable:
            continue  # this run lacks a point the check needs: it does not count
    verdict, lo, hi, why = decide_verdict(claim["check"], paper["value"], ev, per_run, decide)
    values = [e.measured for e in per_run]
    where = {"softnic": " (software NIC: model numbers)", "emulated NIC": " (emulated NIC)"}
    _, points = choose_backend(ctx, claim, ev.backend)
    load = hostload.over_runs(pd.concat(points.values()))
    busy, loadavg = load["host_others_busy_max"], load["host_loadavg_max"]
    warn = hostload.warning(busy, loadavg, float(decide["host_load_warning"]))
    return row | {
        "measured": ev.measured,
        "measured_text": ev.text,
        "backend": ev.backend,
        "runs": len(per_run),
        "ci_lo": lo,
        "ci_hi": hi,
        "spread": spread(values) if claim["check"]["kind"] != "ordering" else math.nan,
        "host_busy": busy,
        "host_loadavg": loadavg,
        "verdict": verdict,
        "reason": why
        + where.get(nic_kind(ev.backend.split(" ")[0]), "")
        + (f" {warn}" if warn else ""),
    }


def decide_verdict(
    check: dict[str, Any],
    paper: float,
    central: Evaluation,
    per_run: list[Evaluation],
    decide: dict[str, Any],
) -> tuple[str, float, float, str]:
    """The verdict from the per-run values: their 95% t-interval against the tolerance (an
    ordering: in how many runs it holds); with the interval and the reason."""
    n, need = len(per_run), int(decide["min_runs"])
    rule = _reason(check)
    if n < need:
        would = "pass" if central.passed else "fail"
        values = [e.measured for e in per_run] if check["kind"] != "ordering" else []
        lo, hi = t_interval(values)  # shown, not decided on
        return (
            TOO_FEW_RUNS,
            lo,
            hi,
            f"{n} independent run(s) measured it; {need} are needed to decide "
            f"(config/claims.yaml decide.min_runs); on the medians the check would {would}. "
            + rule,
        )
    if check["kind"] == "ordering":
        held = sum(e.passed for e in per_run)
        verdict = REPRODUCED if held == n else NOT_REPRODUCED if held == 0 else UNSTABLE
        return verdict, math.nan, math.nan, f"holds in {held} of {n} runs. " + rule
    values = [e.measured for e in per_run]
    finite = [v for v in values if math.isfinite(v)]
    if len(finite) < n:  # e.g. a curve that never reaches the level in some runs
        verdict = NOT_REPRODUCED if not finite else UNSTABLE
        return verdict, math.nan, math.nan, f"no value in {n - len(finite)} of {n} runs. " + rule
    lo, hi = t_interval(finite)
    inside, outside = _against(check, paper, lo, hi)
    verdict = REPRODUCED if inside else NOT_REPRODUCED if outside else UNSTABLE
    text = f"95% interval over {n} runs {lo:.4g}..{hi:.4g}"
    s = spread(finite)
    if math.isfinite(s) and s > float(decide["spread_warning"]):
        text += f"; the runs disagree: max/min {s:.2f}x"
    return verdict, lo, hi, f"{text}. {rule}"


def _against(check: dict[str, Any], paper: float, lo: float, hi: float) -> tuple[bool, bool]:
    """(interval wholly passes, interval wholly fails) the check."""
    if "op" in check:
        b = check["bound"]
        return (lo >= b, hi < b) if check["op"] == ">=" else (hi <= b, lo > b)
    tol = check.get("tolerance", 0.25) * abs(paper)
    return (paper - tol <= lo and hi <= paper + tol, hi < paper - tol or lo > paper + tol)


def _reason(check: dict[str, Any]) -> str:
    if "op" in check:
        return f"Check: measured {check['op']} {check['bound']:g} {check['unit']}."
    if check["kind"] == "ordering":
        tol = check.get("tolerance", 0.0)
        return f"Check: increasing in the listed order (inversions up to {tol:.0%} allowed)."
    return f"Check: within {check.get('tolerance', 0.25):.0%} of the paper's value."


def check_claims(
    summary: pd.DataFrame,
    records: pd.DataFrame,
    hardware: list[dict[str, Any]],
    claims: list[dict[str, Any]] | None = None,
    decide: dict[str, Any] | None = None,
) -> pd.DataFrame:
    gpus = gpu_models(hardware) or platform_gpus(summary)
    ctx = CampaignContext(summary=summary, records=records, gpus=gpus)
    decide = decide if decide is not None else decide_settings()
    rows = [check_claim(ctx, c, decide) for c in (claims if claims is not None else load_claims())]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


# ---- paper values as data -----------------------------------------------------------------------
def paper_cell(cell: dict[str, Any], paper_dir: Path = PAPER_DIR) -> str:
    """The text of one cell of report/paper/<table>, selected by column values of its row."""
    return cell_text(cell, paper_dir)


def percent_number(text: str) -> float:
    """The first number written as a percentage ('IBRC enqueue 92% clock-sensitive' -> 92)."""
    m = re.search(r"(\d+(?:\.\d+)?)\s*%", text)
    if not m:
        raise ValueError(f"no percentage in {text!r}")
    return float(m.group(1))


def derive_paper_value(paper: dict[str, Any], paper_dir: Path = PAPER_DIR) -> float:
    if paper["derive"] in ("percent", "fraction"):
        pct = percent_number(paper_cell(paper["source"][0], paper_dir))
        return pct if paper["derive"] == "percent" else pct / 100.0
    cells = [leading_number(paper_cell(c, paper_dir)) for c in paper["source"]]
    how = paper["derive"]
    if how == "cell":
        return cells[0]
    if how == "ratio":
        return cells[0] / cells[1]
    if how == "difference":
        return cells[0] - cells[1]
    return 1.0 if all(b >= a for a, b in zip(cells, cells[1:], strict=False)) else 0.0
