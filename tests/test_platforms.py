"""Platform files (config/platforms/*.yaml): valid against workflow/schemas/platform.schema.yaml, true
to the paper's Table 2, and a bad value is refused with the key, the value and what is allowed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from conftest import REPO

from gicomm.schema import validate

PLATFORMS = REPO / "config" / "platforms"
PAPER = ("h100", "h200", "b200", "gb200")


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((PLATFORMS / f"{name}.yaml").read_text())


def test_every_platform_file_is_valid_and_named_after_its_file():
    names = sorted(p.stem for p in PLATFORMS.glob("*.yaml"))
    assert set(PAPER) | {"local"} <= set(names)
    for name in names:
        data = load(name)
        assert validate(data, "platform", f"{name}.yaml") == [], name
        assert data["platform"] == name


@pytest.mark.parametrize(
    ("name", "paper", "gpu", "per_node", "nics", "layer", "gbps", "fabric", "doorbell"),
    [
        ("h200", "P-IB", "H200", 4, 4, "InfiniBand", 200, "infiniband", "gpu"),
        ("b200", "P-RoCE", "B200", 8, 8, "Ethernet", 400, "roce", "gpu"),
        ("h100", "P-H100", "H100", 4, 4, "InfiniBand", 200, "infiniband", "host"),
        ("gb200", "P-GB200", "GB200", 1, 1, "InfiniBand", 400, "infiniband", "gpu"),
    ],
)
def test_paper_platforms_match_table_2(
    name, paper, gpu, per_node, nics, layer, gbps, fabric, doorbell
):
    s = load(name)["platform_spec"]
    assert s["paper_name"] == paper
    assert (s["gpu"]["model"], s["gpu"]["per_node"], len(s["gpus"])) == (gpu, per_node, per_node)
    assert len(s["nics"]) == nics
    assert all(n["model"] == "ConnectX-7" for n in s["nics"])
    assert {(n["link_layer"], n["rate_gbps"]) for n in s["nics"]} == {(layer, gbps)}
    assert (s["interconnect"]["fabric"], s["interconnect"]["rate_gbps"]) == (fabric, gbps)
    assert s["doorbell_writer"] == doorbell
    assert s["nodes"]["per_job_max"] == 2  # the inter-node experiments need two nodes


@pytest.mark.parametrize("name", PAPER)
def test_gpu_nic_and_numa_affinity_is_consistent(name):
    s = load(name)["platform_spec"]
    nic_names = [n["name"] for n in s["nics"]]
    assert len(set(nic_names)) == len(nic_names)
    numa = range(s["cpu"]["numa_nodes"])
    for g in s["gpus"]:
        assert g["nic"] in nic_names, g
        assert g["numa"] in numa, g
        nic = next(n for n in s["nics"] if n["name"] == g["nic"])
        assert nic["numa"] == g["numa"], (
            f"{name}: GPU {g['index']} and its NIC on different NUMA nodes"
        )
    assert [g["index"] for g in s["gpus"]] == list(range(len(s["gpus"])))


def test_paper_specific_facts():
    assert load("gb200")["platform_spec"]["cpu"]["arch"] == "aarch64"  # Grace
    assert load("gb200")["platform_spec"]["gpus"][0]["pcie_path"] == "C2C"
    assert load("b200")["platform_spec"]["clocks"]["user_may_lock"]  # Fig. 5 locked SM clocks there
    spellings = {load(n)["platform_spec"]["slurm"]["gpu_resource"] for n in PAPER}
    assert spellings == {"gres", "gpus"}  # the examples show both GPU spellings


def test_local_is_a_template_left_to_the_probe():
    s = load("local")["platform_spec"]
    assert s["template"] is True
    assert s["gpu"]["model"] is None and s["gpu"]["per_node"] is None
    assert s["gpus"] == [] and s["nics"] == [] and s["doorbell_writer"] is None
    assert s["slurm"]["partition"] is None  # the cluster's default partition


def _set(data: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node: Any = out
    parts = dotted.split(".")
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node[p]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (
            "platform_spec.doorbell_writer",
            "cpu",
            ["'platform_spec.doorbell_writer'", "'cpu'", "allowed: 'gpu', 'host'"],
        ),
        (
            "platform_spec.slurm.gpu_resource",
            "gpu",
            ["'platform_spec.slurm.gpu_resource'", "'gpu'", "allowed: 'gres', 'gpus', 'none'"],
        ),
        (
            "platform_spec.nics.0.link_layer",
            "IB",
            ["'platform_spec.nics[0].link_layer'", "'IB'", "allowed: 'InfiniBand', 'Ethernet'"],
        ),
        (
            "platform_spec.interconnect.fabric",
            "ethernet",
            ["'platform_spec.interconnect.fabric'", "'ethernet'", "'infiniband', 'roce'"],
        ),
        (
            "platform_spec.nodes.per_job_max",
            4,
            ["'platform_spec.nodes.per_job_max'", "4", "out of range", "maximum 2"],
        ),
        (
            "platform_spec.gpu.arch",
            "hopper",
            ["'platform_spec.gpu.arch'", "'hopper'", "pattern"],
        ),
        (
            "platform_spec.clocks.user_may_lock",
            "yes",
            ["'platform_spec.clocks.user_may_lock'", "'yes'", "wrong type", "true or false"],
        ),
        (
            "platform_spec.gpus.0.pcie_path",
            "switch",
            ["'platform_spec.gpus[0].pcie_path'", "'switch'", "'PIX'", "'C2C'"],
        ),
        (
            "platform_spec.slurm.time_limits_min.gpu",
            0,
            ["'platform_spec.slurm.time_limits_min.gpu'", "0", "out of range", "minimum 1"],
        ),
    ],
)
def test_bad_value_names_key_value_and_allowed(key, value, expected):
    bad = _set(load("h200"), key, value)
    problems = "\n".join(validate(bad, "platform", "h200.yaml"))
    assert problems.startswith("h200.yaml: "), problems
    for fragment in expected:
        assert fragment in problems, (fragment, problems)


def test_unknown_key_is_named_with_the_allowed_ones():
    data = load("h200")
    data["platform_spec"]["slurm"]["partiton"] = "gpu"
    problems = "\n".join(validate(data, "platform", "h200.yaml"))
    assert "unknown key(s) 'partiton' under 'platform_spec.slurm'" in problems
    assert "partition" in problems.split("allowed:")[1]


def test_missing_required_key_is_named():
    data = load("b200")
    del data["platform_spec"]["slurm"]["gpu_resource"]
    problems = "\n".join(validate(data, "platform", "b200.yaml"))
    assert "'gpu_resource' is a required property" in problems


def test_a_platform_file_is_also_a_valid_configfile_shape():
    # `--configfile config/platforms/<p>.yaml` adds exactly these two keys to the campaign config.
    for name in PAPER:
        assert set(load(name)) == {"platform", "platform_spec"}
