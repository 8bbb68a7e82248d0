#!/usr/bin/env bash
# gicomm doctor on a lent GPU machine (one H200 is enough, two are used when present; no network).
# Run from the repository root, with the Python wheels of .whl/ carried (jsonschema; numba for the
# model's expectations), as tools/device-campaign.sh needs them:
#   OUT=/tmp/out tools/doctor-device.sh
# 1. builds gicomm-bench-floors, gicomm-bench-gda and gicomm-bench-proxy into
#    ${GICOMM_DEVICE_BUILD:-build/device} (configured with -DGICOMM_CUDA_ARCHS=90; reused when built);
# 2. `python -m gicomm.doctor` measures, in three runs, the floors experiment (reduced sweep) and the
#    reduced points the verdicts judge (mini-gda one-op on the softnic cpu engine; mini-proxy tuned
#    issue and ping-pong, workers pinned to the GPU's NUMA node), checks the host and judges them;
# 3. two deliberately wrong set-ups, each judged apart, whose tables must name the cause: the same
#    mini-proxy points with the workers pinned to another NUMA node than the GPU's (when the machine
#    has two), and the NIC floors measured over the emulated rdma-core (when rdma-core headers were
#    found: gicomm_build.json says "rdma": true) standing in for a NIC.
# Budget: about 90-120 s when the build exists (floors ~10 s, points ~40 s, the wrong set-ups
# ~30 s, the model's expectations ~20 s); every driver process is bounded (120 s), the doctor calls
# by 300 + 200 + 200 s.
# Writes under $OUT/doctor/ (4 files): verdicts.txt (the terminal table), doctor.html (the page),
# floors.jsonl (the floor records of every run), doctor.tar.gz (log.txt, the wrong set-ups' tables
# and pages, every record, the CSVs, the build log).
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/device-env.sh
export PYTHONPATH=$PWD/workflow${PYTHONPATH:+:$PYTHONPATH}
out=${OUT:-/tmp/gicomm-out}/doctor
build=${GICOMM_DEVICE_BUILD:-build/device}
work=results/doctor-device
wrong=results/doctor-wrong-numa
emu=results/doctor-emulated-nic
rm -rf "$work" "$wrong" "$emu"
mkdir -p "$out" "$work" "$wrong" "$emu"
log=$work/log.txt

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

  # This machine's records only (--records the doctor's own folder): the floors, then the reduced
  # points (mini-gda one-op on the cpu engine; mini-proxy issue and ping-pong, workers on the GPU's
  # NUMA node), three runs each.
  t1=$(date +%s)
  timeout 300 python3 -m gicomm.doctor --results results --campaign doctor-device --records "$work" --measured-here \
    --floors-driver "$build/bin/gicomm-bench-floors" --short-run all --numa-node "$gpu_node" --runs 3 --iters 500 \
    > "$out/verdicts.txt"
  echo "doctor exit $? in $(( $(date +%s) - t1 )) s"
  if [ -n "${other_node:-}" ]; then
    # The deliberately wrong set-up: the same mini-proxy points, workers on another NUMA node.
    t1=$(date +%s)
    timeout 200 python3 -m gicomm.doctor --results results --campaign doctor-wrong-numa --records "$wrong" \
      --measured-here --bin-dir "$build/bin" --short-run proxy --numa-node "$other_node" --runs 3 --iters 500 \
      > "$wrong/verdicts.txt"
    echo "doctor (workers on NUMA node $other_node, GPU on $gpu_node) exit $? in $(( $(date +%s) - t1 )) s"
    grep -E "proxy_pinning|cause: .*proxy_pinning" "$wrong/verdicts.txt" | head -5
  else
    echo "one NUMA node: the wrong-pinning case cannot be set up on this machine"
  fi
  # The second wrong set-up: the emulated rdma-core standing in for the NIC (the NIC floors measured
  # through it, one run): its table must name nic_standin.
  if grep -q '"rdma": true' "$build/gicomm_build.json" 2>/dev/null \
     && timeout 300 cmake --build "$build" -j "$(nproc)" --target gicomm_emu >> "$work/build.log" 2>&1; then
    t1=$(date +%s)
    # the emulation's own port counters (a sysfs view on tmpfs), so the path check can read them
    GICOMM_EMU_SYSFS_DIR=$(mktemp -d /dev/shm/gicomm-doctor-emu.XXXXXX) \
    timeout 200 python3 -m gicomm.doctor --results results --campaign doctor-emulated-nic --records "$emu" \
      --measured-here --floors-driver "$build/bin/gicomm-bench-floors" --nic mlx5 \
      --driver-prefix "$build/bin/gicomm-emu-run" --short-run none --runs 1 --iters 200 > "$emu/verdicts.txt"
    echo "doctor (NIC floors over the emulated rdma-core) exit $? in $(( $(date +%s) - t1 )) s"
    grep -E "nic_standin" "$emu/verdicts.txt" | head -3
  else
    echo "no rdma-core build (gicomm_build.json) or gicomm_emu failed to build: the emulated-NIC case not run"
  fi
  echo "== $(date -u +%FT%TZ) done in $(( $(date +%s) - t0 )) s"
} > "$log" 2>&1
cp "$work/report/doctor.html" "$out/doctor.html" 2>/dev/null
cat "$work"/raw/floors/*/run*.jsonl > "$out/floors.jsonl" 2>/dev/null
tar czf "$out/doctor.tar.gz" -C results doctor-device doctor-wrong-numa doctor-emulated-nic 2>/dev/null
tail -4 "$log"
