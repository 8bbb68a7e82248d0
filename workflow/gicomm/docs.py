"""Generated documentation: the README's per-experiment command table (and ARTIFACT.md), rendered
from config/experiments/ so the docs never drift from the configs. `python -m gicomm.docs` rewrites
them; tests/test_docs.py fails when a committed copy is stale."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from gicomm import CONFIG_DIR, REPO_ROOT
from gicomm.catalogue import paper_place
from gicomm.experiments import Experiment, load_experiment

BEGIN, END = "<!-- experiments:begin -->", "<!-- experiments:end -->"


def experiments(config_dir: Path = CONFIG_DIR) -> list[Experiment]:
    return [load_experiment(p) for p in sorted((config_dir / "experiments").glob("*.yaml"))]


def run_command(name: str) -> str:
    return f".venv/bin/snakemake --profile profiles/local --config 'experiments=[\"{name}\"]'"


def needs_text(e: Experiment) -> str:
    n = e.needs
    parts = []
    if n.get("gpus"):
        parts.append(f"{n['gpus']} GPU" + ("s" if n["gpus"] > 1 else ""))
    if n.get("nvlink_peers"):
        parts.append("NVLink peers")
    if n.get("rdma_nic"):
        parts.append("mlx5 NIC")
    if n.get("nodes", 1) > 1:
        parts.append(f"{n['nodes']} nodes")
    if n.get("clock_lock"):
        parts.append("clock lock")
    extra = sorted({f"{k}={v}" for when, _ in e.needs_when for k, v in when.items()})
    base = ", ".join(parts) or "CPU only"
    return base + (f" (more for {', '.join(extra)})" if extra else "")


def readme_table(config_dir: Path = CONFIG_DIR) -> str:
    rows = ["| experiment | paper | needs | command |", "|---|---|---|---|"]
    for e in experiments(config_dir):
        paper = paper_place(e.name, e.title)
        rows.append(f"| `{e.name}` | {paper} | {needs_text(e)} | `{run_command(e.name)}` |")
    return "\n".join(rows)


def render_readme(text: str, config_dir: Path = CONFIG_DIR) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"README.md lacks the {BEGIN} ... {END} block")
    return pattern.sub(lambda _: f"{BEGIN}\n{readme_table(config_dir)}\n{END}", text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", type=Path, default=REPO_ROOT)
    args = ap.parse_args(argv)
    readme = args.root / "README.md"
    readme.write_text(render_readme(readme.read_text(), args.root / "config"))
    print(f"wrote {readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
