"""Model parameters: one NIC, a set of submission paths, and where every number came from.

Times are in nanoseconds, clocks in MHz. GPU-side costs follow T(f) = cycles / f + constant, so a
parameter set calibrated at one SM clock predicts another (``PathParams.gpu_ns``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass
class NicParams:
    """The NIC's processing units, WQE fetch, receive cost and connection-context cache."""

    n_pu: int = 8  # parallel processing units; one send queue is served by one unit at a time
    t_fetch_ns: float = 29.0  # unit time per DMA read of up to fetch_max WQEs (doorbell/WQE fetch)
    t_wqe_ns: float = 29.0  # unit time per WQE processed
    fetch_max: int = 16  # WQEs per DMA read
    burst_max: int = 32  # WQEs a unit takes from one queue before moving on
    t_rx_ns: float = 0.0  # unit time per received message (bidirectional traffic)
    t_miss_tx_ns: float = 0.0  # unit time of a send-side context miss (0: prefetched, hidden)
    t_miss_rx_ns: float = 0.0  # unit time of a receive-side context miss
    cache_sets: int = 0  # 0 disables the context cache (every access hits)
    cache_ways: int = 8

    @property
    def cache_capacity(self) -> int:
        return max(self.cache_sets, 0) * self.cache_ways

    def ceiling_mmsg(self, wqes_per_fetch: int | None = None) -> float:
        """Sustained NIC send ceiling (Mmsg/s) when every fetch carries ``wqes_per_fetch`` WQEs."""
        k = (
            self.fetch_max
            if wqes_per_fetch is None
            else max(1, min(wqes_per_fetch, self.fetch_max))
        )
        per_wqe = self.t_fetch_ns / k + self.t_wqe_ns
        return self.n_pu / per_wqe * 1e3


@dataclass
class PathParams:
    """One submission path (mini-gda, GDAKI, mini-proxy, ...).

    ``build_*`` is the producer cost per WQE (GPU path) or per request descriptor (proxy path);
    ``ring_*`` the per-doorbell cost, held under the queue lock. Both are ``cycles / f + ns``.
    ``issue_ns``, ``completion_ns`` and ``rtt_ns`` are the idle single-op latencies the model must
    reproduce; the fixed tails are derived from them.
    """

    name: str = "mini-gda"
    kind: str = "gpu"  # "gpu" (GPU rings the NIC) or "proxy" (CPU workers post)
    build_cycles: float = 0.0
    build_ns: float = 0.0
    ring_cycles: float = 0.0
    ring_ns: float = 0.0
    issue_ns: float = 700.0
    completion_ns: float = 4030.0
    rtt_ns: float = 6850.0
    queue_depth: int = 1024  # send-queue (GPU path) or ring (proxy path) depth
    worker_t0_ns: dict[str, float] = field(default_factory=dict)  # per clock state
    worker_tper_ns: dict[str, float] = field(default_factory=dict)
    worker_bmax: int = 16
    worker_qp_depth: int = 4096
    # proxy path: workers publish completions once per pass over their rings (gicomm's mini-proxy
    # WorkerPool reaps its CQ after each pass) rather than as soon as the CQE is written
    worker_reap_per_pass: bool = False
    # proxy path: enqueue cost onto a ring that several producers share (a multi-producer ring
    # needs atomic slot reservation; the tuned single-store enqueue needs one producer per ring).
    # 0 means the same as build.
    shared_enqueue_ns: float = 0.0

    def gpu_ns(self, cycles: float, const_ns: float, sm_clock_mhz: float) -> float:
        return cycles / sm_clock_mhz * 1e3 + const_ns

    def build_cost(self, sm_clock_mhz: float) -> float:
        return self.gpu_ns(self.build_cycles, self.build_ns, sm_clock_mhz)

    def ring_cost(self, sm_clock_mhz: float) -> float:
        return self.gpu_ns(self.ring_cycles, self.ring_ns, sm_clock_mhz)

    def enqueue_cost(self, sm_clock_mhz: float, multi_producer: bool) -> float:
        """Per-descriptor cost of a proxy producer: the multi-producer (baseline) enqueue, which a
        ring with several producers needs, or the tuned single store."""
        if multi_producer and self.shared_enqueue_ns > 0.0:
            return self.shared_enqueue_ns
        return self.build_cost(sm_clock_mhz)

    def worker_cost(self, n: int, state: str = "cold") -> float:
        return self.worker_t0_ns[state] + n * self.worker_tper_ns[state]


@dataclass
class ModelParams:
    """A calibrated parameter set for one platform."""

    platform: str = "P-IB"
    sm_clock_mhz: float = 1980.0
    nic: NicParams = field(default_factory=NicParams)
    paths: dict[str, PathParams] = field(default_factory=dict)
    poll_per_qp_ns: float = 0.0  # extra completion time per additional QP an all-QP quiet polls
    sources: dict[str, str] = field(default_factory=dict)  # parameter -> where it came from

    def path(self, name: str) -> PathParams:
        if name not in self.paths:
            raise KeyError(
                f"no path {name!r} in parameters for {self.platform} ({list(self.paths)})"
            )
        return self.paths[name]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelParams:
        nic = NicParams(**d.get("nic", {}))
        paths = {k: PathParams(**v) for k, v in d.get("paths", {}).items()}
        top = {f.name for f in fields(cls)} - {"nic", "paths"}
        return cls(nic=nic, paths=paths, **{k: v for k, v in d.items() if k in top})

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> ModelParams:
        return cls.from_dict(json.loads(Path(path).read_text()))


# Fields read from a platform config (config/platforms/<name>.yaml, passed as a plain dict).
PLATFORM_FIELDS = {
    "sm_clock_mhz": "SM clock the GPU costs are evaluated at (MHz)",
    "nic_ceiling_mmsg": "NIC 8 B send ceiling; rescales t_wqe_ns and t_fetch_ns",
    "nic_context_cache_entries": "connection-context cache capacity; rescales cache_sets",
}


def _flatten(d: dict[str, Any]) -> dict[str, Any]:
    """Scalar fields of a nested dict, breadth first (the shallowest occurrence of a key wins)."""
    flat: dict[str, Any] = {}
    level = [d]
    while level:
        nxt: list[dict[str, Any]] = []
        for node in level:
            for k, v in node.items():
                if isinstance(v, dict):
                    nxt.append(v)
                elif k not in flat:
                    flat[k] = v
        level = nxt
    return flat


def apply_platform(params: ModelParams, platform: dict[str, Any]) -> ModelParams:
    """A copy of ``params`` adjusted by the fields of a platform config (see PLATFORM_FIELDS).

    The fields may sit at any depth (e.g. ``platform_spec: {model: {sm_clock_mhz: 1755}}``);
    unknown fields are ignored. The platform label is ``paper_name`` or ``platform``.
    """
    flat = _flatten(platform)
    out = ModelParams.from_dict(params.to_dict())
    label = flat.get("paper_name") or flat.get("platform")
    if label:
        out.platform = str(label)
    if flat.get("sm_clock_mhz"):
        out.sm_clock_mhz = float(flat["sm_clock_mhz"])
        out.sources["sm_clock_mhz"] = "platform config"
    if flat.get("nic_ceiling_mmsg"):
        scale = out.nic.ceiling_mmsg() / float(flat["nic_ceiling_mmsg"])
        out.nic.t_wqe_ns *= scale
        out.nic.t_fetch_ns *= scale
        out.sources["nic.t_wqe_ns"] = "platform config nic_ceiling_mmsg"
    if flat.get("nic_context_cache_entries"):
        entries = float(flat["nic_context_cache_entries"])
        out.nic.cache_sets = max(1, round(entries / out.nic.cache_ways))
        out.sources["nic.cache_sets"] = "platform config nic_context_cache_entries"
    return out
