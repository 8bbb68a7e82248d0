"""Every experiment declares its parameters once (YAML `params`); a sweep that names an unknown
parameter, an unknown value or a number of the wrong type or range is refused when the experiment
loads, naming the parameter, the value and what is allowed. The transports and NIC backends come
from the one vocabulary list the native code compiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from gicomm.errors import ConfigError
from gicomm.experiments import load_experiment
from gicomm.schema import load_schema
from gicomm.vocabulary import default_nic_backend, nic_backends, parse, transports


def with_sweep(tmp_path: Path, name: str, sweep: object, **changes: object) -> Path:
    src = yaml.safe_load((REPO / f"config/experiments/{name}.yaml").read_text())
    src["sweep"] = sweep
    src.pop("reduced", None)
    src.update(changes)
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(src, sort_keys=False))
    return p


@pytest.mark.parametrize(
    ("name", "block", "expected"),
    [
        # A misspelled parameter is not measured at its default: it is refused with the names.
        ("gda_msg_rate", {"mode": ["thread"], "thread": [1, 8]},
         ["unknown parameter 'thread'", "allowed:", "threads"]),
        # A misspelled value is not measured as another one.
        ("engine_ceiling", {"engine": ["cpu"], "payload": ["inlin"]},
         ["parameter 'payload': value 'inlin' is not allowed", "allowed: 'inline', 'pointer'"]),
        # Hostile numbers: too large for the driver's integers, fractional, boolean.
        ("engine_ceiling", {"engine": ["cpu"], "qps": [4294967312]},
         ["parameter 'qps': value 4294967312 is out of range", "an integer from 1 to 4096"]),
        ("engine_ceiling", {"engine": ["cpu"], "qps": [16.7]},
         ["parameter 'qps': value 16.7 has the wrong type", "an integer"]),
        ("engine_ceiling", {"engine": ["cpu"], "qps": [True]},
         ["parameter 'qps': value True has the wrong type"]),
        ("engine_ceiling", {"engine": ["cpu"], "depth": [4294968320]},
         ["parameter 'depth': value 4294968320 is out of range", "from 1 to 16384"]),
        ("soak", {"target": ["engine"], "producers": [4294967300]},
         ["parameter 'producers': value 4294967300 is out of range", "from 1 to 64"]),
        ("proxy_one_op", {"capacity": [1000]},
         ["parameter 'capacity': value 1000 is not a power of two"]),
        # A parameter of one transport given on another's point.
        ("kernel_cost", {"transport": ["mini-gda"], "workers": [2]},
         ["parameter 'workers' applies to transport mini-proxy only, not to mini-gda"]),
    ],
)  # fmt: skip
def test_bad_sweep_values_are_refused_at_load(tmp_path, name, block, expected):
    with pytest.raises(ConfigError) as err:
        load_experiment(with_sweep(tmp_path, name, block))
    for fragment in expected:
        assert fragment in str(err.value), (fragment, str(err.value))


def test_reduced_sweep_and_needs_when_are_checked_too(tmp_path: Path):
    src = yaml.safe_load((REPO / "config/experiments/gda_one_op.yaml").read_text())
    src["reduced"] = {"payload": ["inlin"]}
    p = tmp_path / "gda_one_op.yaml"
    p.write_text(yaml.safe_dump(src))
    with pytest.raises(ConfigError, match="'reduced': parameter 'payload': value 'inlin'"):
        load_experiment(p)
    src = yaml.safe_load((REPO / "config/experiments/gda_one_op.yaml").read_text())
    src["needs_when"][0]["when"] = {"nic_backend": "softnic-gpuu"}
    p.write_text(yaml.safe_dump(src))
    with pytest.raises(ConfigError, match="'needs_when': parameter 'nic_backend'"):
        load_experiment(p)


@pytest.mark.parametrize(
    ("declaration", "expected"),
    [
        ({"qps": {"type": "integer", "min": 1, "max": 8, "default": 9, "doc": "x"}},
         "'params.qps': the default: parameter 'qps': value 9 is out of range"),
        ({"qps": {"min": 1, "doc": "x"}}, "'params.qps': 'type' is missing"),
        ({"mode": {"type": "integer", "values": ["a"], "doc": "x"}},
         "value 'a' in 'values' is not of type integer"),
        ({"nic_backend": {"values": ["softnic-cpu", "rdma"], "doc": "x"}},
         "declare the allowed nic_backend values; 'rdma'"),
        ({"rate": {"type": "number", "pow2": True, "doc": "x"}}, "'pow2' applies to integers only"),
    ],
)  # fmt: skip
def test_declarations_are_checked(tmp_path: Path, declaration: dict, expected: str):
    src = yaml.safe_load((REPO / "config/experiments/timer_selfcheck.yaml").read_text())
    src["params"].update(declaration)
    p = tmp_path / "timer_selfcheck.yaml"
    p.write_text(yaml.safe_dump(src))
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load_experiment(p)


def test_params_or_params_of_exactly_once(tmp_path: Path):
    src = yaml.safe_load((REPO / "config/experiments/timer_selfcheck.yaml").read_text())
    p = tmp_path / "timer_selfcheck.yaml"
    p.write_text(yaml.safe_dump({**src, "params_of": "one_op"}))
    with pytest.raises(ConfigError, match="under 'params', or name the experiment"):
        load_experiment(p)
    del src["params"]
    p.write_text(yaml.safe_dump({**src, "params_of": "no_such"}))
    with pytest.raises(ConfigError, match="'params_of': no experiment 'no_such'"):
        load_experiment(p)


def test_every_experiment_declares_what_its_sweeps_use():
    for path in sorted((REPO / "config/experiments").glob("*.yaml")):
        e = load_experiment(path)
        assert "transport" in e.params, e.name
        for p in e.points() + e.points("reduced"):
            assert set(p.params) <= set(e.params), (e.name, p.params)


def test_points_resolve_transport_and_backend_from_the_declarations():
    goodput = load_experiment(REPO / "config/experiments/goodput.yaml")
    # Points that name no NIC backend get their transport's default; swept ones keep theirs.
    by_transport = {
        p.transport: p.nic_backend for p in goodput.points() if "nic_backend" not in p.params
    }
    assert by_transport == {"mini-gda": "softnic-gpu", "mini-proxy": "softnic-cpu"}
    swept = {p.nic_backend for p in goodput.points() if "nic_backend" in p.params}
    assert swept == {"softnic-gpu-same"}
    timer = load_experiment(REPO / "config/experiments/timer_selfcheck.yaml").points()[0]
    assert (timer.transport, timer.nic_backend) == ("none", "none")
    engine = load_experiment(REPO / "config/experiments/engine_ceiling.yaml").points()[0]
    assert (engine.transport, engine.nic_backend) == ("softnic", None)  # derived from `engine`


def test_points_file_line_carries_transport_and_backend_beside_the_params():
    e = load_experiment(REPO / "config/experiments/one_op.yaml")
    p = e.points()[0]
    line = json.loads(p.line())
    assert line == {
        "point_id": p.point_id,
        "transport": "mini-gda",
        "nic_backend": p.params["nic_backend"],
        "params": {k: v for k, v in p.params.items() if k not in ("transport", "nic_backend")},
    }
    assert "transport" not in p.driver_params and "nic_backend" not in p.driver_params


def test_vocabulary_is_the_one_list():
    assert "mini-gda" in transports() and "softnic-gpu-same" in nic_backends()
    assert default_nic_backend("mini-proxy") == "softnic-cpu"
    # The record schema's backends are vocabulary names (no list of its own beyond them).
    assert set(load_schema("record")["properties"]["nic_backend"]["enum"]) <= set(nic_backends())
    with pytest.raises(ConfigError, match=r"x\.def:2: default backend 'nope' is not declared"):
        parse('GICOMM_NIC_BACKEND(a, "a", "x")\nGICOMM_TRANSPORT(t, "t", nope, "y")\n', "x.def")
    with pytest.raises(ConfigError, match=r"x\.def:1: not a GICOMM_NIC_BACKEND"):
        parse("GICOMM_BACKEND(a)\n", "x.def")
