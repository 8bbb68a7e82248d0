"""Host probe: what this machine is, for provenance and for deciding what can run here.

Writes results/<campaign>/hosts/<host>/hardware.json. Every section is best effort: a field that
cannot be read is recorded as null with the reason, never guessed. Runs on machines with no GPU and
no NIC (and says so).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shutil
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from gicomm import REPO_ROOT

SCHEMA_VERSION = 1


def _read(path: Path | str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _run(argv: list[str], timeout: float = 20.0) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]."""
    cpus: list[int] = []
    for part in filter(None, text.strip().split(",")):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def probe_cpu(sys_root: Path = Path("/sys")) -> dict[str, Any]:
    model = None
    cpuinfo = _read("/proc/cpuinfo") or ""
    m = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    if m:
        model = m.group(1).strip()
    nodes = []
    for node in sorted((sys_root / "devices/system/node").glob("node[0-9]*")):
        cpulist = _read(node / "cpulist")
        nodes.append(
            {"node": int(node.name[4:]), "cpus": parse_cpulist(cpulist) if cpulist else []}
        )
    cpufreq = sys_root / "devices/system/cpu/cpu0/cpufreq"
    governor = _read(cpufreq / "scaling_governor")
    max_khz = _read(cpufreq / "cpuinfo_max_freq")
    return {
        "model": model,
        "arch": platform.machine(),
        "logical_cores": os.cpu_count(),
        "numa_nodes": nodes or None,
        "numa_note": None if nodes else "no /sys/devices/system/node: NUMA layout unknown",
        "governor": governor,
        "governor_note": None if governor else "cpufreq not exposed on this machine",
        "max_mhz": int(max_khz) / 1000 if max_khz else None,
    }


def _cuda_sm_counts() -> dict[int, int]:
    """SM count per device through the CUDA driver API (NVML does not expose it)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return {}
    if cuda.cuInit(0) != 0:
        return {}
    count = ctypes.c_int()
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return {}
    out = {}
    for i in range(count.value):
        dev, value = ctypes.c_int(), ctypes.c_int()
        if cuda.cuDeviceGet(ctypes.byref(dev), i) == 0 and (
            cuda.cuDeviceGetAttribute(ctypes.byref(value), 16, dev) == 0  # MULTIPROCESSOR_COUNT
        ):
            out[i] = value.value
    return out


def probe_gpus() -> dict[str, Any]:
    try:
        import pynvml
    except ImportError:
        return {"devices": [], "note": "nvidia-ml-py not installed"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"devices": [], "note": f"no NVIDIA GPU or driver found (NVML: {exc})"}
    try:
        n = pynvml.nvmlDeviceGetCount()
        sms = _cuda_sm_counts()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        devices = []
        for i, h in enumerate(handles):
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            devices.append(
                {
                    "index": i,
                    "name": pynvml.nvmlDeviceGetName(h),
                    "uuid": pynvml.nvmlDeviceGetUUID(h),
                    "pci_bus_id": pynvml.nvmlDeviceGetPciInfo(h).busId,
                    "sm_count": sms.get(i),
                    "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                    "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
                    "memory_bytes": int(mem.total),
                }
            )
        p2p = [
            ["self" if a == b else _p2p_status(pynvml, handles[a], handles[b]) for b in range(n)]
            for a in range(n)
        ]
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        return {
            "devices": devices,
            "driver": pynvml.nvmlSystemGetDriverVersion(),
            "cuda_driver_version": f"{cuda // 1000}.{(cuda % 1000) // 10}",
            "p2p_nvlink": p2p,
            "note": None if devices else "NVML found no GPU",
        }
    finally:
        pynvml.nvmlShutdown()


def _p2p_status(pynvml: Any, a: Any, b: Any) -> str:
    try:
        ok = pynvml.nvmlDeviceGetP2PStatus(a, b, pynvml.NVML_P2P_CAPS_INDEX_NVLINK)
    except pynvml.NVMLError as exc:
        return f"unknown ({exc})"
    return "nvlink" if ok == pynvml.NVML_P2P_STATUS_OK else "none"


def probe_rdma(sys_root: Path = Path("/sys")) -> dict[str, Any]:
    base = sys_root / "class/infiniband"
    devices = []
    for dev in sorted(base.glob("*")) if base.is_dir() else []:
        ports = []
        for port in sorted((dev / "ports").glob("*")):
            ports.append(
                {
                    "port": int(port.name),
                    "link_layer": _read(port / "link_layer"),
                    "state": _read(port / "state"),
                    "rate": _read(port / "rate"),
                }
            )
        pci = os.path.basename(os.path.realpath(dev / "device"))
        numa = _read(dev / "device/numa_node")
        devices.append(
            {
                "name": dev.name,
                "firmware": _read(dev / "fw_ver"),
                "board_id": _read(dev / "board_id"),
                "pci_address": pci,
                "numa_node": int(numa) if numa not in (None, "") else None,
                "ports": ports,
            }
        )
    return {
        "devices": devices,
        "note": None if devices else f"none found ({base} is empty or absent)",
    }


def _version_from(text: str | None, pattern: str) -> str | None:
    m = re.search(pattern, text or "")
    return m.group(1) if m else None


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def probe_tools() -> dict[str, Any]:
    rdma = _run(["dpkg-query", "-W", "-f=${Version}", "libibverbs-dev"])
    return {
        "python": platform.python_version(),
        "nvcc": _version_from(_run(["nvcc", "--version"]), r"release ([0-9.]+)"),
        "cmake": _version_from(_run(["cmake", "--version"]), r"cmake version ([0-9.]+)"),
        "gcc": _version_from(_run(["gcc", "--version"]), r"\) ([0-9.]+)"),
        "rdma_core": rdma or None,
        "nvshmem": _dist_version("nvidia-nvshmem-cu13") or _dist_version("nvidia-nvshmem-cu12"),
        "nccl": _dist_version("nvidia-nccl-cu13") or _dist_version("nvidia-nccl-cu12"),
        "snakemake": _dist_version("snakemake"),
    }


def probe_git(repo: Path = REPO_ROOT) -> dict[str, Any]:
    commit = _run(["git", "-C", str(repo), "rev-parse", "HEAD"])
    status = _run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"])
    return {
        "commit": commit,
        "dirty": bool(status) if commit is not None else None,
        "note": None if commit else "not a git checkout",
    }


def probe_node() -> dict[str, Any]:
    """The part of the probe a job needs about the node it landed on (fast: no tool versions)."""
    return {"hostname": socket.gethostname(), "gpus": probe_gpus(), "rdma": probe_rdma()}


def probe(host: str) -> dict[str, Any]:
    """Everything the pipeline records about a host, with a provenance id over its content."""
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "host": host,
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "os": _read("/etc/os-release")
        and _version_from(_read("/etc/os-release"), r'PRETTY_NAME="([^"]+)"'),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu": probe_cpu(),
        "gpus": probe_gpus(),
        "rdma": probe_rdma(),
        "tools": probe_tools(),
        "git": probe_git(),
    }
    stable = {k: v for k, v in record.items() if k != "date"}
    stable["gpus"] = {
        **record["gpus"],
        "devices": [
            {k: v for k, v in d.items() if k != "sm_clock_mhz"} for d in record["gpus"]["devices"]
        ],
    }
    digest = hashlib.sha1(json.dumps(stable, sort_keys=True).encode()).hexdigest()[:12]
    record["provenance_id"] = f"{host}-{digest}"
    return record


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--host", default=socket.gethostname().split(".")[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    from gicomm.fsutil import write_atomic

    write_atomic(args.out, json.dumps(probe(args.host), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
