"""Faults and hostile input: values never reach a shell, names are checked at load. (Two runs in one
results folder: tests/test_remeasure.py.)"""

from __future__ import annotations

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
