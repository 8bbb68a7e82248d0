"""Artifact evaluation: container recipes agree with the pins, the archive unpacks and dry-runs on a
clean tree, and the project carries a license and a citation file."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import yaml
from conftest import REPO

from gicomm.container import RECIPES, read_list


def test_container_recipes_are_generated_from_the_pins():
    for rel, make in RECIPES.items():
        committed = (REPO / rel).read_text()
        assert committed == make(REPO), f"{rel} is stale: run `make container-recipes`"
        assert "requirements.txt" in committed
        for pkg in read_list(REPO / "tools/system-packages.txt"):
            if pkg != "chromium":
                assert pkg in committed, (rel, pkg)


def test_archive_unpacks_and_dry_runs_on_a_clean_tree(tmp_path: Path):
    out = subprocess.run(
        ["bash", "tools/make-archive.sh", str(tmp_path / "dist")],
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    tarball = Path(out.stdout.strip().splitlines()[-1])
    with tarfile.open(tarball) as t:
        names = t.getnames()
        t.extractall(tmp_path / "unpacked", filter="data")
    top = tmp_path / "unpacked" / tarball.name.removesuffix(".tar.gz")
    for needed in ("Snakefile", "config/config.yaml", "envs/pipeline.yaml", "native/CMakeLists.txt",
                   "container/Dockerfile", "LICENSE", "CITATION.cff"):  # fmt: skip
        assert f"{top.name}/{needed}" in names, needed
    assert not any("/.venv/" in n or "/build/" in n for n in names)
    dry = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--profile", "profiles/local"],
        cwd=top, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "report_campaign" in dry.stdout


def test_license_and_citation():
    assert "Apache License" in (REPO / "LICENSE").read_text()[:200]
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert cff["license"] == "Apache-2.0"
    assert any("Dissecting" in r["title"] for r in cff["references"])


def test_artifact_md_is_current_and_every_claim_has_command_hardware_and_time():
    from gicomm.artifact import claim_rows, experiment_costs, render

    committed = (REPO / "ARTIFACT.md").read_text()
    assert committed == render(), "ARTIFACT.md is stale: run `make artifact-docs`"
    rows = claim_rows()
    assert len(rows) >= 40
    costs = experiment_costs()
    bounded: set[str] = set()
    for r in rows:
        cid = r.claim["id"]
        assert f"`make claim CLAIM={cid}`" in committed, cid
        assert {"gpu", "real_nic", "nodes", "clock_lock"} <= set(r.claim["requires"]), cid
        # every claim has a time and a disk figure: measured, or an upper bound said to be one
        assert r.experiments, cid
        assert r.minutes is not None and r.minutes > 0 and r.disk_mb is not None, cid
        if r.bound:
            bounded |= {n for n in r.experiments if costs[n].bound}
            assert f"at most {r.minutes:.0f} min" in committed or r.minutes < 1, cid
    # Bounds only where the experiment never ran on our machines: those that need a real NIC.
    assert bounded <= {"library_baselines", "connection_scaling"}, bounded
    for name in bounded:
        assert "never measured" in costs[name].basis and "per-point limit" in costs[name].basis
