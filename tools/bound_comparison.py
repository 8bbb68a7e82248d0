"""Two measurements of a softnic campaign side by side: per experiment, backend, engine-ceiling
shape and metric, the median rate and median engine ceiling (Mmsg/s, MWQE/s) and how many records
are model-NIC bound (within 2x of their ceiling, as the report marks them), then the totals. How an
archive's comparison.txt is made. Each side is a records file or a folder of them (a campaign's
raw/, searched recursively); records that are not ok or carry no ceiling are left out. Needs only
gicomm.labels (pandas), so it runs on the GPU machines too:
python3 tools/bound_comparison.py OLD NEW"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
from gicomm.labels import BOUND_FACTOR, RATE_METRICS, record_wqe_rate, within_bound  # noqa: E402

Key = tuple[str, str, str, str]  # experiment, backend, ceiling shape, metric


def rate_points(side: Path) -> dict[Key, list[tuple[float, float]]]:
    """(rate as WQEs/s, ceiling) of every ok rate record that carries a ceiling, by key."""
    if not side.exists():
        raise SystemExit(f"bound_comparison: {side} does not exist (a records file or a folder)")
    files = sorted(side.rglob("*.jsonl")) if side.is_dir() else [side]
    out: dict[Key, list[tuple[float, float]]] = {}
    for f in files:
        for line in f.read_text().splitlines():
            r = json.loads(line) if line.strip() else {}
            if r.get("status") != "ok" or r.get("metric") not in RATE_METRICS:
                continue
            ceiling = r.get("engine_ceiling")
            rate = record_wqe_rate(r)
            if ceiling is None or rate is None:
                continue
            shape = r.get("engine_ceiling_shape", "-")
            key = (r["experiment"], r["nic_backend"], shape, r["metric"])
            out.setdefault(key, []).append((rate, float(ceiling)))
    return out


def bound(points: list[tuple[float, float]]) -> int:
    return sum(within_bound(rate, ceiling) for rate, ceiling in points)


def cell(points: list[tuple[float, float]]) -> str:
    if not points:
        return "-"
    rate = statistics.median(p[0] for p in points)
    ceiling = statistics.median(p[1] for p in points)
    return f"{rate:8.3g}/{ceiling:8.3g} ({bound(points)}/{len(points)})"


def main(old_path: str, new_path: str) -> int:
    old, new = rate_points(Path(old_path)), rate_points(Path(new_path))
    print(f"# model-NIC bound records (rate >= ceiling / {BOUND_FACTOR:g}): old {old_path}, "
          f"new {new_path}")  # fmt: skip
    print("# median rate / median ceiling (Mmsg/s, MWQE/s) (bound records / records)")
    head = ("experiment", "backend", "shape", "metric")
    print(f"{head[0]:15s} {head[1]:17s} {head[2]:40s} {head[3]:13s} {'old':>30s} {'new':>30s}")
    for key in sorted(old.keys() | new.keys()):
        experiment, backend, shape, metric = key
        print(f"{experiment:15s} {backend:17s} {shape:40s} {metric:13s} "
              f"{cell(old.get(key, [])):>30s} {cell(new.get(key, [])):>30s}")  # fmt: skip
    for name, side in (("old", old), ("new", new)):
        n = sum(len(v) for v in side.values())
        gpu = [p for k, v in side.items() if k[1].startswith("softnic-gpu") for p in v]
        print(f"{name}: {sum(bound(v) for v in side.values())} of {n} records bound "
              f"({bound(gpu)} of {len(gpu)} on the gpu engine)")  # fmt: skip
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1], sys.argv[2]))
