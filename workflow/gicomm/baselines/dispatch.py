"""The library baselines over a NIC (experiment library_baselines), dispatched per transport by the
batch runner: our CUDA harness binary for the libraries we drive through their device API, or the
project's own test program for the others.

    nvshmem-ibgda, nvshmem-ibrc    -> gicomm-bench-baselines-nvshmem (NVSHMEM's NIC transport chosen
                                      through its env)
    nccl-gin-gdaki, nccl-gin-proxy -> gicomm-bench-baselines-nccl-gin (NCCL GIN, backend chosen
                                      through NCCL_GIN_TYPE)
    mscclpp-port, uccl-ep, deepep-v1, fabric-lib
                                   -> gicomm.baselines.upstream_run (the upstream test program of
                                      the prepared source, its output parsed to records)

Before a point runs, its library knobs are checked (a bad value fails the point, naming the key,
the value and what is allowed) and the NIC is looked for in /sys/class/infiniband; a point whose
NIC or harness is missing is skipped with the reason. Points of one harness and one set of knob
values run in one harness process (the libraries read their env once, at init).
Environment: GICOMM_SYSFS_ROOT (default /sys; tests point it at a fake tree).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gicomm import REPO_ROOT
from gicomm.baselines.upstream_run import TRANSPORTS as UPSTREAM_TRANSPORTS
from gicomm.baselines.upstream_run import Point, Runner, default_hardware
from gicomm.records import RecordIdentity

# The experiment's `driver` that means "dispatched here" (no program of that name exists).
DISPATCHER = "gicomm-bench-baselines"
NVSHMEM_MISSING = (
    "CUDA and NVSHMEM (include/nvshmem.h, lib/libnvshmem_device.a, lib/libnvshmem_host.so[.3]) "
    "were not found when native/ was configured (pip install nvidia-nvshmem-cu13, or set "
    "GICOMM_NVSHMEM_ROOT)"
)
NCCL_GIN_MISSING = (
    "CUDA and NCCL >= 2.28.7 with the GIN device API (include/nccl_device/gin.h, "
    "lib/libnccl.so[.2]) were not found when native/ was configured (pip install "
    "nvidia-nccl-cu13, or set GICOMM_NCCL_ROOT)"
)


@dataclass(frozen=True)
class Harness:
    program: str
    needs_mlx5: bool  # GPU-initiated doorbells: an mlx5 (ConnectX) device
    why_not_built: str


HARNESSES = {
    "nvshmem-ibgda": Harness("gicomm-bench-baselines-nvshmem", True, NVSHMEM_MISSING),
    "nvshmem-ibrc": Harness("gicomm-bench-baselines-nvshmem", False, NVSHMEM_MISSING),
    "nccl-gin-gdaki": Harness("gicomm-bench-baselines-nccl-gin", True, NCCL_GIN_MISSING),
    "nccl-gin-proxy": Harness("gicomm-bench-baselines-nccl-gin", False, NCCL_GIN_MISSING),
}


# ---- library knobs: sweep parameters that become a library's environment variables ---------------
@dataclass(frozen=True)
class Knob:
    param: str
    env: str
    transports: tuple[str, ...]
    kind: str  # int | pow2 | enum
    lo: int = 0
    hi: int = 0
    values: tuple[str, ...] = ()
    note: str = ""

    def allowed(self) -> str:
        if self.kind == "enum":
            return " | ".join(self.values)
        what = "an integer" if self.kind == "int" else "a power of two"
        return f"{what} from {self.lo} to {self.hi}"


# Names and values as NVSHMEM 3.4.5 and NCCL 2.28.9 read them; the ranges are this harness's: a
# value the library would silently replace is refused here instead.
KNOBS = (
    Knob("ibgda_num_rc_per_pe", "NVSHMEM_IBGDA_NUM_RC_PER_PE", ("nvshmem-ibgda",), "int", 1, 1024,
         note="RC QPs per peer PE (NVSHMEM default 2; 0 would leave only DC, which this harness "
         "does not measure)"),
    Knob("ibgda_nic_handler", "NVSHMEM_IBGDA_NIC_HANDLER", ("nvshmem-ibgda",), "enum",
         values=("auto", "gpu", "cpu", "cpu_host_memory"),
         note="who rings the doorbell (NVSHMEM default auto; cpu needs GDRCopy)"),
    Knob("ibgda_num_requests_in_batch", "NVSHMEM_IBGDA_NUM_REQUESTS_IN_BATCH", ("nvshmem-ibgda",),
         "int", 1, 1024, note="WQEs per doorbell (NVSHMEM default 32; NVSHMEM also refuses a value "
         "above NVSHMEM_QP_DEPTH)"),
    Knob("gin_gdaki_qp_depth", "NCCL_GIN_GDAKI_QP_DEPTH", ("nccl-gin-gdaki",), "pow2", 1, 65536,
         note="GDAKI send queue depth (NCCL default 128)"),
    Knob("gin_proxy_queue_size", "NCCL_GIN_PROXY_QUEUE_SIZE", ("nccl-gin-proxy",), "pow2", 1,
         65536, note="GPU-to-proxy queue entries (NCCL replaces a value that is not a power of "
         "two with its default)"),
)  # fmt: skip


def knob_env(params: dict[str, Any], transport: str) -> dict[str, str] | str:
    """The env the point's knobs set, or why a knob is refused (key, value, what is allowed)."""
    env: dict[str, str] = {}
    for k in KNOBS:
        if k.param not in params or params[k.param] is None:  # null: the library's default
            continue
        v = params[k.param]
        text = str(v).lower() if isinstance(v, bool) else str(v)
        if transport not in k.transports:
            return (
                f"bad parameter {k.param}={text}: it sets {k.env}, which applies to "
                f"{', '.join(k.transports)} only, not to {transport}"
            )
        bad = f"bad parameter {k.param}={text} ({k.env}): allowed {k.allowed()}; {k.note}"
        if k.kind == "enum":
            if not isinstance(v, str) or v not in k.values:
                return bad
            env[k.env] = v
            continue
        n = v if isinstance(v, int) and not isinstance(v, bool) else None
        if isinstance(v, str) and v.isdigit() and len(v) <= 18:
            n = int(v)
        if n is None or not k.lo <= n <= k.hi or (k.kind == "pow2" and n & (n - 1)):
            return bad
        env[k.env] = str(n)
    return env


# ---- the NIC -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Nic:
    name: str
    driver: str
    mlx5: bool
    active: bool  # a port in state ACTIVE


@dataclass(frozen=True)
class NicScan:
    where: Path
    devices: tuple[Nic, ...] = field(default=())


def scan_nics(sys_root: Path | None = None) -> NicScan:
    root = sys_root or Path(os.environ.get("GICOMM_SYSFS_ROOT") or "/sys")
    where = root / "class" / "infiniband"
    devices = []
    for dev in sorted(where.iterdir()) if where.is_dir() else []:
        link = dev / "device" / "driver"
        driver = os.path.basename(os.readlink(link)) if link.is_symlink() else ""
        states = [_read(p / "state") for p in (dev / "ports").glob("*")]
        devices.append(
            Nic(
                name=dev.name,
                driver=driver,
                mlx5=dev.name.startswith("mlx5") or driver == "mlx5_core",
                active=any("ACTIVE" in s for s in states),
            )
        )
    return NicScan(where, tuple(devices))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def nic_unmet(scan: NicScan, needs_mlx5: bool, transport: str) -> str:
    """'' when the scan has what `transport` needs, else the reason."""
    what = (
        "an mlx5 (ConnectX) RDMA device with an ACTIVE port (the GPU rings the NIC's doorbell)"
        if needs_mlx5
        else "an RDMA (InfiniBand/RoCE verbs) device with an ACTIVE port (a CPU proxy posts verbs)"
    )
    why = f"{transport} needs {what}"
    if not scan.devices:
        return f"{why}; found no RDMA device in {scan.where}"
    if any(d.active and (d.mlx5 or not needs_mlx5) for d in scan.devices):
        return ""
    seen = ", ".join(
        f"{d.name} ({'mlx5' if d.mlx5 else d.driver or 'unknown driver'}, "
        f"{'active' if d.active else 'no ACTIVE port'})"
        for d in scan.devices
    )
    return f"{why}; found only {seen} in {scan.where}"


# ---- routing a point -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    program: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    upstream: bool = False
    status: str | None = None  # skipped | failed: not run
    reason: str = ""


def route(
    transport: str, params: dict[str, Any], bin_dir: Path, nics: NicScan, emulated: bool = False
) -> Route:
    """How a library_baselines point of `transport` is measured on this node (`emulated`: over
    the emulated rdma-core, which stands in for the NIC the scan did not find)."""
    if transport in UPSTREAM_TRANSPORTS:
        return Route(upstream=True)
    harness = HARNESSES.get(transport)
    if harness is None:
        known = " | ".join([*HARNESSES, *UPSTREAM_TRANSPORTS])
        return Route(status="failed", reason=f"unknown transport {transport!r} ({known})")
    env = knob_env(params, transport)
    if isinstance(env, str):
        return Route(status="failed", reason=env)
    missing = "" if emulated else nic_unmet(nics, harness.needs_mlx5, transport)
    if not missing and not (bin_dir / harness.program).is_file():
        missing = f"{harness.program} was not built: {harness.why_not_built}"
    if missing:
        return Route(status="skipped", reason="not measurable on this host: " + missing)
    return Route(program=harness.program, env=env)


# ---- the upstream programs -----------------------------------------------------------------------
def baselines_file() -> Path:
    return Path(os.environ.get("GICOMM_BASELINES_FILE") or REPO_ROOT / "config/baselines.yaml")


def builds_dir() -> Path:
    return Path(os.environ.get("GICOMM_BASELINES_DIR") or REPO_ROOT / "build/baselines")


def upstream_digest() -> str:
    """What an upstream point is measured under: the baselines file and the prepared sources."""
    h = hashlib.sha256(baselines_file().read_bytes())
    for manifest in sorted(builds_dir().glob("*/manifest.json")):
        h.update(manifest.read_bytes())
    return h.hexdigest()


def run_upstream(who: RecordIdentity, params: dict[str, Any], beside: Path) -> list[dict[str, Any]]:
    """The records of one upstream point (its program's output is kept in <beside>.logs/)."""
    from gicomm.baselines.sources import load_baselines

    runner = Runner(
        load_baselines(baselines_file()),
        builds_dir(),
        default_hardware,
        Path(str(beside) + ".logs"),
    )
    return runner.run_point(who, Point(point_id=str(who.point_id), params=params)).records
