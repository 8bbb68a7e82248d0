"""Does a host have what an experiment needs? Answers with the reason when it does not."""

from __future__ import annotations

from typing import Any


def unmet_needs(
    needs: dict[str, Any],
    hardware: dict[str, Any],
    build: dict[str, Any],
    max_nodes: int = 1,
    may_lock_clocks: bool = False,
) -> list[str]:
    """Every need of `needs` that this host lacks: probe `hardware`, native `build` summary, and
    what the platform allows (nodes per job, permission to lock clocks)."""
    reasons = []
    gpus = hardware.get("gpus", {}).get("devices", [])
    want_gpus = needs.get("gpus", 0)
    if len(gpus) < want_gpus:
        reasons.append(f"needs {want_gpus} GPU(s), found {len(gpus)}")
    if needs.get("nvlink_peers"):
        matrix = hardware.get("gpus", {}).get("p2p_nvlink") or []
        linked = any(v == "nvlink" for row in matrix for v in row)
        if not linked:
            reasons.append("needs two GPUs connected by NVLink, found none")
    if needs.get("rdma_nic") and not hardware.get("rdma", {}).get("devices"):
        reasons.append("needs an RDMA NIC (mlx5), found none in /sys/class/infiniband")
    if needs.get("nodes", 1) > max_nodes:
        reasons.append(f"needs {needs['nodes']} nodes; this platform gives {max_nodes}")
    if needs.get("clock_lock") and not may_lock_clocks:
        reasons.append("needs permission to lock SM clocks; the platform config does not grant it")
    if needs.get("cuda_build") and not build.get("cuda"):
        reasons.append(f"needs the CUDA build; {no_cuda_build(hardware, build)}")
    return reasons


def no_cuda_build(hardware: dict[str, Any], build: dict[str, Any]) -> str:
    """Why the native build has no CUDA targets, from what was checked: no GPU on the host (the
    default native.cuda=auto builds them only where one is), no nvcc, or CUDA turned off."""
    nvcc = (hardware.get("tools") or {}).get("nvcc")
    gpus = (hardware.get("gpus") or {}).get("devices") or []
    if build.get("cuda_reason"):
        return str(build["cuda_reason"])
    if not gpus and nvcc:
        return (
            f"the native build left them out: no GPU on this host (nvcc {nvcc} is installed; "
            "native.cuda=auto builds CUDA targets only where a GPU is)"
        )
    if not nvcc:
        return "the native build has none: nvcc was not found on this host"
    return "the native build has none although nvcc and a GPU were found (native.cuda=off?)"
