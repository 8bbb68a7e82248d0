"""Read-only checks of the host a campaign ran on. Each returns a ``Check``: its status, the
evidence it read, and, when it found something, the cause it would explain and the paths that
cause touches (``affects``). A check that could not look says so (status ``not run``); the
verdict shows a cause only from a check that ran and found it (gicomm.doctor.verdict)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from gicomm.doctor.host import Host, cpu_nodes, nvidia_gpus, parse_cpulist, rdma_nics

OK, WARN, PROBLEM, NOT_RUN, NOT_APPLICABLE = "ok", "warn", "problem", "not run", "n/a"
FOUND = (WARN, PROBLEM)
# What a cause touches (the verdict matches these against each transport's path).
GPU, NIC, PROXY, NVLINK, LIBRARY = "gpu", "nic", "proxy", "nvlink", "library"
SM_CLOCK_LOW = 0.90  # measured SM clock under 90 % of the GPU's max: not at its usual boost
DEEP_CSTATE_US = 20  # an enabled idle state with a longer exit latency wakes a proxy worker late


@dataclass
class Check:
    name: str
    status: str
    evidence: str
    cause: str = ""
    affects: frozenset[str] = field(default_factory=frozenset)

    @property
    def found(self) -> bool:
        return self.status in FOUND


def _records(df: pd.DataFrame | None) -> pd.DataFrame:
    return df if df is not None else pd.DataFrame()


def _nvidia_smi(host: Host, fields: str) -> list[list[str]] | None:
    out = host.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
    if out is None:
        return None
    return [
        [c.strip() for c in line.split(",")] for line in out.strip().splitlines() if line.strip()
    ]


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def check_sm_clock(host: Host, records: pd.DataFrame | None) -> Check:
    rows = _nvidia_smi(host, "index,clocks.sm,clocks.max.sm,clocks.applications.graphics")
    df = _records(records)
    measured = (
        pd.to_numeric(df.get("sm_clock_mhz"), errors="coerce").dropna() if len(df) else pd.Series()
    )
    if rows is None:
        if measured.empty:
            return Check("sm_clock", NOT_RUN, "no nvidia-smi and no record with an SM clock")
        return Check(
            "sm_clock",
            NOT_RUN,
            f"records' SM clock {measured.min():.0f}-{measured.max():.0f} MHz; no nvidia-smi here "
            "to read the GPU's max clock",
        )
    maxes = [m for r in rows if len(r) > 2 and (m := _num(r[2]))]
    text = "; ".join(
        f"GPU {r[0]}: SM {r[1]} MHz now, max {r[2]}, applications {r[3] if len(r) > 3 else '?'}"
        for r in rows
    )
    if not maxes:
        return Check("sm_clock", NOT_RUN, f"nvidia-smi gave no max SM clock ({text})")
    top = max(maxes)
    if measured.empty:
        return Check("sm_clock", OK, f"{text}; no record with an SM clock to compare")
    low = float(measured.median())
    text += f"; records' SM clock median {low:.0f} MHz (min {measured.min():.0f})"
    if low < SM_CLOCK_LOW * top:
        return Check(
            "sm_clock",
            PROBLEM,
            text,
            f"SM clock {low:.0f} MHz under {SM_CLOCK_LOW:.0%} of the max {top:.0f} MHz "
            "(not at its usual boost, or locked low): every GPU-side cost scales with it",
            frozenset({GPU}),
        )
    return Check("sm_clock", OK, text)


def check_persistence(host: Host) -> Check:
    rows = _nvidia_smi(host, "index,persistence_mode")
    if rows is None:
        return Check("persistence_mode", NOT_RUN, "no nvidia-smi")
    off = [r[0] for r in rows if len(r) > 1 and r[1].lower().startswith("disabled")]
    text = "; ".join(f"GPU {r[0]}: {r[1] if len(r) > 1 else '?'}" for r in rows)
    if off:
        return Check(
            "persistence_mode",
            WARN,
            text,
            f"persistence mode off on GPU {', '.join(off)}: the driver tears down between "
            "processes, so the first launches of each run are slow",
            frozenset({GPU}),
        )
    return Check("persistence_mode", OK, text)


def check_mps(host: Host) -> Check:
    found = []
    for comm in host.proc_root.glob("[0-9]*/comm"):
        name = host.read(comm)
        if name and name.startswith("nvidia-cuda-mps"):
            found.append(f"{name} (pid {comm.parent.name})")
    if found:
        return Check(
            "mps",
            WARN,
            "running: " + ", ".join(sorted(found)),
            "an MPS daemon runs: kernels share the GPU with other clients",
            frozenset({GPU}),
        )
    return Check("mps", OK, f"no nvidia-cuda-mps process in {host.proc_root}")


def check_locality(host: Host) -> Check:
    gpus, nics = nvidia_gpus(host), rdma_nics(host)
    topo = host.run(["nvidia-smi", "topo", "-m"])
    tail = f"; nvidia-smi topo -m:\n{topo.strip()}" if topo else ""
    if not gpus:
        return Check("gpu_nic_locality", NOT_APPLICABLE, "no NVIDIA GPU in sysfs" + tail)
    if not nics:
        return Check("gpu_nic_locality", NOT_APPLICABLE, "no RDMA device in sysfs" + tail)
    g = gpus[0]
    lines, far = [], []
    for n in nics:
        same_node = g.numa_node is not None and g.numa_node == n.numa_node
        shared = set(g.path) & set(n.path)
        lines.append(
            f"GPU {g.address} (node {g.numa_node}, bridge {g.switch()}) / {n.name} {n.address} "
            f"(node {n.numa_node}, bridge {n.switch()}): "
            + ("shares a PCIe bridge" if shared else "no common PCIe bridge")
        )
        if not same_node or not shared:
            far.append(n.name)
    text = "; ".join(lines) + tail
    if len(far) == len(nics):
        return Check(
            "gpu_nic_locality",
            PROBLEM,
            text,
            "no NIC shares a PCIe switch and NUMA node with GPU 0: doorbells, WQE fetches and "
            "payload DMA cross the root complex or the socket link",
            frozenset({NIC}),
        )
    return Check("gpu_nic_locality", OK, text)


def _lspci(host: Host) -> dict[str, str] | None:
    out = host.run(["lspci", "-vvv", "-D"])
    if out is None:
        return None
    blocks: dict[str, str] = {}
    for block in re.split(r"\n(?=[0-9a-f]{4}:)", out.strip()):
        blocks[block.split()[0]] = block
    return blocks


def check_iommu_acs(host: Host) -> Check:
    cmdline = host.read(host.proc("cmdline")) or ""
    groups = list(host.sys("kernel/iommu_groups").glob("*"))
    passthrough = "iommu=pt" in cmdline or "iommu.passthrough=1" in cmdline
    parts = [f"{len(groups)} IOMMU groups", f"kernel command line: {cmdline or '?'}"]
    findings = []
    if groups and not passthrough:
        findings.append("the IOMMU translates device DMA (no iommu=pt)")
    lspci = _lspci(host)
    if lspci is None:
        parts.append("ACS: not read (no lspci)")
    else:
        redirect = [
            a for a, b in lspci.items() if re.search(r"ACSCtl:.*(ReqRedir\+|CmpltRedir\+)", b)
        ]
        parts.append(
            f"ACS redirect on {len(redirect)} bridge(s)"
            + (f": {', '.join(redirect)}" if redirect else "")
        )
        if redirect:
            findings.append("ACS redirects peer-to-peer requests up to the root complex")
    text = "; ".join(parts)
    if findings:
        return Check(
            "iommu_acs",
            WARN,
            text,
            "; ".join(findings) + ": GPU-NIC traffic takes a longer path",
            frozenset({NIC}),
        )
    return Check("iommu_acs", OK, text)


def check_peermem_dmabuf(host: Host) -> Check:
    if not rdma_nics(host):
        return Check(
            "peermem_dmabuf", NOT_APPLICABLE, "no RDMA device: nothing registers GPU memory"
        )
    modules = host.read(host.proc("modules")) or ""
    peermem = any(line.split()[0] == "nvidia_peermem" for line in modules.splitlines() if line)
    release = (host.read(host.proc("sys/kernel/osrelease")) or "").strip()
    config = host.read(host.boot_root / f"config-{release}") or ""
    dmabuf = "CONFIG_DMABUF_MOVE_NOTIFY=y" in config
    text = f"nvidia_peermem {'loaded' if peermem else 'not loaded'}; kernel {release or '?'} " + (
        "has CONFIG_DMABUF_MOVE_NOTIFY"
        if dmabuf
        else "config without CONFIG_DMABUF_MOVE_NOTIFY=y (or unread)"
    )
    if not peermem and not dmabuf:
        return Check(
            "peermem_dmabuf",
            PROBLEM,
            text,
            "neither nvidia-peermem nor dmabuf support: the NIC cannot reach GPU memory, so "
            "libraries stage through host memory or refuse GPUDirect",
            frozenset({NIC, LIBRARY}),
        )
    return Check("peermem_dmabuf", OK, text)


def check_relaxed_ordering(host: Host) -> Check:
    nics = rdma_nics(host)
    if not nics:
        return Check("relaxed_ordering", NOT_APPLICABLE, "no RDMA device")
    lspci = _lspci(host)
    if lspci is None:
        return Check("relaxed_ordering", NOT_RUN, "no lspci to read the NIC's DevCtl")
    off, lines = [], []
    for n in nics:
        block = lspci.get(n.address, "")
        m = re.search(r"DevCtl:.*?RlxdOrd([+-])", block, re.S)
        state = m.group(1) if m else "?"
        lines.append(f"{n.name} {n.address}: RlxdOrd{state}")
        if state == "-":
            off.append(n.name)
    if off:
        return Check(
            "relaxed_ordering",
            WARN,
            "; ".join(lines),
            f"PCIe relaxed ordering off on {', '.join(off)}: the NIC's writes to GPU memory are "
            "serialized",
            frozenset({NIC}),
        )
    return Check("relaxed_ordering", OK, "; ".join(lines))


def _worker_cpus(records: pd.DataFrame) -> list[int]:
    if records.empty or "param_worker_cpus" not in records:
        return []
    cpus: set[int] = set()
    for v in records["param_worker_cpus"].dropna():
        cpus.update(parse_cpulist(str(v).replace(" ", "")))
    return sorted(cpus)


def check_cpu_power(host: Host, records: pd.DataFrame | None) -> Check:
    cpus = _worker_cpus(_records(records))
    base = host.sys("devices/system/cpu")
    every = sorted(int(p.name[3:]) for p in base.glob("cpu[0-9]*"))
    which = cpus or every
    if not which:
        return Check("cpu_power", NOT_RUN, f"no CPU in {base}")
    govs: dict[str, list[int]] = {}
    deep: set[str] = set()
    for cpu in which:
        d = base / f"cpu{cpu}"
        gov = host.read(d / "cpufreq/scaling_governor") or "unreadable"
        govs.setdefault(gov, []).append(cpu)
        for state in d.glob("cpuidle/state*"):
            lat = _num(host.read(state / "latency") or "0") or 0
            if host.read(state / "disable") == "0" and lat > DEEP_CSTATE_US:
                deep.add(f"{host.read(state / 'name')} ({lat:.0f} us)")
    scope = (
        f"proxy worker CPUs {','.join(map(str, cpus))}"
        if cpus
        else "all CPUs (no worker CPUs in the records)"
    )
    text = f"{scope}: governor " + "; ".join(f"{g} on {len(c)} CPU(s)" for g, c in govs.items())
    text += "; deep idle states enabled: " + (", ".join(sorted(deep)) or "none")
    if set(govs) == {"unreadable"} and not deep:
        return Check("cpu_power", NOT_RUN, text + " (cpufreq not exposed on this machine)")
    slow = [g for g in govs if g not in ("performance", "unreadable")]
    if slow or deep:
        why = []
        if slow:
            why.append(f"CPU frequency governor {', '.join(slow)} (not performance)")
        if deep:
            why.append(f"deep C-states enabled ({', '.join(sorted(deep))})")
        return Check(
            "cpu_power",
            WARN,
            text,
            " and ".join(why) + ": a proxy worker wakes and runs slower than it could",
            frozenset({PROXY}),
        )
    return Check("cpu_power", OK, text)


def check_proxy_pinning(host: Host, records: pd.DataFrame | None) -> Check:
    cpus = _worker_cpus(_records(records))
    if not cpus:
        return Check("proxy_pinning", NOT_RUN, "no mini-proxy record names its worker CPUs")
    gpus = nvidia_gpus(host)
    if not gpus or gpus[0].numa_node is None:
        return Check("proxy_pinning", NOT_RUN, "the GPU's NUMA node is not in sysfs")
    node_of = cpu_nodes(host)
    gnode = gpus[0].numa_node
    wrong = [c for c in cpus if node_of.get(c) not in (None, gnode)]
    text = f"GPU 0 ({gpus[0].address}) on NUMA node {gnode}; worker CPUs " + ", ".join(
        f"{c} (node {node_of.get(c, '?')})" for c in cpus
    )
    if wrong:
        nodes = sorted({node_of[c] for c in wrong})
        return Check(
            "proxy_pinning",
            PROBLEM,
            text,
            f"proxy workers pinned to CPU(s) {','.join(map(str, wrong))} of NUMA node "
            f"{','.join(map(str, nodes))}, the GPU is on node {gnode}: every ring poll and "
            "completion write crosses the socket link",
            frozenset({PROXY}),
        )
    return Check("proxy_pinning", OK, text)


SOFTWARE_RDMA = r"^(rxe|siw)\d"


def check_nic_standin(records: pd.DataFrame | None) -> Check:
    df = _records(records)
    if not df.empty and "status" in df:
        df = df[df["status"] == "ok"]
    if df.empty:
        return Check("nic_standin", NOT_RUN, "no measured record")
    soft = (
        df[df["nic_backend"].astype(str).str.startswith("softnic")]
        if "nic_backend" in df
        else df.iloc[0:0]
    )
    emu = (
        df[df["rdma_provider"].astype(str) == "emulated"] if "rdma_provider" in df else df.iloc[0:0]
    )
    # The kernel's software RDMA devices (Soft-RoCE, soft-iWARP): named rxe*/siw* when created
    # with `rdma link add`, as gicomm's Soft-RoCE guest does; the record names the device its
    # path proof read.
    dev = df["path_check_device"].astype(str) if "path_check_device" in df else None
    rxe = df[dev.str.match(SOFTWARE_RDMA)] if dev is not None else df.iloc[0:0]
    parts = []
    if len(rxe):
        parts.append(
            f"{len(rxe)} record(s) through a kernel software RDMA device "
            f"({', '.join(sorted(rxe['path_check_device'].astype(str).unique()))}: Soft-RoCE or "
            "soft-iWARP)"
        )
    if len(soft):
        parts.append(
            f"{len(soft)} record(s) on the software NIC "
            f"({', '.join(sorted(soft['nic_backend'].unique()))})"
        )
    if len(emu):
        parts.append(
            f"{len(emu)} record(s) through the emulated rdma-core (rdma_provider emulated)"
        )
    if not parts:
        return Check("nic_standin", OK, "every NIC record ran on a real NIC (or none needs one)")
    return Check(
        "nic_standin",
        PROBLEM,
        "; ".join(parts),
        "a software NIC, the emulated rdma-core or a kernel software RDMA device stands in for "
        "the NIC: "
        "these are not NIC numbers, "
        "and a real NIC's expectation does not apply",
        frozenset({NIC}),
    )


FALLBACK = re.compile(
    r"fall(?:ing|s)? ?back|fell back|wanted type|Using network Socket"
    r"|IBGDA.*(?:disabled|not supported)",
    re.I,
)


def check_library_fallback(records: pd.DataFrame | None, logs: Iterable[Path] = ()) -> Check:
    df = _records(records)
    lib = (
        df[df["experiment"].isin(["library_baselines", "nvlink_dissection", "nvlink_put_size"])]
        if len(df)
        else df
    )
    hits = []
    if len(lib) and "error" in lib:
        for _, r in lib[lib["error"].astype(str).str.contains(FALLBACK)].iterrows():
            hits.append(f"{r['transport']} {r['metric']}: {r['error']}")
    scanned = 0
    for log in logs:
        scanned += 1
        try:
            text = log.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if FALLBACK.search(line):
                hits.append(f"{log.name}: {line.strip()[:200]}")
    if not len(lib) and not scanned:
        return Check("library_fallback", NOT_RUN, "no library baseline records or logs")
    text = f"{len(lib)} library record(s), {scanned} log(s) scanned"
    if hits:
        return Check(
            "library_fallback",
            PROBLEM,
            text + ": " + "; ".join(hits[:5]),
            "a library fell back to another transport than the one asked for",
            frozenset({LIBRARY}),
        )
    return Check("library_fallback", OK, text + ": no fallback")


def run_checks(
    host: Host, records: pd.DataFrame | None, logs: Iterable[Path] = (), records_here: bool = True
) -> list[Check]:
    """Every check, in the order the verdict page lists them. `records_here`: the records were
    measured on this host, so the checks that set them beside this host's sysfs may use them."""
    local = records if records_here else None
    steps: list[Callable[[], Check]] = [
        lambda: check_sm_clock(host, local),
        lambda: check_persistence(host),
        lambda: check_mps(host),
        lambda: check_locality(host),
        lambda: check_iommu_acs(host),
        lambda: check_peermem_dmabuf(host),
        lambda: check_relaxed_ordering(host),
        lambda: check_cpu_power(host, local),
        lambda: check_proxy_pinning(host, local),
        lambda: check_nic_standin(records),
        lambda: check_library_fallback(records, logs),
    ]
    out = [step() for step in steps]
    if not records_here and records is not None:
        note = "; the records were measured on another host: not set beside this one"
        for c in out:
            if c.name in ("sm_clock", "cpu_power", "proxy_pinning"):
                c.evidence += note
    return out
