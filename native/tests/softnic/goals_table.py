"""Side-by-side table of gicomm-softnic-engine-goals runs and the gpu engine's goals.

Usage: python3 goals_table.py AFTER.jsonl [BEFORE.jsonl] [--before-serial]

Reads the JSON lines of the measurement program (one run with the engine under test, optionally
one with the engine it replaces, from the same device call) and prints, per placement: the engine
ceiling and mini-gda's message rate per WQE shape with their ratio, then the three goals:
  1. every shape: ceiling >= 2x the mini-gda rate (else the point is model-NIC bound);
  2. inline 64 B message rate (16 QPs x 16 per doorbell) >= 5x the serial engine's (c6ea099, which
     sent multi-WQEBB WQEs to lane 0 one per pass): evaluated only when BEFORE is that engine
     (--before-serial); any other BEFORE is shown side by side, not as goal 2;
  3. pointer 4 KiB put+completion within 1.5x of a bare warp copy of 4 KiB on the same memory path.
Every figure is printed with the SM clock it ran at. Softnic numbers: the model NIC, not a NIC.
Exit 0 when every goal that could be evaluated is met, 1 otherwise, 2 on unreadable input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

Record = dict[str, object]
SPLIT = ("split_posted", "split_landed", "split_done")


def load(path: str) -> list[Record]:
    records: list[Record] = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.startswith("{"):
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}:{number}: not a JSON record ({e})") from e
    return records


def index(records: list[Record]) -> dict[tuple[str, str, str], Record]:
    return {
        (str(r["placement"]), str(r["measure"]), str(r["shape"])): r
        for r in records
        if "value" in r
    }


def cell(r: Record | None) -> str:
    if r is None:
        return "-"
    return f"{float(r['value']):10.2f} @{float(r['sm_clock_mhz']):.0f}"


def main(argv: list[str]) -> int:
    serial = "--before-serial" in argv
    argv = [a for a in argv if a != "--before-serial"]
    if len(argv) not in (2, 3):
        print(__doc__)
        return 2
    after = index(load(argv[1]))
    before = index(load(argv[2])) if len(argv) == 3 else {}
    failed = [r for r in load(argv[1]) if "error" in r]
    if not after:
        print(f"no measurements in {argv[1]}: nothing to evaluate")
        return 1
    met = True
    placements = sorted({k[0] for k in after})
    for pl in placements:
        print(f"== {pl} (softnic numbers; value @SM clock MHz)")
        print(
            f"{'shape':<16} {'ceiling MWQE/s':>19} {'before':>19} "
            f"{'mini-gda Mmsg/s':>19} {'before':>19} {'ceil/rate':>9}"
        )
        shapes = [k[2] for k in after if k[0] == pl and k[1] == "ceiling"]
        bound: list[str] = []
        for shape in shapes:
            ceil = after.get((pl, "ceiling", shape))
            rate = after.get((pl, "msg_rate", shape))
            ratio = ""
            if ceil is not None and rate is not None:
                x = float(ceil["value"]) / float(rate["value"])
                ratio = f"{x:8.1f}x" + ("" if x >= 2 else " model-NIC bound")
                if x < 2:
                    bound.append(shape)
            print(
                f"{shape:<16} {cell(ceil):>19} {cell(before.get((pl, 'ceiling', shape))):>19} "
                f"{cell(rate):>19} {cell(before.get((pl, 'msg_rate', shape))):>19} {ratio}"
            )
        for measure in sorted({k[1] for k in after if k[0] == pl and k[1].startswith("ceiling@")}):
            for shape in [k[2] for k in after if k[0] == pl and k[1] == measure]:
                print(
                    f"{shape + ' ' + measure:<28} {cell(after.get((pl, measure, shape))):>19} "
                    f"{cell(before.get((pl, measure, shape))):>19}  (engine only, MWQE/s)"
                )
        print(
            "goal 1 (ceiling >= 2x mini-gda rate on every shape with both):",
            "met" if not bound else "NOT met: " + ", ".join(bound),
        )
        met = met and not bound
        now = after.get((pl, "msg_rate", "inline 64 B"))
        then = before.get((pl, "msg_rate", "inline 64 B"))
        if now is not None and then is not None and serial:
            x = float(now["value"]) / float(then["value"])
            print(
                f"goal 2 (inline 64 B rate >= 5x the serial engine's): "
                f"{float(now['value']):.2f} vs {float(then['value']):.2f} Mmsg/s = {x:.1f}x "
                f"{'met' if x >= 5 else 'NOT met'}"
            )
            met = met and x >= 5
            ceil = after.get((pl, "ceiling", "inline 64 B"))
            ceil_then = before.get((pl, "ceiling", "inline 64 B"))
            if x < 5 and ceil is not None and float(ceil["value"]) >= 2 * float(now["value"]):
                # The rate no longer follows the engine: say what does, and the engines' own rates.
                print(
                    f"  the rate is mini-gda's own limit here: the engine's ceiling is "
                    f"{float(ceil['value']) / float(now['value']):.1f}x it"
                )
            if ceil is not None and ceil_then is not None:
                print(
                    f"  the engines' own inline 64 B ceilings: {float(ceil['value']):.2f} vs "
                    f"{float(ceil_then['value']):.2f} MWQE/s = "
                    f"{float(ceil['value']) / float(ceil_then['value']):.1f}x"
                )
        elif now is not None:
            print(
                f"goal 2 (inline 64 B rate >= 5x the serial engine's): not evaluated; now "
                f"{float(now['value']):.2f} Mmsg/s here. It needs the serial engine (c6ea099)"
            )
            print("  beside it in the same call: BASE=c6ea099 native/tests/softnic/device_check.sh")
        comp = after.get((pl, "completion", "pointer 4096 B"))
        small = after.get((pl, "completion", "pointer 8 B"))
        copy = after.get((pl, "warp_copy", "pointer 4096 B"))
        if comp is not None and copy is not None:
            c, w = float(comp["value"]), float(copy["value"])
            print(
                f"goal 3 (4 KiB put+completion within 1.5x of a bare warp copy): {c:.0f} ns vs "
                f"{w:.0f} ns = {c / w:.2f}x {'met' if c <= 1.5 * w else 'NOT met'}"
            )
            met = met and c <= 1.5 * w
            if small is not None:
                s = float(small["value"])
                print(
                    f"  what 4 KiB adds to an 8 B put+completion: {c - s:.0f} ns = "
                    f"{(c - s) / w:.2f}x the bare copy ({s:.0f} ns for 8 B)"
                )
        for size in ("8", "512", "4096"):
            chain = after.get((pl, "chain", f"pointer {size} B"))
            done = after.get((pl, "completion", f"pointer {size} B"))
            if chain is not None and done is not None:
                ch, d = float(chain["value"]), float(done["value"])
                print(
                    f"  the protocol's chain without the engine, {size} B: {ch:.0f} ns; "
                    f"put+completion {d:.0f} ns = {d / ch:.2f}x it"
                )
        for size in ("8", "512", "4096"):
            parts = [after.get((pl, m, f"pointer {size} B")) for m in SPLIT]
            values = [float(r["value"]) for r in parts if r is not None]
            if len(values) == len(SPLIT):
                posted, landed, done = values
                line = (
                    f"  where it goes, {size} B: put returned {posted:.0f} ns, payload landed "
                    f"{landed:.0f} ns, completion seen {done:.0f} ns"
                )
                chain = after.get((pl, "chain_landed", f"pointer {size} B"))
                if chain is not None:
                    line += f" (chain: landed {float(chain['value']):.0f} ns)"
                print(line)
        old = before.get((pl, "completion", "pointer 4096 B"))
        if old is not None:
            print(f"  replaced engine, 4 KiB put+completion: {cell(old)} ns")
        print()
    for r in failed:
        print(f"FAILED: {r['placement']} {r['measure']} {r['shape']}: {r['error']}")
    print("all evaluated goals met" if met and not failed else "some goals NOT met (or failures)")
    return 0 if met and not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
