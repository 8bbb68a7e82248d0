#!/usr/bin/env python3
"""Checks every PRM offset, width, opcode and status of gicomm/mlx5dev/prm.h (what the DEVX backend
writes and the emulated device parses) against the Linux kernel's include/linux/mlx5/mlx5_ifc.h and
mlx5/device.h, taken at test time from Debian's linux-headers-<abi>-common package (apt-get download
and dpkg-deb, cached outside the repository; never committed).

- fields the kernel names: compiled against the header, offsetof/sizeof of struct mlx5_ifc_*_bits
  (one u8 per bit) must equal our offset and width;
- DEVX-only fields (umem ids and offsets, named by rdma-core's own mlx5_ifc.h): must lie inside
  reserved bits of the kernel's struct;
- opcodes and enum values: compiled against the header; command statuses: read from device.h.

Exit 0: all match. 1: a mismatch (listed). 77: the header could not be obtained (said plainly;
ctest reports the test as not run, never as passed).
Environment: GICOMM_MLX5_IFC_PACKAGE (default: the newest linux-headers-*-common apt knows),
GICOMM_MLX5_IFC_CACHE (default: $XDG_CACHE_HOME/gicomm/mlx5_ifc or ~/.cache/gicomm/mlx5_ifc).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HEADERS = ("mlx5_ifc.h", "mlx5_ifc_fpga.h", "device.h")


def not_run(why: str) -> None:
    print(f"check_prm_layout: NOT RUN: {why}")
    sys.exit(77)


def version_key(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def pick_package() -> str:
    wanted = os.environ.get("GICOMM_MLX5_IFC_PACKAGE")
    if wanted:
        return wanted
    if shutil.which("apt-cache") is None:
        not_run("apt-cache is not available to find a linux-headers-*-common package")
    out = subprocess.run(
        ["apt-cache", "search", "--names-only", r"^linux-headers-.*-common$"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    ).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    if not names:
        not_run("apt knows no linux-headers-*-common package (run apt-get update?)")
    return max(names, key=version_key)


def fetch_headers(pkg: str, cache: Path) -> Path:
    root = cache / pkg
    found = {h: next(iter(root.rglob(h)), None) for h in HEADERS} if root.exists() else {}
    if all(found.get(h) for h in HEADERS):
        return found["mlx5_ifc.h"].parent.parent.parent  # the include/ directory
    cache.mkdir(parents=True, exist_ok=True)
    debs = sorted(cache.glob(f"{pkg}_*.deb"))
    if not debs:
        if shutil.which("apt-get") is None:
            not_run("apt-get is not available to download " + pkg)
        r = subprocess.run(
            ["apt-get", "download", pkg],
            cwd=cache,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        debs = sorted(cache.glob(f"{pkg}_*.deb"))
        if r.returncode != 0 or not debs:
            not_run(f"apt-get download {pkg} failed: {(r.stderr or r.stdout).strip()[-300:]}")
    root.mkdir(parents=True, exist_ok=True)
    members = [f"*/include/linux/mlx5/{h}" for h in HEADERS]
    tar = subprocess.run(
        f"dpkg-deb --fsys-tarfile '{debs[-1]}' | tar -x -C '{root}' --wildcards "
        + " ".join(f"'{m}'" for m in members),
        shell=True,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    ifc = next(iter(root.rglob("mlx5_ifc.h")), None)
    if tar.returncode != 0 or ifc is None:
        why = tar.stderr.strip()[-200:]
        not_run(f"{debs[-1].name} has no include/linux/mlx5/mlx5_ifc.h ({why})")
    return ifc.parent.parent.parent


def struct_layout(src: str, name: str) -> list[tuple[str, int, int]]:
    """Top-level members of struct mlx5_ifc_<name>_bits: (member, bit offset, bits)."""
    m = re.search(rf"struct mlx5_ifc_{re.escape(name)}_bits \{{(.*?)\n\}};", src, re.S)
    if m is None:
        raise KeyError(name)
    out, off = [], 0
    for line in m.group(1).splitlines():
        line = line.strip()
        a = re.match(r"u8\s+(\w+)(?:\[(\w+)\])?\[(0x[0-9a-fA-F]+|\d+)\];", line)
        s = re.match(r"(?:struct|union) mlx5_ifc_(\w+)_bits\s+(\w+);", line)
        if a:
            width = int(a.group(3), 0) * (int(a.group(2), 0) if a.group(2) else 1)
        elif s:
            width = sum(w for _, _, w in struct_layout(src, s.group(1)))
            if line.startswith("union"):
                width = max_union(src, s.group(1))
        else:
            continue
        out.append((a.group(1) if a else s.group(2), off, width))
        off += width
    return out


def max_union(src: str, name: str) -> int:
    m = re.search(rf"union mlx5_ifc_{re.escape(name)}_bits \{{(.*?)\n\}};", src, re.S)
    best = 0
    for line in (m.group(1) if m else "").splitlines():
        a = re.match(r"\s*u8\s+\w+\[(0x[0-9a-fA-F]+|\d+)\];", line)
        s = re.match(r"\s*struct mlx5_ifc_(\w+)_bits\s+\w+;", line)
        if a:
            best = max(best, int(a.group(1), 0))
        elif s:
            best = max(best, sum(w for _, _, w in struct_layout(src, s.group(1))))
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", required=True, help="the prm_table program (prints our table)")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    args = ap.parse_args()
    table = subprocess.run([args.table], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in table.splitlines() if line.strip()]
    xdg = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    cache = Path(os.environ.get("GICOMM_MLX5_IFC_CACHE") or xdg / "gicomm" / "mlx5_ifc")
    pkg = pick_package()
    include = fetch_headers(pkg, cache)
    ifc = (include / "linux/mlx5/mlx5_ifc.h").read_text()
    device_h = (include / "linux/mlx5/device.h").read_text()

    body = []
    for r in rows:
        if r[0] == "field":
            body.append(f"  FIELD({r[1]}, {r[2]}, {int(r[3])}u, {int(r[4])}u);")
        elif r[0] == "const":
            body.append(f"  CONSTANT({r[1]}, {int(r[2])}u);")
    shims = Path(__file__).with_name("prm_check_shims.h")
    code = f'#include "{shims}"\nint main(void) {{\n' + "\n".join(body) + "\n  return bad;\n}\n"
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        c = Path(tmp) / "prm_check.c"
        exe = Path(tmp) / "prm_check"
        c.write_text(code)
        comp = subprocess.run(
            [args.cc, "-std=gnu11", "-w", f"-I{include}", str(c), "-o", str(exe)],
            capture_output=True,
            text=True,
            check=False,
        )
        if comp.returncode != 0:
            failures.append(
                "the check does not compile against the header (a field or constant the kernel"
                " does not name?):\n" + comp.stderr[-3000:]
            )
        else:
            run = subprocess.run([str(exe)], capture_output=True, text=True, check=False)
            failures += [line for line in run.stdout.splitlines() if line.startswith("MISMATCH")]

    devx = [r for r in rows if r[0] == "devx"]
    for _, struct, field, off_s, bits_s in devx:
        off, bits = int(off_s), int(bits_s)
        try:
            layout = struct_layout(ifc, struct)
        except KeyError:
            failures.append(f"DEVX field {struct}.{field}: no struct mlx5_ifc_{struct}_bits")
            continue
        named = [m for m, o, w in layout if o < off + bits and off < o + w]
        if any(m == field for m in named):
            failures.append(
                f"DEVX field {struct}.{field} is named by the kernel now: check it as a field"
            )
        elif not named or any(not m.startswith("reserved") for m in named):
            failures.append(f"DEVX field {struct}.{field} at 0x{off:x}/{bits} overlaps {named}")

    statuses = [r for r in rows if r[0] == "status"]
    for _, name, value in statuses:
        m = re.search(rf"\b{re.escape(name)}\s*=\s*(0x[0-9a-fA-F]+|\d+)", device_h)
        if m is None:
            failures.append(f"status {name}: not in mlx5/device.h")
        elif int(m.group(1), 0) != int(value):
            failures.append(f"status {name}: ours 0x{int(value):x}, kernel {m.group(1)}")

    nfield = sum(1 for r in rows if r[0] == "field")
    nconst = sum(1 for r in rows if r[0] == "const")
    print(
        f"check_prm_layout: {pkg} ({include / 'linux/mlx5/mlx5_ifc.h'}): {nfield} fields, "
        f"{nconst} constants, {len(statuses)} statuses compared; {len(devx)} DEVX-only fields "
        "checked to lie in reserved bits"
    )
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("check_prm_layout: ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
