"""Faults and hostile input: values never reach a shell, two runs cannot share a results folder."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from test_bench_runner import experiment, make_job

from gicomm.bench import run_batch
from gicomm.config import load_campaign
from gicomm.errors import ConfigError
from gicomm.records import iter_records

HOSTILE = ["a b", "it's", 'say "hi"', "x; touch PWNED", "$(touch PWNED)", "`touch PWNED`", "a|b>c"]


def test_hostile_parameter_values_reach_the_driver_verbatim(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = make_job(tmp_path, experiment(HOSTILE))
    run_batch(job)
    got = [r["params"]["behave"] for r in iter_records(job.output)]
    assert got == HOSTILE
    assert all(r["status"] == "ok" for r in iter_records(job.output))
    assert not list(tmp_path.rglob("PWNED")) and not (REPO / "PWNED").exists()


@pytest.mark.parametrize("key", ["campaign", "host"])
@pytest.mark.parametrize("value", ["$(touch PWNED)", "x; rm -rf /", "a b", "../escape"])
def test_hostile_names_are_refused_at_load(key, value):
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg[key] = value
    with pytest.raises(ConfigError, match=f"'{key}'.*does not match the allowed pattern"):
        load_campaign(cfg)


def test_a_second_run_on_the_same_results_is_refused(repo_copy: Path):
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--profile",
        "profiles/local",
        "--config",
        "native={cuda: 'off'}",
        "report={archived: []}",  # this campaign only: the archived reports are another test's
        "--",
        # up to the campaign's summary: every point measured (long enough to be raced), no model,
        # figures or report (the full local run's test has those)
        "results/local/aggregate/summary.csv",
    ]
    first = subprocess.Popen(
        cmd, cwd=repo_copy, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    locks = repo_copy / ".snakemake/locks"
    deadline = time.monotonic() + 60
    while not (locks.is_dir() and any(locks.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.poll() is None, "the first run ended before it could be raced"
    second = subprocess.run(cmd, cwd=repo_copy, capture_output=True, text=True, check=False)
    assert second.returncode != 0
    assert "cannot be locked" in second.stdout + second.stderr
    out, _ = first.communicate(timeout=600)
    assert first.returncode == 0, out[-3000:]
