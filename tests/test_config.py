"""The campaign config is validated at load: every bad key or value names the key, the value and
what is allowed, before any job runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from gicomm.config import load_campaign, load_campaign_file
from gicomm.errors import ConfigError
from gicomm.experiments import expand_sweep, load_experiment


def default_config() -> dict:
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def test_default_config_loads_with_every_experiment():
    c = load_campaign(default_config())
    assert c.name == "local" and c.platform == "local"
    on_disk = [load_experiment(p) for p in (REPO / "config" / "experiments").glob("*.yaml")]
    assert sorted(c.experiments) == sorted(e.name for e in on_disk if not e.opt_in)
    assert c.native["cuda_archs"] == "90;100"
    assert c.timeouts["wait_ms"] == 2000


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"sweeep": "full"}, ["unknown key(s) 'sweeep'", "allowed:", "sweep"]),
        ({"sweep": "ful"}, ["'sweep'", "'ful'", "allowed: 'full', 'reduced'"]),
        ({"runs": 0}, ["'runs'", "0", "out of range", "minimum 1"]),
        ({"runs": "three"}, ["'runs'", "'three'", "wrong type"]),
        ({"native": {"cuda_archs": "sm90"}}, ["'native.cuda_archs'", "'sm90'", "pattern"]),
        ({"native": {"bogus": 1}}, ["unknown key(s) 'bogus' under 'native'", "cuda_archs"]),
        ({"timeouts": {"wait_ms": -5}}, ["'timeouts.wait_ms'", "-5", "out of range"]),
        ({"experiments": ["one_op", "nope"]}, ["'experiments'", "'nope'", "allowed: all"]),
        ({"experiments": "some"}, ["'experiments'", "'some'", "'all' or a list"]),
        ({"platform": "h900"}, ["'platform'", "'h900'", "allowed:", "local"]),
        ({"campaign": "archive"}, ["'campaign'", "'archive'", "reserved"]),
        ({"campaign": "a b"}, ["'campaign'", "'a b'", "pattern"]),
        ({"report": {"archived": ["no-such-campaign"]}}, ["report.archived", "no-such-campaign"]),
    ],
)
def test_bad_config_names_key_value_and_allowed(change, expected):
    cfg = default_config()
    cfg.update(change)
    with pytest.raises(ConfigError) as err:
        load_campaign(cfg)
    for fragment in expected:
        assert fragment in str(err.value), (fragment, str(err.value))


def test_missing_required_key():
    cfg = default_config()
    del cfg["platform"]
    with pytest.raises(ConfigError, match="'platform' is a required property"):
        load_campaign(cfg)


def test_malformed_yaml_names_file_and_line(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("campaign: x\nplatform: local\nnative:\n  cuda_archs: [90\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+:\d+: malformed YAML"):
        load_campaign_file(bad)


def test_experiment_name_must_match_file(tmp_path: Path):
    src = yaml.safe_load((REPO / "config/experiments/one_op.yaml").read_text())
    p = tmp_path / "other.yaml"
    p.write_text(yaml.safe_dump(src))
    with pytest.raises(ConfigError, match="must equal the file name 'other'"):
        load_experiment(p)


def test_experiment_reduced_sweep_must_use_swept_params(tmp_path: Path):
    src = yaml.safe_load((REPO / "config/experiments/one_op.yaml").read_text())
    src["reduced"] = {"threads": [1]}
    p = tmp_path / "one_op.yaml"
    p.write_text(yaml.safe_dump(src))
    with pytest.raises(
        ConfigError, match="'reduced': parameter\\(s\\) 'threads' are not in 'sweep'"
    ):
        load_experiment(p)


def test_sweep_expansion_is_cartesian_and_ids_stable():
    pts = expand_sweep("e", {"a": [1, 2], "b": ["x", "y", "z"]})
    assert [p.params for p in pts][:3] == [
        {"a": 1, "b": "x"},
        {"a": 1, "b": "y"},
        {"a": 1, "b": "z"},
    ]
    assert len({p.point_id for p in pts}) == 6
    assert expand_sweep("e", {"a": [1], "b": ["x"]})[0].point_id == pts[0].point_id
    assert expand_sweep("f", {"a": [1], "b": ["x"]})[0].point_id != pts[0].point_id


def test_needs_when_adds_needs_for_matching_points():
    e = load_experiment(REPO / "config/experiments/one_op.yaml")
    by_backend = {p.params["nic_backend"]: e.needs_of(p) for p in e.points()}
    assert by_backend["softnic-gpu"]["gpus"] == 2 and by_backend["softnic-gpu"]["nvlink_peers"]
    assert by_backend["softnic-cpu"]["gpus"] == 1
    engine = load_experiment(REPO / "config/experiments/engine_ceiling.yaml")
    by_engine = {p.params["engine"]: engine.needs_of(p) for p in engine.points()}
    assert by_engine["cpu"]["gpus"] == 0 and not by_engine["cpu"].get("cuda_build")
    assert by_engine["gpu"]["gpus"] == 2 and by_engine["gpu"]["cuda_build"] is True


def test_snakemake_refuses_bad_config_before_any_job(tmp_path: Path):
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--config", "sweep=ful"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert (
        "'sweep': value 'ful' is not allowed; allowed: 'full', 'reduced'" in out.stderr + out.stdout
    )
    assert "rule bench_batch" not in out.stdout


def test_sweep_of_blocks_joins_products_and_reduced_overrides_each_block(tmp_path: Path):
    src = yaml.safe_load((REPO / "config/experiments/one_op.yaml").read_text())
    src["sweep"] = [
        {
            "transport": ["mini-gda"],
            "nic_backend": ["softnic-cpu"],
            "payload": ["inline", "pointer"],
        },
        {
            "transport": ["mini-gda"],
            "nic_backend": ["softnic-gpu"],
            "payload": ["inline"],
            "variant": ["none", "sys_fence"],
        },
    ]
    src["reduced"] = {"payload": ["inline"]}
    src.pop("figure", None)
    p = tmp_path / "one_op.yaml"
    p.write_text(yaml.safe_dump(src, sort_keys=False))
    e = load_experiment(p)
    assert [pt.params for pt in e.points()] == [
        {"transport": "mini-gda", "nic_backend": "softnic-cpu", "payload": "inline"},
        {"transport": "mini-gda", "nic_backend": "softnic-cpu", "payload": "pointer"},
        {
            "transport": "mini-gda",
            "nic_backend": "softnic-gpu",
            "payload": "inline",
            "variant": "none",
        },
        {
            "transport": "mini-gda",
            "nic_backend": "softnic-gpu",
            "payload": "inline",
            "variant": "sys_fence",
        },
    ]
    assert len(e.points("reduced")) == 3
    assert e.swept == ["transport", "nic_backend", "payload", "variant"]


def test_cuda_build_modes():
    from gicomm.build import want_cuda

    assert want_cuda("auto", 2) and not want_cuda("auto", 0)
    assert want_cuda("on", 0) and not want_cuda("off", 8)


def test_opt_in_experiments_run_only_when_named(tmp_path: Path):
    import shutil

    cfg_dir = tmp_path / "config"
    shutil.copytree(REPO / "config", cfg_dir)
    src = yaml.safe_load((cfg_dir / "experiments/one_op.yaml").read_text())
    src.update(name="long_soak", opt_in=True)
    (cfg_dir / "experiments/long_soak.yaml").write_text(yaml.safe_dump(src))
    assert "long_soak" not in load_campaign(default_config(), config_dir=cfg_dir).experiments
    named = {**default_config(), "experiments": ["long_soak"]}
    assert list(load_campaign(named, config_dir=cfg_dir).experiments) == ["long_soak"]


@pytest.mark.parametrize(("key", "value"), [("transport", "mini-gdaa"), ("nic_backend", "softnic")])
def test_unknown_transport_or_backend_is_refused(tmp_path: Path, key: str, value: str):
    src = yaml.safe_load((REPO / "config/experiments/one_op.yaml").read_text())
    src["sweep"][key] = [value]
    p = tmp_path / "one_op.yaml"
    p.write_text(yaml.safe_dump(src))
    with pytest.raises(
        ConfigError, match=f"parameter '{key}': value '{value}' is not allowed; allowed:"
    ):
        load_experiment(p)


# ---- what config loading refuses, and how it says so ---------------------------------------------
def billion_laughs(key: str) -> str:
    """A config whose `key` expands to 9**9 strings through aliases (a few hundred bytes)."""
    text = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        text += f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]\n"
    return f"campaign: bomb\nplatform: local\n{text}{key}: *i\n"


def run_in_subprocess(code: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=timeout,
        env={"PYTHONPATH": str(REPO / "workflow")},
    )  # fmt: skip


def test_a_yaml_alias_bomb_is_refused_in_well_under_a_second(tmp_path: Path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs("experiments"))
    code = (
        "import time; from gicomm.config import load_campaign_file; t = time.monotonic()\n"
        f"try: load_campaign_file({str(bomb)!r})\n"
        "except Exception as e: print(type(e).__name__, e)\n"
        "print('seconds', time.monotonic() - t)"
    )
    out = run_in_subprocess(code, timeout=20)  # the old loader ran for minutes into MemoryError
    assert out.stdout.startswith("ConfigError "), out.stdout + out.stderr
    assert "bomb.yaml:" in out.stdout and "through YAML aliases" in out.stdout
    assert float(out.stdout.split("seconds")[1]) < 0.5


def test_a_shared_value_of_a_reasonable_size_is_fine(tmp_path: Path):
    p = tmp_path / "shared.yaml"
    p.write_text("campaign: x\nplatform: local\nnative: &n {cuda: 'off'}\n")
    assert load_campaign_file(p).native["cuda"] == "off"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("campaign: x\nplatform: local\nexperiments: [engine_ceiling]\nexperiments: [soak]\n",
         "dup.yaml:4:1: key 'experiments' appears twice in one mapping (first at line 3)"),
        ("campaign: x\nplatform: local\nnative:\n  cuda: 'off'\n  cuda: 'on'\n",
         "dup.yaml:5:3: key 'cuda' appears twice"),
        ('{"campaign": "x",\n "platform": "local",\n "campaign": "y"}\n',
         "dup.yaml:3:2: key 'campaign' appears twice"),
    ],
)  # fmt: skip
def test_a_key_given_twice_is_refused_with_file_and_line(tmp_path: Path, text: str, where: str):
    p = tmp_path / "dup.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_campaign_file(p)
    assert where in str(err.value)


def test_campaign_names_have_a_length_limit():
    with pytest.raises(
        ConfigError, match=r"'campaign': value '.*\.\.\.' is too long \(maxLength 64\)"
    ):
        load_campaign({**default_config(), "campaign": "c" * 300})
    assert load_campaign({**default_config(), "campaign": "c" * 64}).name == "c" * 64


def test_nested_command_line_values_are_typed_by_the_schema():
    """snakemake --config 'timeouts={"wait_ms": 1}' hands the workflow {"wait_ms": "1"}."""
    cli = {
        "timeouts": {"wait_ms": "1", "point_s": "30"},
        "native": {"cuda": "off", "build_jobs": "4"},
    }
    c = load_campaign({**default_config(), **cli}, command_line=cli)
    assert c.timeouts == {"wait_ms": 1, "point_s": 30}
    assert c.native["build_jobs"] == 4 and c.native["cuda"] == "off"
    # A string in a config file stays a string, and is refused as one.
    with pytest.raises(ConfigError, match="'timeouts.wait_ms': value '1' has the wrong type"):
        load_campaign({**default_config(), "timeouts": {"wait_ms": "1"}})
    with pytest.raises(ConfigError, match="'timeouts.wait_ms': value 'soon' has the wrong type"):
        load_campaign(
            {**default_config(), **cli, "timeouts": {"wait_ms": "soon"}}, command_line=cli
        )


def snakemake_dry(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_snakemake_takes_nested_integers_from_the_command_line():
    out = snakemake_dry("--config", 'timeouts={"wait_ms": 1}', "report={archived: []}")
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("campaign: x\nplatform: local\ncampaign: y\n",
         "cfg.yaml:3:1: key 'campaign' appears twice in one mapping (first at line 1)"),
        (billion_laughs("experiments"), "through YAML aliases"),
        ("campaign: " + "c" * 300 + "\nplatform: local\n", "is too long (maxLength 64)"),
    ],
)  # fmt: skip
def test_snakemake_refuses_a_bad_configfile_in_one_line(tmp_path: Path, text: str, message: str):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(text)
    out = snakemake_dry("--configfile", str(cfg))
    assert out.returncode != 0
    said = out.stdout + out.stderr
    assert message in said, said[-2000:]
    assert "Traceback" not in said


def test_a_results_folder_that_is_a_file_is_refused_in_one_line(tmp_path: Path):
    (tmp_path / "results").write_text("not a folder\n")
    out = snakemake_dry("-s", str(REPO / "Snakefile"), "--configfile", str(REPO / "config/config.yaml"),
                        "--config", "report={archived: []}", cwd=tmp_path)  # fmt: skip
    assert out.returncode != 0
    said = out.stdout + out.stderr
    assert "results is a file, but campaign local writes its results into a folder" in said
    assert "Traceback" not in said


def test_a_malformed_default_config_is_named_with_file_and_line(tmp_path: Path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text("campaign: x\nplatform: local\nnative: {cuda: [\n")
    out = snakemake_dry("-s", str(REPO / "Snakefile"), cwd=tmp_path)
    said = out.stdout + out.stderr
    assert out.returncode != 0
    assert "config/config.yaml:4:1: malformed YAML" in said, said[-2000:]
