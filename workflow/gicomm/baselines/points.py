"""Write each experiment's sweep points as a points file (native/bench/README.md), for a device
call that runs a driver by hand (native/baselines/device_nvlink.sh) where the pipeline's Python
dependencies are not installed.

    python -m gicomm.baselines.points OUTDIR EXPERIMENT... [--sweep full|reduced]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gicomm import CONFIG_DIR
from gicomm.experiments import load_experiment
from gicomm.fsutil import write_atomic


def write_points(outdir: Path, experiment: str, sweep: str = "full") -> Path:
    e = load_experiment(CONFIG_DIR / "experiments" / f"{experiment}.yaml")
    path = outdir / f"{experiment}.points.jsonl"
    write_atomic(path, "".join(p.to_json() + "\n" for p in e.points(sweep)))
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("experiments", nargs="+")
    ap.add_argument("--sweep", choices=["full", "reduced"], default="full")
    args = ap.parse_args(argv)
    for name in args.experiments:
        print(write_points(args.outdir, name, args.sweep))


if __name__ == "__main__":
    main()
