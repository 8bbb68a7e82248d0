"""Every rate record of a driver run beside the engine ceiling it carries: the ratio ceiling/rate
and whether the point is model-NIC bound (within 2x of the ceiling, as the report marks it); then
the engine_ceiling experiment's ceilings per shape. Needs pandas (gicomm.labels decides the mark),
not the pipeline's other packages, so it runs on the GPU machines:
python3 tools/ceiling_summary.py RECORDS.jsonl"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
from gicomm.labels import RATE_METRICS, record_wqe_rate, within_bound  # noqa: E402


def params_text(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items() if k not in ("link_ref", "msgs_total"))


def main(path: str) -> int:
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    failed = [r for r in records if r.get("status") != "ok"]
    missing = 0
    print("rate points (softnic numbers: the model NIC, never a real NIC's)")
    print(f"{'experiment':15s} {'backend':17s} {'metric':13s} {'p50':>10s} {'Mmsg/s':>9s} "
          f"{'ceiling':>9s} {'ceil/rate':>9s}  bound  shape | params")  # fmt: skip
    for r in records:
        if r.get("status") != "ok" or r["metric"] not in RATE_METRICS:
            continue
        rate = record_wqe_rate(r) or 0.0
        ceiling = r.get("engine_ceiling")
        if ceiling is None:
            missing += r["nic_backend"].startswith("softnic")
            ratio, bound = "MISSING", "-"
        else:
            ratio = f"{ceiling / rate:9.2f}" if rate > 0 else "inf"
            bound = "yes" if within_bound(rate, ceiling) else "no"
        print(f"{r['experiment']:15s} {r['nic_backend']:17s} {r['metric']:13s} "
              f"{r['stats']['p50']:10.3f} {rate:9.3f} "
              f"{(f'{ceiling:9.2f}' if ceiling is not None else '-'):>9s} {ratio:>9s}  {bound:5s}  "
              f"{r.get('engine_ceiling_shape', '-')} | {params_text(r['params'])}")  # fmt: skip
    print("\nengine ceilings per shape (engine_ceiling, Mmsg/s p50, SM clock)")
    for r in records:
        if r["experiment"] == "engine_ceiling" and r.get("status") == "ok":
            print(f"  {r['nic_backend']:17s} {r.get('engine_ceiling_shape', '-'):32s} "
                  f"{r['stats']['p50']:10.2f}  {r.get('sm_clock_mhz') or 0:.0f} MHz "
                  f"{r['params'].get('method', '')}")  # fmt: skip
    below = cpu_engine_compare(records)
    n, bad = len(records), len(failed)
    print(f"\n{n} records, {bad} failed, {missing} softnic rate records lack a ceiling")
    for r in failed:
        print(f"  FAILED {r['experiment']} {r.get('point_id')}: {r.get('error')}")
    return 1 if failed or missing or below else 0


def cell(v: float | None, width: int = 8) -> str:
    return f"{v:{width}.2f}" if v is not None else f"{'-':>{width}s}"


def cpu_engine_compare(records: list[dict]) -> int:
    """The cpu engine's earlier ceiling (engine_ceiling method=window: its median round), its
    steady ceiling (method=steady: its best round) and the ceiling the goodput driver's hook
    attached, beside mini-proxy's goodput rate, per run and size; prints nothing without
    steady engine_ceiling records. Returns how many rates exceed their steady ceilings."""
    ok = [r for r in records if r.get("status") == "ok"]
    ceil: dict[tuple[str, int, str], float] = {}  # (method, run, shape) -> ceiling
    for r in ok:
        p = r["params"]
        if r["experiment"] == "engine_ceiling" and p.get("engine") == "cpu" and "method" in p:
            stat = "max" if p["method"] == "steady" else "p50"
            key = (p["method"], int(r["run_index"]), r.get("engine_ceiling_shape", ""))
            ceil[key] = float(r["stats"][stat])
    if not any(k[0] == "steady" for k in ceil):
        return 0
    rates = [r for r in ok if r["experiment"] == "goodput" and r["metric"] == "msg_rate"
             and r["nic_backend"] == "softnic-cpu"]  # fmt: skip
    print("\ncpu engine: old vs new ceiling beside mini-proxy's goodput (pointer writes,")
    print("Mmsg/s; softnic numbers, never a NIC's). old: method window, median of 3;")
    print("new: method steady, best of 5; hook: what the goodput run's records carry")
    head = ["old", "new", "hook", "rate", "new/rate", "hook/rate", "old/rate"]
    print(f"{'run':>3s} {'size':>5s} {'shape':36s} " + " ".join(f"{h:>9s}" for h in head))
    below: list[str] = []
    order = sorted(rates, key=lambda r: (r["run_index"], -r["params"]["ctas"], r["params"]["size"]))
    for r in order:
        run, size, rate = int(r["run_index"]), int(r["params"]["size"]), float(r["stats"]["p50"])
        shape = r.get("engine_ceiling_shape", "-")
        old = ceil.get(("window", run, shape))
        new = ceil.get(("steady", run, shape))
        hook = r.get("engine_ceiling")
        ratios = [v / rate if v is not None and rate > 0 else None for v in (new, hook, old)]
        cells = [cell(v, 9) for v in (old, new, hook, rate, *ratios)]
        print(f"{run:3d} {size:5d} {shape:36s} " + " ".join(cells))
        for name, v in (("new", new), ("hook", hook)):
            if v is None or v < rate:
                below.append(f"run {run} {shape}: {name} {cell(v).strip()} < rate {rate:.2f}")
    if not rates:
        below.append("no mini-proxy goodput record on softnic-cpu")
    if below:
        print(f"new ceiling >= rate: FAIL ({len(below)}): " + "; ".join(below))
    else:
        print(f"new ceiling >= rate: PASS ({len(rates)} goodput points, standalone and hook)")
    return len(below)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
