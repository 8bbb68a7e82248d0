#!/usr/bin/env bash
# gicomm doctor on a lent GPU machine (one H200 is enough, two are used when present; no network).
# Run from the repository root, with the Python wheels of .whl/ carried (jsonschema; numba for the
# model's expectations), as tools/device-campaign.sh needs them:
#   OUT=/tmp/out tools/doctor-device.sh
# 1. builds gicomm-bench-floors, gicomm-bench-gda and gicomm-bench-proxy into
#    ${GICOMM_DEVICE_BUILD:-build/device} (configured with -DGICOMM_CUDA_ARCHS=90; reused when built);
# 2. measures, in three runs: a few reduced points the verdicts judge (mini-gda one-op on the
#    softnic cpu engine; mini-proxy tuned issue and ping-pong, workers pinned to the GPU's NUMA node),
#    then `python -m gicomm.doctor` measures the floors experiment (reduced sweep) and judges them;
# 3. a deliberately wrong set-up: the same mini-proxy points with the workers pinned to another NUMA
#    node than the GPU's (when the machine has two), judged apart: its table must name the cause.
# Budget: about 90 s when the build exists (points ~40 s, floors ~10 s, the doctor twice ~30 s).
# Writes under $OUT/doctor/ (4 files): verdicts.txt (the terminal table), doctor.html (the page),
# floors.jsonl (the floor records of every run), doctor.tar.gz (log.txt, the wrong-NUMA table and
# page, every record, the CSVs, the build log).
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/device-env.sh
export PYTHONPATH=$PWD/workflow${PYTHONPATH:+:$PYTHONPATH}
out=${OUT:-/tmp/gicomm-out}/doctor
build=${GICOMM_DEVICE_BUILD:-build/device}
work=results/doctor-device
wrong=results/doctor-wrong-numa
rm -rf "$work" "$wrong"
mkdir -p "$out" "$work" "$wrong"
log=$work/log.txt
host=$(hostname)

# Runs driver $1 on experiment $2 with points file $3 into campaign folder $4 (three runs).
measure() {
  local driver=$1 experiment=$2 points=$3 campaign=$4 run
  mkdir -p "$campaign/raw/$experiment/$host"
  for run in 0 1 2; do
    timeout 60 "$build/bin/$driver" --experiment "$experiment" --points "$points" \
      --out "$campaign/raw/$experiment/$host/run$run.jsonl" --campaign "$(basename "$campaign")" --host "$host" \
      --platform h200 --run-index "$run" --provenance-id doctor --iters 500 --timeout-ms 5000
    echo "$experiment run $run exit $?"
  done
}

{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=index,name,pci.bus_id,clocks.sm,clocks.max.sm,persistence_mode \
    --format=csv,noheader | tr '\n' ';')"
  python3 -c "import jsonschema" || echo "MISSING jsonschema: carry .whl (tools/device-campaign.sh says how)"
  t0=$(date +%s)
  for target in gicomm-bench-floors gicomm-bench-gda gicomm-bench-proxy; do
    [ -x "$build/bin/$target" ] || need_build=1
  done
  if [ -n "${need_build:-}" ]; then
    cmake -S native -B "$build" -DGICOMM_CUDA_ARCHS=90 > "$work/build.log" 2>&1
  fi
  timeout 420 cmake --build "$build" -j "$(nproc)" --target gicomm-bench-floors gicomm-bench-gda gicomm-bench-proxy \
    >> "$work/build.log" 2>&1
  echo "build exit $? in $(( $(date +%s) - t0 )) s"

  # The GPU's NUMA node and another one (the deliberately wrong pinning), from sysfs.
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 | tr 'A-F' 'a-f' | sed 's/^0000\(....:\)/\1/')
  gpu_node=$(cat "/sys/bus/pci/devices/${bus}/numa_node" 2>/dev/null || echo -1)
  [ "$gpu_node" -ge 0 ] 2>/dev/null || gpu_node=0
  other_node=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | sed 's/.*node//' | grep -vx "$gpu_node" | head -1)
  echo "GPU 0 ($bus) on NUMA node $gpu_node; another node: ${other_node:-none}"

  python3 - "$work" "$wrong" "$gpu_node" "${other_node:-}" <<'PY'
import sys
from pathlib import Path
from gicomm.bench import point_line
from gicomm.experiments import Point, point_id

work, wrong, node, other = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4]


def write(path, experiment, rows):
    lines = (point_line(Point(point_id(experiment, r), r), "doctor") for r in rows)
    path.write_text("".join(line + "\n" for line in lines))


write(work / "gda.jsonl", "gda_one_op",
      [{"variant": "gpu_fence", "payload": "inline", "nic_backend": "softnic-cpu"}])
proxy = [{"mode": "issue", "enqueue": "tuned", "workers": 1, "rings": 1, "state": "warm"},
         {"mode": "pingpong", "enqueue": "tuned", "workers": 2, "rings": 2, "state": "warm"}]
write(work / "proxy.jsonl", "proxy_one_op", [p | {"numa_node": node} for p in proxy])
if other:
    write(wrong / "proxy.jsonl", "proxy_one_op", [p | {"numa_node": int(other)} for p in proxy])
PY
  measure gicomm-bench-gda gda_one_op "$work/gda.jsonl" "$work"
  measure gicomm-bench-proxy proxy_one_op "$work/proxy.jsonl" "$work"
  t1=$(date +%s)
  timeout 240 python3 -m gicomm.doctor --results results --campaign doctor-device --records "$work" --measured-here \
    --floors-driver "$build/bin/gicomm-bench-floors" --runs 3 --iters 500 > "$out/verdicts.txt"
  echo "doctor exit $? in $(( $(date +%s) - t1 )) s"
  if [ -f "$wrong/proxy.jsonl" ]; then
    measure gicomm-bench-proxy proxy_one_op "$wrong/proxy.jsonl" "$wrong"
    timeout 240 python3 -m gicomm.doctor --results results --campaign doctor-wrong-numa --records "$wrong" \
      --measured-here > "$wrong/verdicts.txt"
    echo "doctor (workers on NUMA node $other_node, GPU on $gpu_node) exit $?"
    grep -E "proxy_pinning|cause: .*proxy_pinning" "$wrong/verdicts.txt" | head -5
  else
    echo "one NUMA node: the wrong-pinning case cannot be set up on this machine"
  fi
  echo "== $(date -u +%FT%TZ) done in $(( $(date +%s) - t0 )) s"
} > "$log" 2>&1
cp "$work/report/doctor.html" "$out/doctor.html" 2>/dev/null
cat "$work"/raw/floors/*/run*.jsonl > "$out/floors.jsonl" 2>/dev/null
tar czf "$out/doctor.tar.gz" -C results doctor-device doctor-wrong-numa 2>/dev/null
tail -4 "$log"
