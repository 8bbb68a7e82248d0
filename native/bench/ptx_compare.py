#!/usr/bin/env python3
"""Prove on a machine without a GPU that a refactor left the timed kernels alone: emit the PTX of
every CUDA source of a build with the build's own flags, then compare two builds' kernels by name
(demangled, namespaces and position-dependent numbering left out).

  ptx_compare.py emit BUILD_DIR OUT_DIR       (BUILD_DIR configured with
                                               -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
  ptx_compare.py compare BEFORE_DIR AFTER_DIR [--same OLD=NEW ...]

`--same GdaTarget=Target` treats a renamed type as the same. The comparison ignores .loc/.file
lines, comments and debug sections; exit 1 when a kernel differs or is missing."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

_ENTRY = re.compile(r"\s*(?:\.visible\s+|\.weak\s+)?(\.entry|\.func)\s+(?:\([^)]*\)\s*)?(\w+)")


def emit(build: Path, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for c in json.loads((build / "compile_commands.json").read_text()):
        src = Path(c["file"])
        if src.suffix != ".cu":
            continue
        args, skip = [], False
        for a in shlex.split(c["command"]):
            if skip or a in ("-c", "-MD"):
                skip = False
                continue
            if a in ("-o", "-x", "-MF"):
                skip = True
                continue
            if not a.startswith(("--generate-code", "-gencode")):
                args.append(a)
        target = out / f"{src.parent.name}__{src.name}.ptx"
        cmd = [*args, "-x", "cu", "-arch=compute_90", "-ptx", "-o", str(target)]
        r = subprocess.run(cmd, cwd=c["directory"], capture_output=True, text=True, check=False)
        print(
            ("ok   " if r.returncode == 0 else "FAIL ") + str(target),
            r.stderr[-2000:] if r.returncode else "",
        )
        failed += r.returncode != 0
    return 1 if failed else 0


def functions(path: Path) -> dict[str, str]:
    text = re.sub(r"\.section\s+\.debug.*?\n\s*\}", "", path.read_text(), flags=re.S)
    lines = [
        ln for ln in text.split("\n") if ln.strip() and not re.match(r"\s*(\.loc|\.file|//)", ln)
    ]
    items: dict[str, str] = {}
    name, body, depth = None, [], 0
    for ln in lines:
        m = _ENTRY.match(ln)
        if depth == 0 and m:
            name, body = m.group(2), []
        if name is not None:
            body.append(ln)
            depth += ln.count("{") - ln.count("}")
            if depth == 0 and "}" in ln:
                items[name] = "\n".join(body)
                name = None
    return items


def demangled(names: list[str]) -> dict[str, str]:
    out = subprocess.run(
        ["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True
    )
    return dict(zip(names, out.stdout.split("\n"), strict=False))


def kernels(folder: Path, same: dict[str, str]) -> dict[str, set[str]]:
    raw = {n: body for p in sorted(folder.glob("*.ptx")) for n, body in functions(p).items()}
    names = demangled(list(raw))

    def canon(mangled: str) -> str:
        d = re.sub(r"\(anonymous namespace\)::|\b[A-Za-z_]\w*::", "", names.get(mangled, mangled))
        for old, new in same.items():
            d = d.replace(old, new)
        return d.replace(" ", "")

    def normalize(body: str) -> str:
        body = re.sub(
            r"\b(_Z\w+?)(_param_\d+)?\b",
            lambda m: canon(m[1]) + (m[2] or "") if m[1] in names else m[0],
            body,
        )
        body = re.sub(r"\.(visible|weak)\s+", "", body)
        body = re.sub(
            r"\$L__BB\d+_", "$L__BB_", body
        )  # numbered by the function's place in its file
        body = re.sub(r"__local_depot\d+", "__local_depot", body)
        body = re.sub(r"_GLOBAL__N__[0-9a-f]+_", "_GLOBAL__N__", body)  # source path hash
        return re.sub(r"callseq \d+(, \d+)?", "callseq", body)

    out: dict[str, set[str]] = {}
    for n, body in raw.items():
        out.setdefault(canon(n), set()).add(normalize(body))
    return out


def compare(before: Path, after: Path, same: dict[str, str]) -> int:
    b, a = kernels(before, same), kernels(after, same)
    bad = 0
    for key in sorted(set(b) | set(a)):
        if key not in a or key not in b:
            print(("only before: " if key in b else "only after:  ") + key)
            bad += key in b
        elif a[key] != b[key]:
            print("different:   " + key)
            bad += 1
    same_count = sum(1 for k in b if k in a and a[k] == b[k])
    print(f"{same_count} kernels and functions identical, {bad} differ or are gone")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("emit")
    e.add_argument("build", type=Path)
    e.add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--same", action="append", default=[], help="OLD=NEW: a renamed type")
    args = ap.parse_args()
    if args.cmd == "emit":
        return emit(args.build, args.out)
    return compare(args.before, args.after, dict(s.split("=", 1) for s in args.same))


if __name__ == "__main__":
    sys.exit(main())
