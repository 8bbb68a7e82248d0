"""The pipeline end to end on this machine (no GPU, no NIC): dry-runs under both profiles, and a
full local run in a fresh copy of the tree that produces the report with hosts and provenance."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO

from gicomm.experiments import load_experiment


def snakemake(cwd: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("profile", ["profiles/local", "profiles/slurm"])
def test_default_config_dry_runs_under_each_profile(profile: str):
    if not (REPO / profile).is_dir():
        pytest.fail(f"{profile} is missing")
    # --forceall: the dry run lists every job even where results/ already holds outputs.
    out = snakemake(REPO, "-n", "--forceall", "--profile", profile)
    assert out.returncode == 0, out.stderr[-3000:]
    for rule in ("probe_host", "build_native", "bench_batch", "tidy_campaign", "report_campaign"):
        assert rule in out.stdout, rule


def test_full_local_run_produces_report_with_provenance(repo_copy: Path):
    extra = repo_copy / "test-config.yaml"
    # This campaign alone, its reduced sweep: the full sweep and every archived campaign's report
    # are `make run`'s (archived reports took this test to 7.7 min of make test's 20); a report
    # beside an archive is test_report's.
    extra.write_text(
        "campaign: citest\nsweep: reduced\nnative: {cuda: 'off', build_jobs: 2}\n"
        "report: {archived: []}\n"
    )
    out = snakemake(repo_copy, "--profile", "profiles/local", "--configfile", str(extra))
    assert out.returncode == 0, out.stderr[-5000:]
    report = repo_copy / "results/citest/report"
    index = (report / "index.html").read_text()
    hw = next((repo_copy / "results/citest/hosts").glob("*/hardware.json"))
    probe = json.loads(hw.read_text())
    assert probe["provenance_id"] in index
    assert "Hosts and provenance" in index
    assert "gicomm commit" in index
    # Every configured experiment has a page, a figure and a CSV, measured or not.
    for path in (repo_copy / "config/experiments").glob("*.yaml"):
        exp = load_experiment(path)
        if exp.opt_in:  # run only when named (the soak): not part of the default campaign
            continue
        assert (report / "experiments" / f"{exp.name}.html").exists()
        assert (report / "figures" / f"{exp.name}.png").stat().st_size > 1000
        assert (report / "figures" / f"{exp.name}.svg").exists()
        assert (report / "data" / f"{exp.name}.csv").exists()
    assert (repo_copy / "results/combined/records.csv").exists()
    # Every point the drivers measured carries the host's load while it ran, shown beside spread.
    tidy = pd.read_csv(repo_copy / "results/citest/tidy/records.csv", low_memory=False)
    measured = tidy[tidy["status"] == "ok"]
    assert not measured.empty and measured["host_loadavg_1m"].notna().all()
    assert (measured["host_ncpu"] >= 1).all() and measured["host_self_cpus"].notna().all()
    assert "spread, host load</th>" in index
    # The evaluator's zip carries the report, the tidy tables and the provenance.
    with zipfile.ZipFile(repo_copy / "results/citest/export/citest-report.zip") as z:
        names = set(z.namelist())
    assert "citest/report/index.html" in names
    assert {"citest/tidy/records.csv", "citest/aggregate/summary.csv"} <= names
    assert f"citest/hosts/{hw.parent.name}/hardware.json" in names
    # snakemake --report packs the same figures.
    rep = snakemake(repo_copy, "--profile", "profiles/local", "--configfile", str(extra),
                    "--report", str(repo_copy / "report.zip"))  # fmt: skip
    assert rep.returncode == 0, rep.stderr[-3000:]
    with zipfile.ZipFile(repo_copy / "report.zip") as z:
        assert z.testzip() is None
        pages = [z.read(n).decode(errors="replace") for n in z.namelist() if n.endswith(".html")]
    # The landing page (the Snakefile's `report:`) opens the report.
    assert any("GPU-initiated communication, measured" in page for page in pages)
    # A second run has nothing to do.
    again = snakemake(repo_copy, "-n", "--profile", "profiles/local", "--configfile", str(extra))
    assert "Nothing to be done" in again.stdout + again.stderr


def test_every_rule_file_is_included_from_the_snakefile():
    snakefile = (REPO / "Snakefile").read_text()
    included = set(re.findall(r'^include: "workflow/rules/(\w+\.smk)"$', snakefile, re.M))
    assert included == {p.name for p in (REPO / "workflow/rules").glob("*.smk")}
    for rules in (REPO / "workflow/rules").glob("*.smk"):
        assert "include:" not in rules.read_text(), f"{rules.name} includes another rule file"
        # Only common.smk makes workflow/gicomm importable; the stages rely on it.
        if rules.name != "common.smk":
            assert "sys.path" not in rules.read_text(), rules.name
            assert "config.get(" not in rules.read_text(), f"{rules.name} reads an undeclared key"
