"""Slurm resources of a job on a platform, in snakemake-executor-plugin-slurm's resource names.

The rules take their `resources:` from here (workflow/rules/common.smk: platform_resources), so what
a job asks Slurm for (partition, account, QoS, node feature, GPUs spelled --gres or --gpus, time
limit, memory, CPUs, whole nodes for timing jobs, two nodes with one task each) is data in the
platform file's `slurm:` section (config/platforms/<name>.yaml, documented in docs/clusters.md).
The local executor ignores these resources; only host_share (the rules' own) is limited by a
profile.
"""

from __future__ import annotations

from typing import Any

from gicomm.errors import ConfigError
from gicomm.schema import apply_defaults, load_schema

#: job kinds: cpu (light CPU work, any node of the CPU partition), probe (the platform's node with
#: all its GPUs, short), build (the platform's node type, no GPU), gpu (a timing job)
KINDS = ("cpu", "probe", "build", "gpu")


def slurm_settings(spec: dict[str, Any]) -> dict[str, Any]:
    """The platform's `slurm:` section with the schema's defaults filled in."""
    schema = load_schema("platform")["$defs"]["slurm"]
    out = apply_defaults(
        dict(spec.get("slurm") or {"partition": None, "gpu_resource": "none"}), schema
    )
    out["time_limits_min"] = apply_defaults(
        out.get("time_limits_min") or {}, schema["properties"]["time_limits_min"]
    )
    return out


def slurm_resources(
    spec: dict[str, Any], kind: str, gpus: int | None = None, nodes: int = 1
) -> dict[str, Any]:
    """Resources for a job of `kind` on the platform `spec` (a validated platform_spec).

    gpus: GPUs of a gpu job (default: every GPU of a node; timing jobs take whole nodes anyway).
    nodes=2: a two-node job, one task per node, started by the platform's `mpi` launcher (srun)."""
    if kind not in KINDS:
        raise ConfigError(
            f"slurm_resources: kind {kind!r} is not allowed; allowed: {', '.join(KINDS)}"
        )
    per_job_max = int((spec.get("nodes") or {}).get("per_job_max") or 1)
    if nodes not in (1, 2) or nodes > per_job_max:
        raise ConfigError(
            f"slurm_resources: nodes={nodes} is not allowed on this platform; allowed: 1.."
            f"{per_job_max} (platform_spec.nodes.per_job_max)"
        )
    s = slurm_settings(spec)
    limits = s["time_limits_min"]
    on_platform_node = kind != "cpu" or not s.get("cpu_partition")
    res: dict[str, Any] = {}
    partition = s.get("partition") if on_platform_node else s["cpu_partition"]
    if partition:
        res["slurm_partition"] = partition
    if s.get("account"):
        res["slurm_account"] = s["account"]
    if s.get("qos"):
        res["qos"] = s["qos"]
    if on_platform_node and s.get("constraint"):
        res["constraint"] = s["constraint"]
    extra: list[str] = [s["extra"]] if s.get("extra") else []

    per_node = (spec.get("gpu") or {}).get("per_node") or 0
    if kind == "gpu":
        n_gpu = per_node if gpus is None else gpus
        res["runtime"] = limits["two_node"] if nodes == 2 else limits["gpu"]
        res["mem_mb"] = s["mem_mb"]
        res["cpus_per_task"] = s["cpus_per_task"]
        if s["exclusive"]:
            extra.append("--exclusive")
    elif kind == "probe":
        n_gpu = per_node
        res["runtime"] = limits["cpu"]
        res["mem_mb"] = s["cpu_mem_mb"]
        res["cpus_per_task"] = 1
    else:
        n_gpu = 0
        res["runtime"] = limits["build"] if kind == "build" else limits["cpu"]
        res["mem_mb"] = s["cpu_mem_mb"]
        res["cpus_per_task"] = s["cpus_per_task"] if kind == "build" else 1

    gtype = f"{s['gpu_type']}:" if s.get("gpu_type") else ""
    if n_gpu > 0 and s["gpu_resource"] == "gres":
        res["gres"] = f"gpu:{gtype}{n_gpu}"  # --gres counts per node
    elif n_gpu > 0 and s["gpu_resource"] == "gpus":
        if nodes == 1:
            res["gpu"] = n_gpu  # --gpus=[type:]N, per job
            if s.get("gpu_type"):
                res["gpu_model"] = s["gpu_type"]
        else:
            extra.append(f"--gpus-per-node={gtype}{n_gpu}")

    if nodes == 2:
        res["nodes"] = 2
        res["tasks"] = 2  # with --ntasks-per-node=1: one task per node
        res["mpi"] = s["mpi"]
        # the plugin would turn `tasks` into --ntasks-per-gpu for a GRES job; 0 keeps it out
        res["tasks_per_gpu"] = 0
        extra.append("--ntasks-per-node=1")
    if extra:
        res["slurm_extra"] = " ".join(extra)
    return res
