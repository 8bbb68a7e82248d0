"""The host probe on a machine with no GPU and no NIC says so instead of guessing."""

from __future__ import annotations

from pathlib import Path

from gicomm.probe import parse_cpulist, probe, probe_cpu, probe_rdma


def test_parse_cpulist():
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("") == []


def test_probe_record_has_every_section():
    rec = probe("testhost")
    assert rec["host"] == "testhost"
    assert rec["provenance_id"].startswith("testhost-")
    for section in ("cpu", "gpus", "rdma", "tools", "git"):
        assert section in rec
    assert rec["cpu"]["logical_cores"] >= 1
    assert rec["tools"]["python"]
    assert rec["git"]["commit"] is None or len(rec["git"]["commit"]) == 40
    # This machine (and CI) has no GPU: the probe must say why the list is empty.
    if not rec["gpus"]["devices"]:
        assert rec["gpus"]["note"]
    if not rec["rdma"]["devices"]:
        assert rec["rdma"]["note"].startswith("none found")


def test_provenance_id_is_stable_across_probes():
    assert probe("h")["provenance_id"] == probe("h")["provenance_id"]


def test_rdma_from_a_sysfs_tree(tmp_path: Path):
    dev = tmp_path / "class/infiniband/mlx5_0"
    (dev / "ports/1").mkdir(parents=True)
    (dev / "fw_ver").write_text("28.39.1002\n")
    (dev / "ports/1/link_layer").write_text("InfiniBand\n")
    (dev / "ports/1/state").write_text("4: ACTIVE\n")
    pci = tmp_path / "devices/pci0000:00/0000:17:00.0"
    pci.mkdir(parents=True)
    (pci / "numa_node").write_text("1\n")
    (dev / "device").symlink_to(pci)
    rdma = probe_rdma(tmp_path)
    assert rdma["note"] is None
    (d,) = rdma["devices"]
    assert (d["name"], d["firmware"], d["pci_address"], d["numa_node"]) == (
        "mlx5_0", "28.39.1002", "0000:17:00.0", 1,
    )  # fmt: skip
    assert d["ports"][0]["link_layer"] == "InfiniBand"


def test_numa_nodes_from_a_sysfs_tree(tmp_path: Path):
    for n, cpus in ((0, "0-1"), (1, "2-3")):
        node = tmp_path / f"devices/system/node/node{n}"
        node.mkdir(parents=True)
        (node / "cpulist").write_text(cpus)
    cpu = probe_cpu(tmp_path)
    assert cpu["numa_nodes"] == [{"node": 0, "cpus": [0, 1]}, {"node": 1, "cpus": [2, 3]}]
    assert cpu["governor"] is None and cpu["governor_note"]


def _git(repo: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})  # fmt: skip


def test_a_dirty_tree_keeps_its_diff_untracked_files_included(tmp_path: Path):
    from gicomm.probe import probe_git

    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "first")
    clean = probe_git(tmp_path)
    assert clean["dirty"] is False and "diff" not in clean
    (tmp_path / "a.txt").write_text("two\n")
    (tmp_path / "new.cu").write_text("__global__ void k() {}\n")
    dirty = probe_git(tmp_path)
    assert dirty["dirty"] is True and dirty["untracked"] == ["new.cu"]
    assert "-one\n+two" in dirty["diff"] and "+__global__ void k() {}" in dirty["diff"]
    assert len(dirty["diff_sha256"]) == 64


def test_a_diff_too_large_to_keep_is_refused_without_the_flag(tmp_path: Path, monkeypatch):
    import pytest

    from gicomm import probe as p
    from gicomm.errors import GicommError

    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("x\n")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "first")
    (tmp_path / "a.txt").write_text("y" * 5000 + "\n")
    monkeypatch.setattr(p, "MAX_DIFF_BYTES", 1000)
    monkeypatch.delenv(p.ALLOW_DIRTY, raising=False)
    with pytest.raises(GicommError, match=p.ALLOW_DIRTY):
        p.probe_git(tmp_path)
    monkeypatch.setenv(p.ALLOW_DIRTY, "1")
    rec = p.probe_git(tmp_path)
    assert rec["dirty"] and "diff" not in rec and "not kept" in rec["diff_note"]


def test_noise_sources_are_recorded():
    from gicomm.probe import probe_noise

    noise = probe_noise(window_s=0.1)
    assert len(noise["loadavg"]) == 3 and noise["logical_cores"] >= 1
    assert isinstance(noise["busy_processes"], list) and noise["window_s"] == 0.1
    assert noise["mem_available_gib"] > 0
    for proc in noise["busy_processes"]:
        assert proc["cpu_pct"] >= 5.0 and proc["name"]
