#!/usr/bin/env bash
# gicomm doctor on a lent GPU machine (one H200 is enough, two are used when present; no network).
# Run from the repository root, with the Python wheels of .whl/ carried (jsonschema; numba for the
# model's expectations), as tools/device-campaign.sh needs them:
#   OUT=/tmp/out tools/doctor-device.sh
# 1. builds gicomm-bench-floors, gicomm-bench-gda, gicomm-bench-proxy (and gicomm_emu, the emulated
#    rdma-core, when rdma-core headers were found: gicomm_build.json says "rdma": true) into
#    ${GICOMM_DEVICE_BUILD:-build/device} (configured with -DGICOMM_CUDA_ARCHS=90; reused when built);
# 2. `python -m gicomm.doctor`: the floors experiment (reduced sweep: the WQE + doorbell latency and
#    back-to-back rate, the ring store, the GPU-CPU ping-pong, the NVLink ping-pong of every
#    ordered GPU pair, or "one GPU: no NVLink pairs") and the reduced points the verdicts judge
#    (mini-gda one-op on the softnic cpu engine, mini-proxy tuned issue and ping-pong with the
#    workers on the GPU's NUMA node), three runs each; host checks; the verdict table;
# 3. the NIC floors over the emulated rdma-core between two ranks (two local processes, each an
#    emulated host): a GPU thread's RDMA writes through mini-gda (mlx5) and a CPU thread's through
#    verbs, latency and message rate, each record with its path proof; the doctor must flag them
#    `nic_standin` (a deliberately wrong set-up: an emulated provider standing in for the NIC);
# 4. the deliberately wrong NUMA pinning: the mini-proxy points with the workers on another NUMA
#    node than the GPU's (only when the machine has two).
# Budget: about 100-140 s after the build (floors ~15 s, points ~45 s, the emulated NIC floors
# ~30 s, the model's expectations ~20 s); the steps are bounded (200 + 150 + 120 s, and 150 s
# overall after the build) and every driver process inside by 120 s.
# Writes under $OUT/doctor2/ (5 files): verdicts.txt (the terminal table and the floors),
# nic-floors.txt (the emulated two-rank NIC floors' table and floors), doctor.html (the page),
# floors.jsonl (the floor records of every run, the NIC ones included), doctor.tar.gz (log.txt,
# steps.tsv, every step's log, the wrong set-ups' tables and pages, every record, the CSVs).
# What to check: steps.tsv all 0; verdicts.txt lists floor_wqe_doorbell_rate and (one GPU)
# "floor_nvlink_pingpong_ns: skipped: one GPU: no NVLink pairs"; log.txt shows mini-gda and
# mini-proxy records carrying floor/floor_ns; nic-floors.txt lists floor_nic_* and
# floor_nic_verbs_* [two-rank, emulated] and nic_standin problem.
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/device-env.sh
source tools/device-steps.sh
export PYTHONPATH=$PWD/workflow${PYTHONPATH:+:$PYTHONPATH}
out=${OUT:-/tmp/gicomm-out}/doctor2
build=${GICOMM_DEVICE_BUILD:-build/device}
work=results/doctor-device
wrong=results/doctor-wrong-numa
emu=results/doctor-emulated-nic
rm -rf "$work" "$wrong" "$emu"
mkdir -p "$out" "$work/steps" "$wrong" "$emu"
log=$work/log.txt
LOGS=$work/steps
STEPS=$work/steps.tsv
printf 'step\texit\tseconds\n' > "$STEPS"
# doctor TABLE ARGS...: the doctor's table (stdout) to TABLE; the drivers' progress to the step log
doctor=(bash -c 'python3 -m gicomm.doctor "$@" > "$0"')

{
  echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=index,name,pci.bus_id,clocks.sm,clocks.max.sm,persistence_mode \
    --format=csv,noheader | tr '\n' ';')"
  python3 -c "import jsonschema" || echo "MISSING jsonschema: carry .whl (tools/device-campaign.sh says how)"
  t0=$(date +%s)
  targets="gicomm-bench-floors gicomm-bench-gda gicomm-bench-proxy"
  for target in $targets; do
    [ -x "$build/bin/$target" ] || need_build=1
  done
  if [ -n "${need_build:-}" ]; then
    cmake -S native -B "$build" -DGICOMM_CUDA_ARCHS=90 > "$work/build.log" 2>&1
  fi
  grep -q '"rdma": true' "$build/gicomm_build.json" 2>/dev/null && targets="$targets gicomm_emu"
  # shellcheck disable=SC2086
  timeout 420 cmake --build "$build" -j "$(nproc)" --target $targets >> "$work/build.log" 2>&1
  echo "build exit $? in $(( $(date +%s) - t0 )) s"
  START=$(date +%s)
  TOTAL_S=150

  # The GPU's NUMA node and another one (the deliberately wrong pinning), from sysfs.
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 | tr 'A-F' 'a-f' | sed 's/^0000\(....:\)/\1/')
  gpu_node=$(cat "/sys/bus/pci/devices/${bus}/numa_node" 2>/dev/null || echo -1)
  [ "$gpu_node" -ge 0 ] 2>/dev/null || gpu_node=0
  other_node=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | sed 's/.*node//' | grep -vx "$gpu_node" | head -1)
  echo "GPU 0 ($bus) on NUMA node $gpu_node; another node: ${other_node:-none}"

  # This machine's records only (--records the doctor's own folder): the floors, then the reduced
  # points, three runs each.
  step doctor 200 "${doctor[@]}" "$out/verdicts.txt" --results results --campaign doctor-device --records "$work" \
    --measured-here --floors-driver "$build/bin/gicomm-bench-floors" --short-run all --numa-node "$gpu_node" \
    --runs 3 --iters 500
  sed -n '/^floors measured now/,$p' "$out/verdicts.txt"
  echo "-- same-run floors on the transports' records (floor, floor_ns):"
  cat "$work"/raw/gda_one_op/*/run0.jsonl "$work"/raw/proxy_one_op/*/run0.jsonl 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if "floor" in r:
        print(" ", r["experiment"], r["metric"], (r.get("stats") or {}).get("p50"), r["floor"], r["floor_ns"])'

  # The NIC floors between two ranks over the emulated rdma-core (both backends, one run).
  if [ -x "$build/bin/gicomm-emu-run" ]; then
    step nic_floors_emulated 150 "${doctor[@]}" "$out/nic-floors.txt" --results results --campaign doctor-emulated-nic \
      --records "$emu" --measured-here --floors-driver "$build/bin/gicomm-bench-floors" --nic mlx5 --nic verbs \
      --ranks 2 --driver-prefix "$build/bin/gicomm-emu-run" --short-run none --runs 1 --iters 200
    grep -E "nic_standin|floor_nic" "$out/nic-floors.txt" | head -12
  else
    echo "no rdma-core build (gicomm_build.json) or gicomm_emu failed to build: the emulated NIC floors not run"
  fi

  if [ -n "${other_node:-}" ]; then
    # The deliberately wrong set-up: the same mini-proxy points, workers on another NUMA node.
    step wrong_numa 120 "${doctor[@]}" "$wrong/verdicts.txt" --results results --campaign doctor-wrong-numa --records "$wrong" \
      --measured-here --bin-dir "$build/bin" --short-run proxy --numa-node "$other_node" --runs 3 --iters 500
    echo "(workers on NUMA node $other_node, GPU on $gpu_node)"
    grep -E "proxy_pinning|cause: .*proxy_pinning" "$wrong/verdicts.txt" | head -5
  else
    echo "one NUMA node: the wrong-pinning case cannot be set up on this machine"
  fi
  echo "== $(date -u +%FT%TZ) done in $(( $(date +%s) - t0 )) s"
  cat "$STEPS"
} > "$log" 2>&1
cp "$work/report/doctor.html" "$out/doctor.html" 2>/dev/null
cat "$work"/raw/floors/*/*.jsonl "$emu"/raw/floors/*/*.jsonl > "$out/floors.jsonl" 2>/dev/null
tar czf "$out/doctor.tar.gz" -C results doctor-device doctor-wrong-numa doctor-emulated-nic 2>/dev/null
tail -6 "$log"
