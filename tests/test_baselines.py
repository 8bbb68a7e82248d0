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
from gicomm.bench import point_parts
from gicomm.errors import ConfigError
from gicomm.experiments import Point, load_experiment
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
    # The pipeline's own Snakefile, baselines stage alone, the sources file given as config.
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "baselines",
         "--cores", "1", "--configfile", str(REPO / "config/config.yaml"), "--config",
         f"baselines_file={cfg}", "report={archived: []}"],
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
    ids = {p.point_id: point_parts(p) for p in e.points()}
    files = sorted(folder.glob("*/run*.jsonl"))
    assert len(files) >= 3  # three independent process runs
    transports = set()
    for f in files:
        seen = set()
        for r in iter_records(f):
            transport, backend, params = ids[r["point_id"]]
            assert (r["transport"], r["nic_backend"], r["params"]) == (transport, backend, params)
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


# ---- library_baselines: dispatched per transport by the batch runner ------------------------------
LIBRARY_BASELINES = REPO / "config/experiments/library_baselines.yaml"
FIXTURES = REPO / "tests/fixtures/baselines"
HARNESS = "gicomm-bench-baselines-nvshmem"


def fake_sysfs(root: Path, devices: dict[str, str]) -> Path:
    """/sys/class/infiniband with `devices` {name: port state}; an empty dict is a host without."""
    ib = root / "class" / "infiniband"
    ib.mkdir(parents=True)
    for name, state in devices.items():
        (ib / name / "ports" / "1").mkdir(parents=True)
        (ib / name / "ports" / "1" / "state").write_text(f"4: {state}\n")
    return root


def run_library_points(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    points: list[Point] | None = None,
    nics: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    harness: bool = False,
    nic: object = None,
    hardware: dict | None = None,
) -> list[dict]:
    """library_baselines points through the batch runner, on a host that has what the experiment
    needs but `nics` for a NIC (none by default) and, with `harness`, a stand-in NVSHMEM harness;
    `nic` is the campaign's NIC setup (gicomm.ranks.NicSetup; with it, a stand-in gicomm-emu-run);
    `hardware` adds to the node's probe (its GPUs)."""
    from dataclasses import replace

    from gicomm.bench import BatchJob, run_batch

    e = replace(load_experiment(LIBRARY_BASELINES), needs={"gpus": 0}, needs_when=())
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    (build / "gicomm_build.json").write_text('{"cuda": true, "rdma": false}')
    if harness:
        shutil.copy(REPO / "tests/fixtures/fake_driver.py", build / "bin" / HARNESS)
    if nic is not None:
        from test_nic_ranks import FAKE_EMU_RUN

        (build / "bin" / "gicomm-emu-run").write_text(FAKE_EMU_RUN)
        (build / "bin" / "gicomm-emu-run").chmod(0o755)
    monkeypatch.setenv("GICOMM_SYSFS_ROOT", str(fake_sysfs(tmp_path / "sys", nics or {})))
    monkeypatch.setenv("GICOMM_BASELINES_DIR", str(tmp_path / "no-builds"))
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    job = BatchJob(
        experiment=e, points=points or e.points(), campaign="c", host="h", platform="local",
        run_index=0, build_dir=build, hardware={"provenance_id": "p", "hostname": "h", **(hardware or {})},
        partial=tmp_path / "partial/b0.jsonl", output=tmp_path / "raw/b0.jsonl",
        **({"nic": nic} if nic is not None else {}),
    )  # fmt: skip
    run_batch(job)
    recs = list(iter_records(job.output))
    assert {r["point_id"] for r in recs} == {p.point_id for p in job.points}  # every point answered
    return recs


def point(transport: str, **params) -> Point:
    from gicomm.experiments import point_id

    full = {"transport": transport, "nic_backend": "mlx5", **params}
    return Point(point_id("library_baselines", full), full)


def test_library_baselines_without_a_nic_skips_every_transport_with_the_reason(
    tmp_path, monkeypatch
):
    recs = run_library_points(tmp_path, monkeypatch)
    by_transport: dict[str, set[str]] = {}
    for r in recs:
        assert r["status"] == "skipped", r
        assert r["error"].startswith("not measurable on this host: "), r["error"]
        by_transport.setdefault(r["transport"], set()).add(r["error"])
    assert len(by_transport) == 8
    for t in ("nvshmem-ibgda", "nccl-gin-gdaki"):
        (why,) = by_transport[t]
        assert "needs an mlx5 (ConnectX) RDMA device with an ACTIVE port" in why
        assert "found no RDMA device in" in why
    for t in ("nvshmem-ibrc", "nccl-gin-proxy"):
        (why,) = by_transport[t]
        assert "needs an RDMA (InfiniBand/RoCE verbs) device" in why
    for t in ("mscclpp-port", "uccl-ep", "deepep-v1", "fabric-lib"):
        (why,) = by_transport[t]
        assert "needs an RDMA NIC (mlx5)" in why and "is not prepared" in why
    assert "peer" in next(iter(by_transport["fabric-lib"]))


def test_a_nic_without_the_harness_says_it_was_not_built(tmp_path, monkeypatch):
    points = [point(t, op="put", size=8) for t in ("nvshmem-ibgda", "nccl-gin-proxy")]
    recs = run_library_points(tmp_path, monkeypatch, points, {"mlx5_0": "ACTIVE"})
    for r in recs:
        assert r["status"] == "skipped", r
        assert "was not built: CUDA and" in r["error"], r["error"]


def test_an_inactive_or_foreign_nic_is_not_enough(tmp_path, monkeypatch):
    nics = {"mlx5_0": "DOWN", "rxe0": "ACTIVE"}
    (rec, *_) = run_library_points(
        tmp_path, monkeypatch, [point("nvshmem-ibgda", op="put", size=8)], nics
    )
    assert rec["status"] == "skipped"
    assert "found only mlx5_0 (mlx5, no ACTIVE port), rxe0 (unknown driver, active)" in rec["error"]


@pytest.mark.parametrize(
    ("transport", "key", "value", "message"),
    [
        ("nvshmem-ibgda", "ibgda_nic_handler", "fast",
         "bad parameter ibgda_nic_handler=fast (NVSHMEM_IBGDA_NIC_HANDLER): allowed "
         "auto | gpu | cpu | cpu_host_memory"),
        ("nvshmem-ibgda", "ibgda_num_rc_per_pe", 0,
         "bad parameter ibgda_num_rc_per_pe=0 (NVSHMEM_IBGDA_NUM_RC_PER_PE): allowed an integer "
         "from 1 to 1024"),
        ("nvshmem-ibgda", "ibgda_num_requests_in_batch", "many",
         "bad parameter ibgda_num_requests_in_batch=many (NVSHMEM_IBGDA_NUM_REQUESTS_IN_BATCH): "
         "allowed an integer from 1 to 1024"),
        ("nccl-gin-proxy", "gin_proxy_queue_size", 48,
         "bad parameter gin_proxy_queue_size=48 (NCCL_GIN_PROXY_QUEUE_SIZE): allowed a power of two "
         "from 1 to 65536"),
        ("nvshmem-ibrc", "ibgda_num_rc_per_pe", 16,
         "bad parameter ibgda_num_rc_per_pe=16: it sets NVSHMEM_IBGDA_NUM_RC_PER_PE, which applies "
         "to nvshmem-ibgda only, not to nvshmem-ibrc"),
        ("nccl-gin-proxy", "gin_gdaki_qp_depth", 128,
         "bad parameter gin_gdaki_qp_depth=128: it sets NCCL_GIN_GDAKI_QP_DEPTH, which applies to "
         "nccl-gin-gdaki only"),
        ("nvshmem-ibgda", "ibgda_num_rc_per_pe", True,
         "bad parameter ibgda_num_rc_per_pe=true (NVSHMEM_IBGDA_NUM_RC_PER_PE)"),
    ],
)  # fmt: skip
def test_bad_knobs_fail_their_point_naming_key_value_and_allowed(
    tmp_path, monkeypatch, transport, key, value, message
):
    bad, good = (
        point(transport, op="put", size=8, **{key: value}),
        point(transport, op="put", size=8),
    )
    recs = run_library_points(tmp_path, monkeypatch, [bad, good])
    failed = [r for r in recs if r["point_id"] == bad.point_id]
    assert failed and all(r["status"] == "failed" and message in r["error"] for r in failed), failed
    skipped = [r for r in recs if r["point_id"] == good.point_id]
    assert skipped and all(r["status"] == "skipped" for r in skipped)  # no NIC here


def test_the_runner_starts_our_harness_with_the_knobs_as_env(tmp_path, monkeypatch):
    """With a NIC and the harness built, the point runs in the harness binary (here a stand-in),
    one process per set of knob values, the knobs reaching it as the library's env."""
    points = [
        point("nvshmem-ibgda", op="put", size=8, ibgda_num_rc_per_pe=16),
        point("nvshmem-ibgda", op="put", size=8, ibgda_nic_handler="cpu_host_memory"),
    ]
    seen = tmp_path / "env.seen"
    env = {"FAKE_ENV_SEEN": str(seen)}
    recs = run_library_points(tmp_path, monkeypatch, points, {"mlx5_0": "ACTIVE"}, env, True)
    assert [r["status"] for r in recs] == ["ok", "ok"], recs
    assert {r["transport"] for r in recs} == {"nvshmem-ibgda"}
    runs = [json.loads(line) for line in seen.read_text().splitlines()]
    assert runs == [
        {"NVSHMEM_IBGDA_NUM_RC_PER_PE": "16"},
        {"NVSHMEM_IBGDA_NIC_HANDLER": "cpu_host_memory"},
    ]


def test_nvshmem_points_run_on_the_emulated_nic_when_the_campaign_asks(tmp_path, monkeypatch):
    """No NIC, nic.emulated: the NVSHMEM harness runs under gicomm-emu-run with the settings
    NVSHMEM needs there (a point's own knob kept); its records say rdma_provider emulated."""
    from gicomm.ranks import NicSetup

    points = [
        point("nvshmem-ibgda", op="put", size=8),
        point("nvshmem-ibgda", op="put", size=8, ibgda_nic_handler="gpu"),
    ]
    seen = tmp_path / "env.seen"
    recs = run_library_points(tmp_path, monkeypatch, points, None, {"FAKE_ENV_SEEN": str(seen)},
                              True, NicSetup(emulated=True, topology="two-rank"))  # fmt: skip
    assert [r["status"] for r in recs] == ["ok", "ok"], recs
    assert {r["rdma_provider"] for r in recs} == {"emulated"}
    handlers = sorted(
        json.loads(line)["NVSHMEM_IBGDA_NIC_HANDLER"] for line in seen.read_text().splitlines()
    )
    assert handlers == ["cpu_host_memory", "gpu"]
    assert all(
        json.loads(line)["NVSHMEM_DISABLE_DATA_DIRECT"] == "1"
        for line in seen.read_text().splitlines()
    )
    # without the key: skipped, as before
    recs = run_library_points(tmp_path / "off", monkeypatch, points[:1], None, None, True)
    assert recs[0]["status"] == "skipped" and "found no RDMA device" in recs[0]["error"]


# ---- the upstream runner, end to end through the batch runner, with fake upstream programs --------
ECHO = "import sys; sys.stdout.write(open(sys.argv[1]).read()); sys.exit(int(sys.argv[2]))"


def fake_upstream(tmp_path: Path, prepared: list[str], exit_code: int = 0) -> dict[str, str]:
    """A baselines file whose MSCCL++ and DeepEP sources print the parser fixtures (the upstream
    formats), and manifests (as `snakemake baselines` leaves them) for the `prepared` ones."""
    root = tmp_path / "installed"
    root.mkdir()
    sources = {
        "mscclpp-fake": {"library": "mscclpp", "kind": "path", "path": str(root),
                         "run": {"tool": "mscclpp-mp-unit",
                                 "argv": ["{python}", "-c", ECHO,
                                          str(FIXTURES / "mscclpp_mp_unit.txt"), str(exit_code)]}},
        "deepep-fake": {"library": "deepep", "kind": "path", "path": str(root),
                        "run": {"tool": "deepep-low-latency",
                                "argv": ["{python}", "-c", ECHO,
                                         str(FIXTURES / "deepep_low_latency.txt"), str(exit_code)],
                                "env": {"FAKE_ROOT": "{root}"}}},
    }  # fmt: skip
    cfg = write(tmp_path, {"use": list(sources), "sources": sources})
    builds = tmp_path / "builds"
    for name in prepared:
        (builds / name).mkdir(parents=True)
        manifest = {"name": name, "library": sources[name]["library"], "kind": "path",
                    "version": str(root), "root": str(root)}  # fmt: skip
        (builds / name / "manifest.json").write_text(json.dumps(manifest))
    return {"GICOMM_BASELINES_FILE": str(cfg), "GICOMM_BASELINES_DIR": str(builds)}


UPSTREAM_POINTS = [point("mscclpp-port"), point("deepep-v1")]


def test_upstream_programs_become_records_through_the_runner(tmp_path, monkeypatch):
    env = fake_upstream(tmp_path, ["mscclpp-fake", "deepep-fake"])
    recs = run_library_points(tmp_path, monkeypatch, UPSTREAM_POINTS, env=env)
    assert all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    m = [r for r in recs if r["point_id"] == UPSTREAM_POINTS[0].point_id]
    assert {r["transport"] for r in m} == {"mscclpp-port"}
    rtt = {r["params"]["test"]: r["stats"]["p50"] for r in m}
    assert rtt["PingPongPerf"] == pytest.approx(7363.0)  # 7.363 us/iter
    for r in m:
        assert r["metric"] == "rtt_ns" and r["params"]["upstream_stat"] == "avg"
        assert r["params"]["source"] == "mscclpp-fake" and r["nic_backend"] == "mlx5"
    d = [r for r in recs if r["point_id"] == UPSTREAM_POINTS[1].point_id]
    both = [r for r in d if r["params"].get("phase") == "dispatch+combine" and r["metric"] == "time_ns"
            and r["params"]["upstream_stat"] == "avg" and r["params"]["rank"] == 0]  # fmt: skip
    assert len(both) == 1 and both[0]["stats"]["p50"] == pytest.approx(491300.0)
    assert {r["transport"] for r in d} == {"deepep-v1"}
    log = tmp_path / "partial/b0.jsonl.logs" / f"{UPSTREAM_POINTS[0].point_id}.log"
    assert log.read_text() == (FIXTURES / "mscclpp_mp_unit.txt").read_text()


def test_upstream_sources_not_prepared_are_skipped(tmp_path, monkeypatch):
    env = fake_upstream(tmp_path, ["deepep-fake"])
    recs = run_library_points(tmp_path, monkeypatch, UPSTREAM_POINTS, env=env)
    m = [r for r in recs if r["point_id"] == UPSTREAM_POINTS[0].point_id]
    assert m and all(r["status"] == "skipped" for r in m)
    assert "source mscclpp-fake (mscclpp" in m[0]["error"] and "is not prepared" in m[0]["error"]
    assert all(r["status"] == "ok" for r in recs if r["point_id"] == UPSTREAM_POINTS[1].point_id)


def test_a_failing_upstream_program_fails_its_point_with_its_output(tmp_path, monkeypatch):
    env = fake_upstream(tmp_path, ["mscclpp-fake", "deepep-fake"], exit_code=1)
    recs = run_library_points(tmp_path, monkeypatch, UPSTREAM_POINTS, env=env)
    for r in recs:
        assert r["status"] == "failed"
        assert "exited with code 1" in r["error"] and "output ends:" in r["error"]


def test_no_native_program_starts_python():
    """The dispatcher is Python: the native baselines are harnesses only (no C++ program that
    execs the Python runner again)."""
    assert not (REPO / "native/baselines/nic").exists()
    for src in (REPO / "native/baselines").rglob("*"):
        if src.suffix in (".cpp", ".cu", ".h", ".cuh", ".txt"):
            assert "gicomm.baselines" not in src.read_text(errors="replace"), src


def test_an_unknown_run_placeholder_is_refused(tmp_path):
    src = {"library": "mscclpp", "kind": "path", "path": "/x",
           "run": {"tool": "mscclpp-mp-unit", "argv": ["{shell}"]}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"unknown placeholder '\{shell\}'"):
        load_baselines(write(tmp_path, {"use": [], "sources": {"s": src}}))


def test_the_papers_sources_say_how_to_run_their_upstream_test():
    from gicomm.baselines.upstream_run import TRANSPORTS

    b = load_baselines(BASELINES)
    libraries = {b.source(n).library for n in b.use if "run" in b.source(n).spec}
    assert set(TRANSPORTS.values()) <= libraries
