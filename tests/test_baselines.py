"""Library baselines: the sources file, preparing each kind of source (the git kind against a
local bare repository, through gicomm and through Snakemake; no network), upstream logs to
records, and the NVLink dissection's experiment and archived records."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from gicomm.baselines.sources import SourceError, load_baselines, prepare_source
from gicomm.baselines.upstream import UPSTREAM, records_from_log
from gicomm.errors import ConfigError
from gicomm.experiments import load_experiment
from gicomm.needs import unmet_needs
from gicomm.records import check_record, iter_records

BASELINES = REPO / "config" / "baselines.yaml"
ARCHIVE = REPO / "results" / "archive" / "h200x2-2026-11-30" / "raw" / "nvlink_dissection"
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
needs_cmake = pytest.mark.skipif(
    shutil.which("cmake") is None or shutil.which("cc") is None, reason="cmake or cc missing"
)


# ---- the sources file ---------------------------------------------------------------------------
def test_default_sources_are_the_papers_versions():
    b = load_baselines(BASELINES)
    versions = {(b.source(n).library, b.source(n).version) for n in b.use}
    assert ("nvshmem", "3.4.5") in versions and ("nvshmem", "3.7.2") in versions
    assert ("nccl", "2.30.7") in versions and ("nccl", "2.31.2") in versions
    commits = {b.source(n).library: b.source(n).spec.get("commit") for n in b.use}
    assert commits["mscclpp"] == "6231b4f"
    assert commits["uccl-ep"] == "a3d520e"
    assert commits["fabric-lib"] == "2446003"
    assert b.source("deepep-v1").depends_on() == ["nvshmem-3.4.5"]
    for name in b.use:
        assert b.source(name).spec.get("paper") is True


def write(tmp_path: Path, data: dict) -> Path:
    p = tmp_path / "baselines.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def git_source(**extra) -> dict:
    return {"library": "test-fixture", "kind": "git", "url": "/x", "commit": "abcdef1", **extra}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"use": ["nope"], "sources": {"a": git_source()}}, "'use': 'nope' is not a source"),
        (
            {"use": [], "sources": {"a": git_source(steps=[["make", "{shell}"]])}},
            "unknown placeholder",
        ),
        ({"use": [], "sources": {"a": git_source(steps=[["x", "{root:b}"]])}}, "names no source"),
        ({"use": [], "sources": {"a": git_source(commit="main")}}, "'sources.a.commit'"),
        (
            {"use": [], "sources": {"a": {"library": "nccl", "kind": "pip", "package": "p"}}},
            "'version' is a required property",
        ),
        ({"use": [], "sources": {"a": git_source(expect=["../etc/passwd"])}}, "reserved"),
        ({"use": [], "sources": {"a": git_source(shell="rm -rf /")}}, "unknown key(s) 'shell'"),
        (
            {
                "use": [],
                "sources": {
                    "a": git_source(env={"X": "{root:b}"}),
                    "b": git_source(env={"Y": "{root:a}"}),
                },
            },
            "depend on each other",
        ),
    ],
)
def test_bad_sources_are_refused_with_the_reason(tmp_path, data, message):
    with pytest.raises(ConfigError) as exc:
        load_baselines(write(tmp_path, data))
    assert message in str(exc.value)


# ---- the git kind, against a local bare repository ----------------------------------------------
def make_bare_repo(tmp_path: Path) -> tuple[Path, str]:
    """A bare repository holding a tiny CMake project; returns it and the pinned commit."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(fixture LANGUAGES C)\n"
        "add_executable(hello hello.c)\ninstall(TARGETS hello DESTINATION bin)\n"
    )
    (work / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("pinned"); }\n')

    def git(*args: str, cwd: Path = work) -> str:
        env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # fmt: skip
        return subprocess.run(
            ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "pinned")
    pinned = git("rev-parse", "HEAD")
    (work / "hello.c").write_text('#include <stdio.h>\nint main(void) { puts("later"); }\n')
    git("commit", "-q", "-am", "later")  # the branch moves on; the pin must not
    bare = tmp_path / "fixture.git"
    git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp_path)
    return bare, pinned


def fixture_sources(bare: Path, commit: str) -> dict:
    return {
        "use": ["fixture"],
        "sources": {
            "fixture": {
                "library": "test-fixture",
                "kind": "git",
                "url": str(bare),
                "commit": commit[:10],
                "steps": [
                    ["cmake", "-S", "{src}", "-B", "{build}", "-DCMAKE_INSTALL_PREFIX={prefix}"],
                    ["cmake", "--build", "{build}", "-j", "{jobs}"],
                    ["cmake", "--install", "{build}"],
                ],
                "expect": ["prefix/bin/hello"],
            }
        },
    }


@needs_git
@needs_cmake
def test_git_source_builds_at_the_pinned_commit(tmp_path):
    bare, pinned = make_bare_repo(tmp_path)
    b = load_baselines(write(tmp_path, fixture_sources(bare, pinned)))
    manifest = prepare_source(b.source("fixture"), tmp_path / "out", jobs=1)
    assert manifest["resolved_commit"] == pinned
    hello = Path(manifest["root"]) / "prefix" / "bin" / "hello"
    assert subprocess.run([hello], capture_output=True, text=True).stdout.strip() == "pinned"
    assert json.loads((tmp_path / "out" / "manifest.json").read_text()) == manifest


@needs_git
def test_git_source_with_an_unknown_commit_fails(tmp_path):
    bare, _ = make_bare_repo(tmp_path)
    data = fixture_sources(bare, "0123456789abcdef")
    b = load_baselines(write(tmp_path, data))
    with pytest.raises(SourceError, match="failed"):
        prepare_source(b.source("fixture"), tmp_path / "out")
    assert not (tmp_path / "out" / "manifest.json").exists()


@needs_git
@needs_cmake
def test_git_source_through_snakemake(tmp_path):
    bare, pinned = make_bare_repo(tmp_path)
    cfg = write(tmp_path, fixture_sources(bare, pinned))
    work = tmp_path / "wf"
    work.mkdir()
    (work / "Snakefile").write_text(f'include: "{REPO / "workflow" / "rules" / "baselines.smk"}"\n')
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "baselines", "--cores", "1", "--config",
         f"baselines_file={cfg}"],
        cwd=work, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    manifest = json.loads((work / "build/baselines/fixture/manifest.json").read_text())
    assert manifest["resolved_commit"] == pinned
    assert (work / "build/baselines/fixture/prefix/bin/hello").exists()


# ---- the pip and path kinds (offline) -----------------------------------------------------------
def make_wheel(folder: Path) -> None:
    folder.mkdir()
    name = "nvidia_fixture-1.2.3-py3-none-any.whl"
    with zipfile.ZipFile(folder / name, "w") as z:
        z.writestr("nvidia/fixture/include/fixture.h", "#define FIXTURE 1\n")
        z.writestr("nvidia/fixture/lib/libfixture.so.3", "not really a library\n")
        z.writestr(
            "nvidia_fixture-1.2.3.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: nvidia-fixture\nVersion: 1.2.3\n",
        )
        z.writestr(
            "nvidia_fixture-1.2.3.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr("nvidia_fixture-1.2.3.dist-info/RECORD", "")


def test_pip_source_downloads_and_unpacks_the_pinned_version(tmp_path):
    make_wheel(tmp_path / "wheels")
    data = {
        "use": ["fx"],
        "sources": {
            "fx": {
                "library": "test-fixture",
                "kind": "pip",
                "package": "nvidia-fixture",
                "version": "1.2.3",
                "root": "nvidia/fixture",
                "find_links": str(tmp_path / "wheels"),
                "expect": ["include/fixture.h", "lib/libfixture.so.3", "lib/libfixture.so"],
            }
        },
    }
    b = load_baselines(write(tmp_path, data))
    manifest = prepare_source(b.source("fx"), tmp_path / "out")
    root = Path(manifest["root"])
    assert root == (tmp_path / "out" / "unpacked" / "nvidia" / "fixture").resolve()
    assert (root / "lib" / "libfixture.so").is_symlink()  # the plain name linkers look for
    assert manifest["wheel"].startswith("nvidia_fixture-1.2.3")


def test_path_source_checks_what_it_expects(tmp_path, monkeypatch):
    (tmp_path / "inst" / "include").mkdir(parents=True)
    (tmp_path / "inst" / "include" / "nccl.h").write_text("")
    monkeypatch.setenv("FIXTURE_ROOT", str(tmp_path / "inst"))
    src = {"library": "nccl", "kind": "path", "path": "$FIXTURE_ROOT", "expect": ["include/nccl.h"]}
    b = load_baselines(write(tmp_path, {"use": ["p"], "sources": {"p": src}}))
    assert prepare_source(b.source("p"), tmp_path / "out")["root"] == str(tmp_path / "inst")
    src["expect"] = ["include/nccl_device.h"]
    b = load_baselines(write(tmp_path, {"use": ["p"], "sources": {"p": src}}))
    with pytest.raises(SourceError, match="nccl_device.h"):
        prepare_source(b.source("p"), tmp_path / "out")
    src = {"library": "nccl", "kind": "path", "path": "python:json"}
    b = load_baselines(write(tmp_path, {"use": ["p"], "sources": {"p": src}}))
    assert Path(prepare_source(b.source("p"), tmp_path / "out")["root"]).name == "json"


# ---- upstream logs to records -------------------------------------------------------------------
@pytest.mark.parametrize("tool", sorted(UPSTREAM))
def test_a_log_without_results_becomes_a_failed_record(tool):
    recs = records_from_log(tool=tool, text="Segmentation fault\n", campaign="c", host="h",
                            platform="h200", experiment="e", run_index=0)  # fmt: skip
    assert len(recs) == 1 and recs[0]["status"] == "failed"
    check_record(recs[0], "test")
    assert "holds no result" in recs[0]["error"]


def test_upstream_log_records_are_valid():
    text = (REPO / "tests/fixtures/baselines/nccl_tests_alltoall.txt").read_text()
    recs = records_from_log(tool="nccl-tests", text=text, campaign="c", host="h",
                            platform="h200", experiment="e", run_index=1)  # fmt: skip
    assert len(recs) == 18
    for r in recs:
        check_record(r, "test")


# ---- the NVLink dissection: experiment, needs, archived records ---------------------------------
def test_nvlink_dissection_says_why_it_cannot_run_here():
    e = load_experiment(REPO / "config/experiments/nvlink_dissection.yaml")
    point = e.points()[0]
    reasons = unmet_needs(e.needs_of(point), {"gpus": {"devices": []}}, {"cuda": False})
    assert any("2 GPU" in r for r in reasons)
    assert any("NVLink" in r for r in reasons)
    assert any("CUDA build" in r for r in reasons)


ARCHIVED = ["nvlink_dissection", "nvlink_put_size"]


@pytest.mark.parametrize("name", ARCHIVED)
def test_archived_nvlink_records(name):
    folder = ARCHIVE.parent / name
    if not folder.exists():
        pytest.skip(f"no archived {name}")
    e = load_experiment(REPO / f"config/experiments/{name}.yaml")
    ids = {p.point_id: p.params for p in e.points()}
    files = sorted(folder.glob("*/run*.jsonl"))
    assert len(files) >= 3  # three independent process runs
    transports = set()
    for f in files:
        seen = set()
        for r in iter_records(f):
            assert r["point_id"] in ids and r["params"] == ids[r["point_id"]]
            assert r["status"] == "ok", r.get("error")
            assert r["metric"] in e.metrics
            assert 1000 < r["sm_clock_mhz"] < 2100  # the SM clock rides on every record
            transports.add(r["transport"])
            seen.add(r["point_id"])
        assert seen == set(ids)  # every point in every run
    assert transports == {"direct-store", "nvshmem-p2p", "nccl-lsa"}


def test_nic_baselines_say_why_they_cannot_run_without_a_nic():
    e = load_experiment(REPO / "config/experiments/library_baselines.yaml")
    hw = {
        "gpus": {"devices": [{}, {}], "p2p_nvlink": [["x", "nvlink"], ["nvlink", "x"]]},
        "rdma": {"devices": []},
    }
    for point in e.points():
        reasons = unmet_needs(e.needs_of(point), hw, {"cuda": True})
        assert any("RDMA NIC" in r for r in reasons), point.params
        if point.params["transport"] == "fabric-lib":
            assert any("2 nodes" in r for r in reasons)


@pytest.mark.skipif(not ARCHIVE.exists(), reason="no archived NVLink dissection")
def test_dissection_table_splits_mechanism_and_library():
    from gicomm.aggregate import summarize_runs
    from gicomm.baselines.dissection import dissect
    from gicomm.tidy import tidy_from_files

    files = sorted(ARCHIVE.parent.glob("nvlink_*/*/run*.jsonl"))
    table = dissect(summarize_runs(tidy_from_files(files)))
    assert set(table["transport"]) == {"nvshmem-p2p", "nccl-lsa"}
    assert table["mechanism"].notna().all()
    row = table[
        (table["experiment"] == "nvlink_dissection")
        & (table["param_op"] == "p")
        & (table["metric"] == "issue_cycles")
    ]
    for _, r in row.iterrows():
        assert r["path"] == pytest.approx(r["mechanism"] + r["library"])
        assert r["library"] > 0  # both libraries add to a bare store's issue
