"""The native drivers refuse what they cannot measure as asked, naming the parameter: hostile
numbers (too large for their integers, fractional, boolean, text), unknown names and values, text
that is not UTF-8; valid Unicode round-trips; and the engine measures the rounds --warmup and
--iters ask for. Run on the host-only drivers (engine_ceiling on the cpu engine, the soak)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import current_build_with

COMMON = ["--campaign", "c", "--host", "h", "--platform", "local", "--provenance-id", "p"]


@pytest.fixture(scope="module")
def bins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {
        name: current_build_with(tmp_path_factory, f"gicomm-bench-{name}") / "bin" / f"gicomm-bench-{name}"
        for name in ("engine", "soak")
    }  # fmt: skip


def run(
    binary: Path, tmp: Path, experiment: str, points: list[str], *flags: str
) -> tuple[int, str, list]:
    pts, out = tmp / "points.jsonl", tmp / "out.jsonl"
    pts.write_bytes(b"".join(p.encode("utf-8", "surrogateescape") + b"\n" for p in points))
    out.unlink(missing_ok=True)
    proc = subprocess.run(
        [str(binary), "--experiment", experiment, "--points", str(pts), "--out", str(out), *COMMON, *flags],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    raw = out.read_bytes() if out.exists() else b""
    records = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    return proc.returncode, proc.stderr.decode("utf-8", "replace"), records


def point(params: dict, pid: str = "p1") -> str:
    return json.dumps({"point_id": pid, "params": params})


ENGINE = {"engine": "cpu", "qps": 2, "depth": 64}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # Truncated or wrapped by integer casts until now, and recorded ok under the value asked for.
        ({"qps": 4294967312}, "parameter 'qps': value 4294967312 is out of range; allowed: an integer from 1 to 4096"),
        ({"depth": 4294968320}, "parameter 'depth': value 4294968320 is out of range"),
        ({"qps": 16.7}, "parameter 'qps': value 16.7 has the wrong type"),
        ({"qps": True}, "parameter 'qps': value true has the wrong type"),
        ({"qps": "abc"}, "parameter 'qps': value 'abc' has the wrong type"),  # never a bare "stoll"
        # Measured at a default, or as another value, until now.
        ({"thread": 8}, "unknown parameter 'thread'; allowed: depth, engine, engine_warps_per_block"),
        ({"payload": "inlin"}, "parameter 'payload': value 'inlin' is not allowed; allowed: 'inline', 'pointer'"),
    ],
)  # fmt: skip
def test_engine_refuses_bad_parameters_by_name(bins, tmp_path, change, expected):
    rc, err, recs = run(bins["engine"], tmp_path, "engine_ceiling", [point({**ENGINE, **change})])
    assert rc == 0, err
    (r,) = recs
    assert (
        r["status"] == "failed"
        and r["error"] == "bad parameter: " + expected
        or expected in r["error"]
    ), r
    assert "stoll" not in r["error"]


def test_soak_refuses_a_producer_count_that_would_wrap(bins, tmp_path):
    soak = {"target": "engine", "duration_s": 1, "producers": 4294967300}
    rc, err, recs = run(bins["soak"], tmp_path, "soak", [point(soak)])
    assert rc == 0, err
    (r,) = recs
    assert r["status"] == "failed"
    assert (
        "parameter 'producers': value 4294967300 is out of range; allowed: an integer from 1 to 64"
        in r["error"]
    )


def test_valid_unicode_round_trips_and_invalid_utf8_is_refused_with_the_key(bins, tmp_path):
    # An emoji (\ud83d\ude80 in the points file) where no such parameter exists: refused by name,
    # and the record that says so is UTF-8 with the emoji intact.
    rc, err, recs = run(bins["engine"], tmp_path, "engine_ceiling", ['{"point_id": "u", "params": {"engine": "cpu", "label": "\\ud83d\\ude80"}}'])  # fmt: skip
    assert rc == 0, err
    assert "unknown parameter 'label'" in recs[0]["error"]
    rc, err, recs = run(
        bins["engine"], tmp_path, "engine_ceiling", [point({**ENGINE, "payload": "\U0001f680"})]
    )
    assert "value '\U0001f680' is not allowed" in recs[0]["error"]
    # Bytes that are not UTF-8: the whole file is refused, naming the line and the key, and nothing
    # is written.
    bad = '{"point_id": "b", "params": {"engine": "cpu", "label": "\udcf0\udc9f\udc9a"}}'
    rc, err, recs = run(bins["engine"], tmp_path, "engine_ceiling", [point(ENGINE, "a"), bad])
    assert rc == 2 and recs == []
    assert "points.jsonl:2: text that is not valid UTF-8 in the value of 'label'" in err
    # The same for the command line: every value must be UTF-8 (the host is in every record).
    host = COMMON.index("--host") + 1
    args = [
        str(bins["engine"]),
        "--experiment",
        "engine_ceiling",
        "--param",
        "engine=cpu",
        "--out",
        str(tmp_path / "o.jsonl"),
    ]
    flags = [a.encode() for a in COMMON]
    flags[host] = b"h\xff"
    proc = subprocess.run([a.encode() for a in args] + flags, capture_output=True, check=False)
    assert proc.returncode == 2 and b"--host: the value is not valid UTF-8" in proc.stderr
    host_name = "h\u00e9-\U0001f680"
    proc = subprocess.run(
        [*args[:-1], str(tmp_path / "ok.jsonl"), *COMMON[:host], host_name, *COMMON[host + 1 :],
         "--param", "qps=1", "--param", "depth=16", "--iters", "1"],
        capture_output=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "ok.jsonl").read_text(encoding="utf-8"))["host"] == host_name


@pytest.mark.parametrize(("warmup", "iters"), [(2, 3), (0, 1)])
def test_engine_measures_the_rounds_asked_for(bins, tmp_path, warmup, iters):
    rc, err, recs = run(
        bins["engine"],
        tmp_path,
        "engine_ceiling",
        [point(ENGINE)],
        "--warmup",
        str(warmup),
        "--iters",
        str(iters),
    )
    assert rc == 0, err
    (r,) = recs
    assert r["status"] == "ok" and r["stats"]["n"] == iters, r


def test_records_carry_transport_and_backend_beside_the_params(bins, tmp_path):
    line = json.dumps({"point_id": "t", "transport": "softnic", "params": ENGINE})
    rc, err, recs = run(bins["engine"], tmp_path, "engine_ceiling", [line], "--iters", "1")
    assert rc == 0, err
    (r,) = recs
    assert (r["transport"], r["nic_backend"]) == ("softnic", "softnic-cpu")
    assert r["params"] == ENGINE
