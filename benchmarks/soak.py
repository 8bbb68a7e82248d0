#!/usr/bin/env python3
"""Reliability soak: the softnic cpu engine and the mini-proxy rings, with producer processes killed
(SIGKILL) and restarted at random, must lose and duplicate nothing (docs/soak.md).

For each target (engine, rings) this runs gicomm-bench-soak with the point of
config/experiments/soak.yaml (duration_s replaced by --duration), into a campaign

    <out-root>/soak-<host>-<date>/hosts/<host>/hardware.json       (python -m gicomm.probe)
    <out-root>/soak-<host>-<date>/raw/soak/<host>/run0.jsonl        (the driver's records)

and prints one line per target: ops, kills, lost, duplicated, reordered, msg_rate. The default is
the 10-minute soak of each target (about 20 minutes in all):

    .venv/bin/python benchmarks/soak.py [--duration 600] [--targets engine rings] [--host H]
        [--out-root results/archive] [--build-dir build/soak]

The driver is built (host only, its target alone) when --build-dir lacks it. A rerun into the same
campaign skips the points already recorded (the driver contract). Exit status 1 when a point failed
or any of lost / duplicated / reordered is not 0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

from gicomm.experiments import load_experiment, point_id  # noqa: E402
from gicomm.records import iter_records  # noqa: E402

DRIVER = "gicomm-bench-soak"
COLUMNS = ("ops_total", "kills", "lost", "duplicated", "reordered", "msg_rate")


def default_host() -> str:
    name = socket.gethostname().split(".")[0].lower()
    return re.sub(r"[^a-z0-9-]+", "-", name).strip("-") or "host"


def find_driver(build_dir: Path) -> Path:
    for cand in (build_dir / "bin" / DRIVER, build_dir / "bench" / "soak" / DRIVER):
        if cand.is_file():
            return cand
    subprocess.run(
        ["cmake", "-S", str(REPO / "native"), "-B", str(build_dir), "-DGICOMM_WITH_CUDA=OFF"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    subprocess.run(
        ["cmake", "--build", str(build_dir), "--target", DRIVER, "-j", "2"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return build_dir / "bin" / DRIVER


def soak_points(duration: float, targets: list[str]) -> list[dict]:
    exp = load_experiment(REPO / "config" / "experiments" / "soak.yaml")
    points = []
    for target in targets:
        matches = [p.params for p in exp.points("full") if p.params.get("target") == target]
        if not matches:
            raise SystemExit(f"config/experiments/soak.yaml has no point with target={target}")
        params = dict(matches[0])
        params["duration_s"] = int(duration) if float(duration).is_integer() else float(duration)
        points.append({"point_id": point_id("soak", params), "params": params})
    return points


def probe(host: str, out: Path) -> dict:
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
        subprocess.run(
            [sys.executable, "-m", "gicomm.probe", "--host", host, "--out", str(out)],
            check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "workflow")},
        )  # fmt: skip
    return json.loads(out.read_text())


def summarize(records: list[dict], point_ids: set[str]) -> tuple[list[list[str]], bool]:
    rows: list[list[str]] = []
    ok = True
    by_target: dict[str, dict[str, dict]] = {}
    for r in records:
        if r.get("point_id") in point_ids:
            by_target.setdefault(r["params"]["target"], {})[r["metric"]] = r
    for target, metrics in by_target.items():
        elapsed = metrics.get("elapsed_s", {}).get("stats", {}).get("p50")
        row = [target, "-" if elapsed is None else f"{elapsed:.1f}"]
        status = "ok"
        for m in COLUMNS:
            rec = metrics.get(m)
            if rec is None or "stats" not in rec:
                row.append("-")
                continue
            v = rec["stats"]["mean" if m == "msg_rate" else "p50"]
            row.append(f"{v:.3f}" if m == "msg_rate" else str(int(v)))
            if rec["status"] != "ok":
                status = "FAILED"
            if m in ("lost", "duplicated", "reordered") and v != 0:
                status = "FAILED"
        if any(r["status"] != "ok" for r in metrics.values()):
            status = "FAILED"
            errs = {r.get("error", "") for r in metrics.values() if r["status"] != "ok"}
            row.append(status + ": " + "; ".join(sorted(errs))[:200])
        else:
            row.append(status)
        ok = ok and status == "ok"
        rows.append(row)
    return rows, ok


def print_table(rows: list[list[str]]) -> None:
    head = [
        "target",
        "elapsed_s",
        "ops",
        "kills",
        "lost",
        "duplicated",
        "reordered",
        "Mmsg/s(mean)",
        "status",
    ]
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)
    ]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--duration", type=float, default=600.0, help="seconds per target (default 600)"
    )
    ap.add_argument(
        "--targets", nargs="+", default=["engine", "rings"], choices=["engine", "rings"]
    )
    ap.add_argument("--host", default=default_host())
    ap.add_argument("--date", default=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"))
    ap.add_argument("--out-root", type=Path, default=REPO / "results" / "archive")
    ap.add_argument("--build-dir", type=Path, default=REPO / "build" / "soak")
    args = ap.parse_args(argv)
    if not (args.duration > 0):
        ap.error("--duration must be > 0")
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", args.host):
        ap.error("--host: lowercase letters, digits and '-' only")

    campaign = f"soak-{args.host}-{args.date}"
    root = args.out_root / campaign
    hw = probe(args.host, root / "hosts" / args.host / "hardware.json")
    out = root / "raw" / "soak" / args.host / "run0.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    driver = find_driver(args.build_dir)
    points = soak_points(args.duration, args.targets)
    with tempfile.TemporaryDirectory() as td:
        pfile = Path(td) / "points.jsonl"
        pfile.write_text("".join(json.dumps(p) + "\n" for p in points))
        cmd = [
            str(driver), "--experiment", "soak", "--points", str(pfile), "--out", str(out),
            "--campaign", campaign, "--host", args.host, "--platform", "local", "--run-index", "0",
            "--provenance-id", str(hw.get("provenance_id", "unknown")), "--timeout-ms", "10000",
        ]  # fmt: skip
        print(f"soak: {len(points)} target(s) x {args.duration:g} s -> {out}", flush=True)
        rc = subprocess.run(cmd).returncode
    if rc != 0:
        print(f"soak: {DRIVER} exited {rc}", file=sys.stderr)
        return 1
    rows, ok = summarize(list(iter_records(out)), {p["point_id"] for p in points})
    print_table(rows)
    return 0 if ok and len(rows) == len(points) else 1


if __name__ == "__main__":
    sys.exit(main())
