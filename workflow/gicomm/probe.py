"""Host probe: what this machine is, for provenance and for deciding what can run here.

Writes results/<campaign>/hosts/<host>/hardware.json. Every section is best effort: a field that
cannot be read is recorded as null with the reason, never guessed. Runs on machines with no GPU and
no NIC (and says so).

Besides the hardware it records what may add noise to the measurements (`noise`: host load, busy
processes, CPU steal time, free memory, other GPU processes, GPU clock-event reasons), and the
source the campaign measures: the commit and, when the tree has uncommitted changes, their diff
(`git.diff`, tracked changes and untracked files), so a dirty campaign can be rebuilt. A diff too
large to keep (over 4 MiB) is refused unless GICOMM_ALLOW_UNRECORDED_DIRTY=1 says to go on
without it.
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
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from gicomm import REPO_ROOT
from gicomm.errors import GicommError

SCHEMA_VERSION = 1
MAX_DIFF_BYTES = 4 << 20
ALLOW_DIRTY = "GICOMM_ALLOW_UNRECORDED_DIRTY"
NOISE_WINDOW_S = 0.5
BUSY_PCT = 5.0  # a process using more CPU than this over the window is listed as noise


def _read(path: Path | str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def command_output(argv: list[str], timeout: float = 20.0) -> str | None:
    """stdout of a read-only command, or None when it is missing or fails."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def _run(argv: list[str]) -> str | None:
    out = command_output(argv)
    return out.strip() if out is not None else None


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


def _untracked_diff(repo: Path, names: list[str]) -> str:
    """New files that git does not ignore, as a diff against nothing (text files only)."""
    parts = []
    for name in names:
        out = subprocess.run(
            ["git", "-C", str(repo), "diff", "--no-index", "--", "/dev/null", name],
            capture_output=True,
            text=True,
            check=False,
        )
        parts.append(out.stdout)  # exit status 1 means "differs", which it always does
    return "".join(parts)


def probe_git(repo: Path = REPO_ROOT) -> dict[str, Any]:
    """The commit measured and, when the tree is dirty, the diff that rebuilds it."""
    commit = _run(["git", "-C", str(repo), "rev-parse", "HEAD"])
    status = _run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"])
    untracked = _run(["git", "-C", str(repo), "ls-files", "--others", "--exclude-standard"]) or ""
    new_files = [n for n in untracked.splitlines() if n.strip()]
    dirty = bool(status) or bool(new_files) if commit is not None else None
    record: dict[str, Any] = {
        "commit": commit,
        "dirty": dirty,
        "note": None if commit else "not a git checkout",
    }
    if not dirty:
        return record
    diff = (_run(["git", "-C", str(repo), "diff", "HEAD", "--binary"]) or "") + "\n"
    diff += _untracked_diff(repo, new_files)
    size = len(diff.encode())
    if size > MAX_DIFF_BYTES:
        if os.environ.get(ALLOW_DIRTY) != "1":
            raise GicommError(
                f"the source tree has uncommitted changes whose diff ({size} bytes) is larger "
                f"than the probe keeps ({MAX_DIFF_BYTES} bytes): commit them, or set "
                f"{ALLOW_DIRTY}=1 to measure without recording them"
            )
        record["diff_note"] = f"diff of {size} bytes not kept ({ALLOW_DIRTY}=1)"
        return record
    record["diff"] = diff
    record["diff_sha256"] = hashlib.sha256(diff.encode()).hexdigest()
    record["untracked"] = new_files
    return record


def _cpu_times() -> tuple[float, float] | None:
    """(total, steal) jiffies of all CPUs from /proc/stat."""
    line = (_read("/proc/stat") or "").splitlines()[:1]
    if not line or not line[0].startswith("cpu "):
        return None
    v = [float(x) for x in line[0].split()[1:]]
    return sum(v), (v[7] if len(v) > 7 else 0.0)


def _proc_times() -> dict[int, tuple[str, float]]:
    """pid -> (command name, utime+stime jiffies) of every process we can read."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.find("(") + 1 : text.rfind(")")]
        fields = text[text.rfind(")") + 2 :].split()
        try:
            out[int(stat.parent.name)] = (name, float(fields[11]) + float(fields[12]))
        except (IndexError, ValueError):
            continue
    return out


def probe_gpu_noise() -> list[dict[str, Any]]:
    """Per GPU: utilisation, other processes on it, clock-event (throttle) reasons, temperature."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 (no NVML, no GPU: nothing to record)
        return []
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            entry: dict[str, Any] = {"index": i}
            for key, call in (
                ("utilization_pct", lambda h=h: pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
                ("processes", lambda h=h: len(pynvml.nvmlDeviceGetComputeRunningProcesses(h))),
                (
                    "clock_event_reasons",
                    lambda h=h: pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
                ),
                ("temperature_c", lambda h=h: pynvml.nvmlDeviceGetTemperature(h, 0)),
            ):
                try:
                    entry[key] = call()
                except Exception as exc:  # noqa: BLE001 (a field this driver does not answer)
                    entry[key] = None
                    entry[f"{key}_note"] = str(exc)
            out.append(entry)
        return out
    finally:
        pynvml.nvmlShutdown()


def probe_noise(window_s: float = NOISE_WINDOW_S) -> dict[str, Any]:
    """What else was using the machine when it was probed: load averages, the processes that
    used more than 5% of a CPU over a short window, CPU steal time (virtual machines), free
    memory and the GPUs' own state."""
    load = (_read("/proc/loadavg") or "").split()
    cpu0, procs0 = _cpu_times(), _proc_times()
    time.sleep(window_s)
    cpu1, procs1 = _cpu_times(), _proc_times()
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy = []
    for pid, (name, t1) in procs1.items():
        if pid in procs0 and pid != os.getpid():
            pct = 100.0 * (t1 - procs0[pid][1]) / hz / window_s
            if pct >= BUSY_PCT:
                busy.append({"pid": pid, "name": name, "cpu_pct": round(pct, 1)})
    steal = None
    if cpu0 and cpu1 and cpu1[0] > cpu0[0]:
        steal = round(100.0 * (cpu1[1] - cpu0[1]) / (cpu1[0] - cpu0[0]), 2)
    meminfo = _read("/proc/meminfo") or ""
    avail = re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.M)
    return {
        "loadavg": [float(x) for x in load[:3]] if len(load) >= 3 else None,
        "runnable": int(load[3].split("/")[0]) if len(load) >= 4 else None,
        "logical_cores": os.cpu_count(),
        "busy_processes": sorted(busy, key=lambda p: -p["cpu_pct"])[:8],
        "cpu_steal_pct": steal,
        "mem_available_gib": round(int(avail.group(1)) / 2**20, 2) if avail else None,
        "gpus": probe_gpu_noise(),
        "window_s": window_s,
        "note": "sampled when the host was probed, before its benchmarks ran",
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
        "noise": probe_noise(),
    }
    stable = {k: v for k, v in record.items() if k not in ("date", "noise")}
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
