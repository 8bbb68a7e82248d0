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
from gicomm.labels import BOUND_FACTOR, RATE_METRICS, wqe_rate  # noqa: E402


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
        rate = wqe_rate(r["metric"], float(r["stats"]["p50"]), r["params"].get("size")) or 0.0
        ceiling = r.get("engine_ceiling")
        if ceiling is None:
            missing += r["nic_backend"].startswith("softnic")
            ratio, bound = "MISSING", "-"
        else:
            ratio = f"{ceiling / rate:9.2f}" if rate > 0 else "inf"
            bound = "yes" if rate * BOUND_FACTOR >= ceiling else "no"
        print(f"{r['experiment']:15s} {r['nic_backend']:17s} {r['metric']:13s} "
              f"{r['stats']['p50']:10.3f} {rate:9.3f} "
              f"{(f'{ceiling:9.2f}' if ceiling is not None else '-'):>9s} {ratio:>9s}  {bound:5s}  "
              f"{r.get('engine_ceiling_shape', '-')} | {params_text(r['params'])}")  # fmt: skip
    print("\nengine ceilings per shape (engine_ceiling, Mmsg/s p50, SM clock)")
    for r in records:
        if r["experiment"] == "engine_ceiling" and r.get("status") == "ok":
            print(f"  {r['nic_backend']:17s} {r.get('engine_ceiling_shape', '-'):32s} "
                  f"{r['stats']['p50']:10.2f}  {r.get('sm_clock_mhz') or 0:.0f} MHz")  # fmt: skip
    n, bad = len(records), len(failed)
    print(f"\n{n} records, {bad} failed, {missing} softnic rate records lack a ceiling")
    for r in failed:
        print(f"  FAILED {r['experiment']} {r.get('point_id')}: {r.get('error')}")
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
