"""Upstream benchmark logs to records: which transport and NIC backend each tool's numbers
belong to, and a failed record (with the reason) when a log holds no result."""

from __future__ import annotations

from typing import Any

from gicomm.baselines.parsers import ParseError, parse, to_records
from gicomm.records import RecordIdentity, new_record

# tool -> (transport, nic_backend) of the records its numbers become.
UPSTREAM: dict[str, tuple[str, str]] = {
    "nvshmem-perftest": ("nvshmem", "mlx5"),
    "nccl-tests": ("nccl", "mlx5"),
    "deepep-low-latency": ("deepep-v1", "mlx5"),
    "uccl-ep-low-latency": ("uccl-ep", "verbs"),
    "mscclpp-mp-unit": ("mscclpp", "none"),
    "perftest": ("perftest", "verbs"),
    "fabric-debug": ("fabric-lib", "verbs"),
}


def records_from_log(
    *,
    tool: str,
    text: str,
    campaign: str,
    host: str,
    platform: str,
    experiment: str,
    run_index: int,
    provenance_id: str = "unknown",
) -> list[dict[str, Any]]:
    transport, nic_backend = UPSTREAM[tool]
    who = RecordIdentity(
        campaign=campaign,
        host=host,
        platform=platform,
        experiment=experiment,
        transport=transport,
        nic_backend=nic_backend,
        run_index=run_index,
        provenance_id=provenance_id,
    )
    try:
        rows = parse(tool, text)
    except ParseError as exc:
        return [
            new_record(
                who,
                params={"tool": tool},
                metric="upstream",
                unit="",
                status="failed",
                error=f"{tool} log holds no result: {exc}",
            )
        ]
    return to_records(rows, who, params={"tool": tool})
