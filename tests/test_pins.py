"""Pins live in requirements.txt; every conda environment under envs/ mirrors them exactly."""

from __future__ import annotations

import re

import yaml
from conftest import REPO

CONDA_NAMES = {"pyyaml": "pyyaml", "nvidia-ml-py": "nvidia-ml-py"}


def pins() -> dict[str, str]:
    out = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            out[name.lower()] = version
    return out


def test_requirements_are_exact_pins():
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            assert re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", line), line
    assert pins()["snakemake"].split(".")[:2] >= ["9", "27"]
    for needed in ("snakemake-executor-plugin-slurm", "pandas", "seaborn", "jinja2", "pyyaml",
                   "numba", "nvidia-ml-py"):  # fmt: skip
        assert needed in pins(), needed


def test_conda_envs_mirror_the_pins():
    p = pins()
    checked = 0
    for env in sorted((REPO / "envs").glob("*.yaml")):
        deps = yaml.safe_load(env.read_text())["dependencies"]
        for dep in deps:
            if not isinstance(dep, str) or "=" not in dep:
                continue
            name, version = dep.split("=", 1)
            if name in p:
                assert version == p[name], (
                    f"{env.name}: {name}={version}, requirements.txt has {p[name]}"
                )
                checked += 1
    assert checked >= 10


def test_every_rule_names_a_conda_env_that_exists():
    for smk in (REPO / "workflow/rules").glob("*.smk"):
        for env in re.findall(r'conda:\s*\n\s*"([^"]+)"', smk.read_text()):
            assert (smk.parent / env).resolve().is_file(), (smk.name, env)
