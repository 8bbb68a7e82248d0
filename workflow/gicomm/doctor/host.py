"""Where the doctor reads the host from: sysfs, procfs, /boot and read-only commands.

Every reader takes a ``Host`` whose roots a test points at a fake tree; nothing here writes to
the host or changes a setting (nvidia-smi is only ever queried)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gicomm.probe import command_output

Runner = Callable[[list[str]], str | None]


@dataclass
class Host:
    sys_root: Path = Path("/sys")
    proc_root: Path = Path("/proc")
    boot_root: Path = Path("/boot")
    run: Runner = field(default=command_output)

    def read(self, path: Path) -> str | None:
        try:
            return path.read_text().strip()
        except OSError:
            return None

    def sys(self, rel: str) -> Path:
        return self.sys_root / rel

    def proc(self, rel: str) -> Path:
        return self.proc_root / rel


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]."""
    cpus: list[int] = []
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def cpu_nodes(host: Host) -> dict[int, int]:
    """CPU -> NUMA node, from /sys/devices/system/node/node*/cpulist."""
    out: dict[int, int] = {}
    for node in sorted(host.sys("devices/system/node").glob("node[0-9]*")):
        text = host.read(node / "cpulist")
        if text:
            for cpu in parse_cpulist(text):
                out[cpu] = int(node.name.removeprefix("node"))
    return out


@dataclass
class PciDevice:
    address: str  # 0000:17:00.0
    kind: str  # gpu | nic
    name: str  # the GPU index or the RDMA device name
    numa_node: int | None
    path: list[str]  # the PCI bridges above it, outermost first

    def switch(self) -> str | None:
        """The nearest bridge above the device (its PCIe switch port or root port)."""
        return self.path[-1] if self.path else None


def _pci_path(host: Host, dev: Path) -> list[str]:
    """The PCI addresses of the bridges above `dev` (from its resolved sysfs path)."""
    try:
        parts = dev.resolve().parts
    except OSError:
        return []
    pci = [p for p in parts if len(p) == 12 and p.count(":") == 2 and "." in p]
    return pci[:-1]


def _numa(host: Host, dev: Path) -> int | None:
    text = host.read(dev / "numa_node")
    if text is None:
        return None
    node = int(text)
    return node if node >= 0 else None


def nvidia_gpus(host: Host) -> list[PciDevice]:
    """NVIDIA display/3D controllers (vendor 0x10de, class 0x03xxxx) in PCI order."""
    out: list[PciDevice] = []
    for dev in sorted(host.sys("bus/pci/devices").glob("*")):
        if host.read(dev / "vendor") != "0x10de":
            continue
        if not (host.read(dev / "class") or "").startswith("0x03"):
            continue
        out.append(
            PciDevice(dev.name, "gpu", str(len(out)), _numa(host, dev), _pci_path(host, dev))
        )
    return out


def rdma_nics(host: Host) -> list[PciDevice]:
    """RDMA devices of /sys/class/infiniband with the PCI device behind each."""
    out: list[PciDevice] = []
    for ib in sorted(host.sys("class/infiniband").glob("*")):
        dev = ib / "device"
        try:
            address = dev.resolve().name
        except OSError:
            address = "?"
        out.append(PciDevice(address, "nic", ib.name, _numa(host, dev), _pci_path(host, dev)))
    return out
