"""Profiles: `--profile slurm` resolves from the repository root, each platform dry-runs through the
slurm profile with the jobs and Slurm resources its platform file declares, the plugin turns those
into the sbatch options a site expects, and the local profile runs GPU jobs one at a time while CPU
jobs run in parallel."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from conftest import REPO

PAPER = ("h100", "h200", "b200", "gb200")
INTEGRATED = importlib.util.find_spec("gicomm.slurm") is not None
needs_spine = pytest.mark.skipif(
    not INTEGRATED,
    reason="the spine does not yet take Slurm resources from the platform file "
    "(gicomm.slurm and the rules' `resources: **platform_resources(...)`)",
)


def snakemake(cwd: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def profile(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / "profiles" / name / "profile.yaml").read_text())


# ---------------------------------------------------------------- the profile files
def test_each_profile_folder_has_exactly_one_profile_file():
    # Snakemake 9 reads profile.yaml or config.yaml; with both it would pick one by listing order.
    for name in ("local", "slurm"):
        files = sorted(p.name for p in (REPO / "profiles" / name).glob("*.yaml"))
        assert files == ["profile.yaml"], (name, files)


def test_slurm_profile_settings():
    p = profile("slurm")
    assert p["executor"] == "slurm"
    assert p["slurm-status-command"] == "sacct"  # job states through slurmdbd accounting
    assert p["retries"] >= 1
    # one Slurm job per batch of points; no --cores, which would cap every job's threads
    assert "groups" not in p and "cores" not in p


def test_local_profile_gives_timing_jobs_the_whole_host(tmp_path: Path):
    from gicomm.config import load_campaign
    from gicomm.layout import HOST_SHARES, Layout

    p = profile("local")
    assert p["cores"] == "all"
    assert f"host_share={HOST_SHARES}" in p["resources"]
    assert "host_share=1" in p["default-resources"]
    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    layout = Layout(load_campaign({**cfg, "experiments": ["engine_ceiling"]}))
    hw, build = tmp_path / "hardware.json", tmp_path / "build.json"
    hw.write_text(json.dumps({"gpus": {"devices": []}, "rdma": {"devices": []}}))
    build.write_text(json.dumps({"cuda": False}))
    # engine_ceiling's batch holds CPU points (measured here) and GPU points (skipped here).
    assert layout.host_share("engine_ceiling", 0, str(hw), str(build)) == HOST_SHARES
    cfg_gpu = {**cfg, "experiments": ["gda_one_op"]}
    gpu_only = Layout(load_campaign(cfg_gpu))
    assert gpu_only.host_share("gda_one_op", 0, str(hw), str(build)) == 1  # only skips here


def test_profile_name_slurm_resolves_from_the_repository_root(monkeypatch: pytest.MonkeyPatch):
    from snakemake.cli import get_profile_dir

    monkeypatch.chdir(REPO)
    for spelling in ("slurm", "profiles/slurm"):
        found = get_profile_dir(spelling)
        assert found is not None, spelling
        assert found[1].resolve() == (REPO / "profiles/slurm/profile.yaml").resolve()
    assert os.readlink(REPO / "slurm") == "profiles/slurm"


def test_snakemake_profile_slurm_dry_runs_from_the_repository_root():
    out = snakemake(REPO, "-n", "--forceall", "--profile", "slurm")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "bench_batch" in out.stdout


# ---------------------------------------------------------------- each platform, dry-run
def dry_run_jobs(out: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, resources) of every job a `snakemake -n` printed."""
    jobs: list[tuple[str, dict[str, str]]] = []
    rule = None
    for line in out.splitlines():
        m = re.match(r"\s*(?:local)?rule (\w+):$", line)
        if m:
            rule = m.group(1)
            continue
        m = re.match(r"\s*resources: (.*)$", line)
        if m and rule is not None:
            res = dict(kv.split("=", 1) for kv in m.group(1).split(", ") if "=" in kv)
            jobs.append((rule, res))
            rule = None
    return jobs


EXPECTED: dict[str, dict[str, dict[str, str]]] = {
    # platform -> rule -> resources that must be there (str values, as Snakemake prints them)
    "h200": {
        "bench_batch": {
            "slurm_partition": "gpu", "constraint": "h200", "gres": "gpu:h200:4",
            "slurm_extra": "--exclusive", "runtime": "120", "mem_mb": "64000", "cpus_per_task": "16",
        },
        "probe_host": {"slurm_partition": "gpu", "constraint": "h200", "gres": "gpu:h200:4"},
        "build_native": {"slurm_partition": "gpu", "constraint": "h200", "runtime": "60"},
    },
    "b200": {
        "bench_batch": {
            "slurm_partition": "b200", "gpu": "8", "gpu_model": "b200", "slurm_extra": "--exclusive",
            "runtime": "180", "mem_mb": "128000",
        },
        "probe_host": {"slurm_partition": "b200", "gpu": "8"},
        "build_native": {"slurm_partition": "b200"},
    },
    "h100": {
        "bench_batch": {
            "slurm_partition": "gpu", "constraint": "h100&ib", "gres": "gpu:4",
            "slurm_extra": "--exclusive", "runtime": "120",
        },
        "probe_host": {"slurm_partition": "gpu", "constraint": "h100&ib", "gres": "gpu:4"},
        "build_native": {"slurm_partition": "gpu", "constraint": "h100&ib"},
    },
    "gb200": {
        "bench_batch": {
            "slurm_partition": "gb200", "constraint": "gb200", "gpu": "1",
            "slurm_extra": "--exclusive", "cpus_per_task": "32",
        },
        "probe_host": {"slurm_partition": "gb200", "gpu": "1"},
        "build_native": {"slurm_partition": "gb200", "cpus_per_task": "32"},
    },
}  # fmt: skip
GPU_KEYS = {"gres", "gpu", "gpu_model"}


@needs_spine
@pytest.mark.parametrize("platform", PAPER)
def test_platform_dry_runs_through_the_slurm_profile_with_its_resources(platform: str):
    out = snakemake(
        REPO,
        "-n",
        "--forceall",
        "--profile",
        "slurm",
        "--configfile",
        f"config/platforms/{platform}.yaml",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    jobs = dry_run_jobs(out.stdout)
    rules = {r for r, _ in jobs}
    assert {"probe_host", "build_native", "bench_batch"} <= rules, rules
    from gicomm.slurm import slurm_resources

    spec = yaml.safe_load((REPO / f"config/platforms/{platform}.yaml").read_text())["platform_spec"]
    two_node = {k: str(v) for k, v in slurm_resources(spec, "gpu", nodes=2).items()}
    for rule, res in jobs:
        want = EXPECTED[platform].get(rule)
        if rule == "bench_batch" and res.get("nodes") == "2":
            want = two_node  # a batch of NIC points between two ranks (one task per node)
        if want is None:
            continue
        missing = {k: v for k, v in want.items() if res.get(k) != v}
        assert not missing, f"{platform} {rule}: expected {missing}, got {res}"
        if rule == "build_native":
            assert not GPU_KEYS & set(res), f"{platform}: the build asks for no GPU: {res}"
    # Many points per job: the campaign's bench jobs are its batches, not its points.
    from gicomm.config import load_campaign

    cfg = yaml.safe_load((REPO / "config/config.yaml").read_text())
    cfg.update(yaml.safe_load((REPO / f"config/platforms/{platform}.yaml").read_text()))
    c = load_campaign(cfg)
    batches = sum(c.runs_of(e) * len(e.batches(c.sweep)) for e in c.experiments.values())
    points = sum(c.runs_of(e) * len(e.points(c.sweep)) for e in c.experiments.values())
    assert sum(r == "bench_batch" for r, _ in jobs) == batches < points
    # The NIC experiments' batches ask for two nodes; the others for one.
    two = sum(r == "bench_batch" and res.get("nodes") == "2" for r, res in jobs)
    assert 0 < two < batches


# ---------------------------------------------------------------- what sbatch receives
class _Resources(dict):
    def __getattr__(self, name: str) -> Any:
        return self[name]


def sbatch_call(resources: dict[str, Any], threads: int = 1) -> str:
    """The sbatch command line snakemake-executor-plugin-slurm builds for a job with `resources`."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    job = SimpleNamespace(resources=_Resources(resources), threads=threads, name="bench_batch")
    params = {
        "run_uuid": "gicomm_test", "slurm_logfile": "log/%j.log", "comment_str": "rule_bench_batch",
        "account": f" -A {resources['slurm_account']}" if "slurm_account" in resources else "",
        "partition": f" -p {resources['slurm_partition']}" if "slurm_partition" in resources else "",
        "workdir": "/repo",
    }  # fmt: skip
    return get_submit_command(job, params) + set_gres_string(job)


@needs_spine
@pytest.mark.parametrize(
    ("platform", "nodes", "expected"),
    [
        ("h200", 1, ["-p gpu", "-C h200", "--gres=gpu:h200:4", "--exclusive", "-t 120",
                     "--mem 64000", "--cpus-per-task=16"]),
        ("h200", 2, ["--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--gres=gpu:h200:4",
                     "--exclusive"]),
        ("b200", 1, ["-p b200", "--gpus=b200:8", "--exclusive", "-t 180"]),
        ("b200", 2, ["--nodes=2", "--ntasks=2", "--gpus-per-node=b200:8", "--ntasks-per-node=1"]),
        ("h100", 1, ["-p gpu", "-C 'h100&ib'", "--gres=gpu:4", "--exclusive"]),
        ("gb200", 1, ["-p gb200", "-C gb200", "--gpus=1", "--cpus-per-task=32"]),
        ("gb200", 2, ["--nodes=2", "--gpus-per-node=1", "--ntasks-per-node=1"]),
    ],
)  # fmt: skip
def test_sbatch_options_per_platform(platform: str, nodes: int, expected: list[str]):
    from gicomm.slurm import slurm_resources

    spec = yaml.safe_load((REPO / f"config/platforms/{platform}.yaml").read_text())["platform_spec"]
    res = slurm_resources(spec, "gpu", nodes=nodes)
    call = sbatch_call(res)
    for option in expected:
        assert option in call, (option, call)
    if nodes == 2:
        assert res["mpi"] == "srun" and res["tasks"] == 2
        assert "--gpus=" not in call  # --gpus is per job; two nodes need it per node
        assert "--ntasks-per-gpu" not in call


# ---------------------------------------------------------------- the local profile at work
def test_local_profile_runs_timing_jobs_alone_and_other_jobs_in_parallel(tmp_path: Path):
    """Two timing jobs never overlap, nor a timing job and a figure or report job (the soak's two
    points once ran together for 14 s); other jobs still share the cores."""
    (tmp_path / "Snakefile").write_text(
        textwrap.dedent(
            """
            rule all:
                input: expand("timing{i}", i=range(3)), expand("cpu{i}", i=range(4))
            rule timing:
                output: "timing{i}"
                resources: host_share=100
                shell: "date +%s.%N > {output}; sleep 1; date +%s.%N >> {output}"
            rule cpu:
                output: "cpu{i}"
                shell: "date +%s.%N > {output}; sleep 1; date +%s.%N >> {output}"
            """
        )
    )
    out = snakemake(tmp_path, "--profile", str(REPO / "profiles/local"), "--cores", "3")
    assert out.returncode == 0, out.stderr[-3000:]

    def spans(prefix: str, n: int) -> list[tuple[float, float]]:
        return sorted(
            tuple(map(float, (tmp_path / f"{prefix}{i}").read_text().split()))  # type: ignore[misc]
            for i in range(n)
        )

    timing, cpu = spans("timing", 3), spans("cpu", 4)
    for t in timing:
        others = [s for s in timing + cpu if s != t]
        overlap = [s for s in others if s[0] < t[1] and t[0] < s[1]]
        assert not overlap, f"a timing job {t} ran beside {overlap}"
    assert any(a[1] > b[0] for a, b in zip(cpu, cpu[1:], strict=False)), (
        f"CPU jobs never overlapped: {cpu}"
    )
