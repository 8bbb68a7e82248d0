#!/usr/bin/env bash
# NVSHMEM (the image's 3.4.5 Python package, unmodified) over gicomm's emulated rdma-core on a lent
# GPU machine, in one device-tool call from the repository root:
#   native/emu/tools/nvshmem-device-check.sh
# Each step is bounded; everything stops by DEADLINE_S (default 450). Expected: 4-6 minutes.
# ONLY=baselines runs only the build of gicomm_emu and gicomm-bench-baselines-nvshmem (about 80 s on
# 16 cores) and the two library_baselines steps (6. below, at most BASELINE_S=60 s each) under MPS:
#   OUT=$OUT/nvpath ONLY=baselines DEADLINE_S=200 native/emu/tools/nvshmem-device-check.sh
# The build goes to GICOMM_DEVICE_BUILD (default build/device), configured for sm_90.
#   0. host facts: GPUs, driver, NVSHMEM package, rdma-core
#   1. build (CMake, sm_90): the emulation, its NVSHMEM replay test, gicomm-emu-nvshmem (~2 min)
#   2. replay: NVSHMEM's IBGDA commands and WQEs on the CPU, one process and two over the wire (s)
#   3. ibgda: two PEs on GPU 0 (two processes, P2P off), IBGDA with the CPU-assisted NIC handler,
#      payload checks, then issue / put+completion / round trip; no MPS (kernels time-sliced)
#   4. ibgda_mps: the same under an MPS daemon with private pipe and log directories (started
#      here, stopped at the end), which lets the two PEs' kernels run at once
#   5. ibrc_mps: NVSHMEM_REMOTE_TRANSPORT=ibrc (its CPU proxy posts verbs) under MPS
#   6. baselines_ibgda_mps, baselines_ibrc_mps: the library_baselines harness itself
#      (gicomm-bench-baselines-nvshmem, no pipeline) with its two PEs on GPU 0 under the same MPS
#      daemon: its correctness checks, then put and p of 8 B (200 iterations); every record must be
#      ok with rdma_provider emulated, pes_per_gpu 2 and mps on, and carry a path_check whose verdict
#      is ok (both PEs' emulated port counters moved at least the point's traffic, on mlx5_0 port 1)
#      (about 20-40 s each, bounded at BASELINE_S, default 90; 60 with ONLY=baselines)
#      LAUNCHED=1 adds baselines_ibrc_launched: the same points with one PE per process, the two
#      processes started with --rank 0/1 --world-size 2 (the harness's two-node mode) on this host
#   7. ibgda_2gpu: one PE per GPU, only when two GPUs are visible
# NVSHMEM steps run through gicomm-emu-run --sysfs (the emulated libraries first on
# LD_LIBRARY_PATH, /sys/class/infiniband/mlx5_0/device for NVSHMEM's realpath) with
# NVSHMEM_DEBUG=INFO, GICOMM_EMU_LOG=verbose (every DEVX/verbs command) and GICOMM_EMU_TRACE (the
# first data-path events). A step that runs out of time gets SIGUSR1 first (the emulation prints
# every QP's progress), then SIGKILL.
# $OUT receives summary.txt (one PASS/FAIL line per step, then its CHECK and METRIC lines),
# records.jsonl (the records of gicomm-emu-nvshmem: rdma_provider "emulated", params
# mps/gpus/nic_handler; then those of the baselines harness, params pes_per_gpu/mps), highlights.txt and failures.txt (what stdout ends with: failed checks,
# metrics, emulation and NVSHMEM errors, the last lines of each failed step) and logs.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/gicomm-nvshmem-out}
deadline=$(( $(date +%s) + ${DEADLINE_S:-450} ))
logs=$out/logs
mkdir -p "$logs"
summary=$out/summary.txt
records=$out/records.jsonl
: > "$summary"
: > "$records"
rm -f "$out/failures.txt"
build=${GICOMM_DEVICE_BUILD:-build/device}
only=${ONLY:-}
case "$only" in
  "" | baselines) ;;
  *) echo "nvshmem-device-check: ONLY=$only: allowed: baselines (or unset for every step)" >&2; exit 2 ;;
esac
baseline_s=${BASELINE_S:-$([ "$only" = baselines ] && echo 60 || echo 90)}
bin=$build/bin
fails=0
# shellcheck source=mps.sh
. native/emu/tools/mps.sh

left() { echo $(( deadline - $(date +%s) )); }

# Stops the MPS daemon this script started (if any) and keeps its log.
stop_mps() { mps_stop "$logs"; }

finish() {
  stop_mps
  echo "$([ $fails -eq 0 ] && echo ALL PASS || echo "$fails FAILED") ($(date -u +%FT%TZ))" | tee -a "$summary"
  # What to read first when something failed: failed checks, metrics, emulation errors, NVSHMEM errors.
  for f in "$logs"/*.log; do
    [ -e "$f" ] || continue
    grep -hE '^CHECK .* FAIL|^METRIC|rank [01]: (all checks|FAILED)|gicomm-emu-nvshmem:|gicomm-emu.*(error|Error|refused|not emulated|ERR|state \(SIGUSR1\)|  mlx5_)|NVSHMEM.*(ERROR|WARN)|nvshmem.*error' "$f" |
      head -60 | sed "s|^|$(basename "$f" .log): |"
  done > "$out/highlights.txt"
  tail -c 5000 "$out/highlights.txt"
  [ -e "$out/failures.txt" ] && tail -c 5000 "$out/failures.txt"
  tar -czf "$out/logs.tar.gz" -C "$out" logs
  rm -rf "$logs"
}
trap finish EXIT

# step NAME TIMEOUT_S [--expect RC] command... (tools/device-steps.sh): bounded by DEADLINE_S with
# 20 s kept to finish; on timeout SIGUSR1 to the step's process group (the emulation's state dump),
# 3 s, then SIGKILL. step_done counts failures, adds the step's CHECK and METRIC lines to the
# summary and a failed step's last lines to failures.txt.
TOTAL_S=${DEADLINE_S:-450} LOGS=$logs SUMMARY=$summary STEP_RESERVE_S=20 STEP_SIGNAL=USR1 STEP_KILL_AFTER=3
START=$(( deadline - TOTAL_S ))
source tools/device-steps.sh
step_done() {
  local name=$1 verdict=$2
  [ "$verdict" = PASS ] || fails=$((fails + 1))
  [ "$verdict" = SKIP ] && return
  grep -hE '^CHECK|^METRIC' "$logs/$name.log" | sed "s/^/  $name: /" >> "$summary"
  if [ "$verdict" = FAIL ]; then
    { echo "== $name (last lines)"; tail -25 "$logs/$name.log" | cut -c1-400; } >> "$out/failures.txt"
  fi
}

# The library_baselines harness on its own: put and p of 8 B of nvshmem-<transport> with both PEs
# on GPU 0 (the only one it sees; it places them), then its records checked: every one ok, emulated,
# pes_per_gpu 2, mps on, path_check ok. The harness sets NVSHMEM's transport variables itself.
# With LAUNCHED, the same points with one PE per launched process (--rank 0 and 1 on this host,
# meeting at 127.0.0.1): the harness's two-node mode, both PEs still on GPU 0 under MPS.
launch_two() {
  local port=$1 recs=$2
  shift 2
  "$@" --rank 1 --world-size 2 --rendezvous 127.0.0.1 --rendezvous-port "$port" --out "$recs.rank1" &
  local pid1=$!
  "$@" --rank 0 --world-size 2 --rendezvous 127.0.0.1 --rendezvous-port "$port" --out "$recs"
  local rc0=$?
  wait "$pid1"
  local rc1=$?
  echo "launch_two: rank 0 exit $rc0, rank 1 exit $rc1"
  [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ]
}
export -f launch_two

baseline_step() {
  local t=$1 mode=${2:-forked} name=baselines_${1}_mps
  [ "$mode" = launched ] && name=baselines_${t}_launched
  local pts=$logs/$name.points.jsonl recs=$logs/$name.records.jsonl
  for op in put p; do
    echo "{\"point_id\": \"$t-$op-8\", \"transport\": \"nvshmem-$t\", \"nic_backend\": \"mlx5\", \"params\": {\"op\": \"$op\", \"size\": 8}}"
  done > "$pts"
  : > "$recs"
  local harness=("$run" --sysfs "$bin/gicomm-bench-baselines-nvshmem" --experiment library_baselines --points "$pts"
    --campaign emulated-nic-h200 --host "$(hostname)" --platform h200 --provenance-id "$(hostname)" --run-index 0
    --warmup 20 --iters 200 --timeout-ms 5000)
  # GPU 0 alone, also on a two-GPU machine: the step is about two PEs sharing one GPU
  if [ "$mode" = launched ]; then
    step "$name" "$baseline_s" env "${nvshmem_env[@]}" CUDA_VISIBLE_DEVICES=0 bash -c 'launch_two "$@"' _ 17611 "$recs" \
      "${harness[@]}" --peer-timeout-ms 30000
  else
    step "$name" "$baseline_s" env "${nvshmem_env[@]}" CUDA_VISIBLE_DEVICES=0 "${harness[@]}" --out "$recs"
  fi
  grep -hE 'CHECK [a-z0-9_]+ (PASS|FAIL)' "$logs/$name.log" | sed "s/^/  $name: /" >> "$summary"
  cat "$recs" >> "$records"
  if ! python3 - "$recs" >> "$summary" 2>&1 <<'PY'; then
import json, sys
recs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
bad = [r for r in recs if r["status"] != "ok" or r.get("rdma_provider") != "emulated"
       or r["params"].get("pes_per_gpu") != 2 or r["params"].get("mps") != "on"
       or (r.get("path_check") or {}).get("verdict") != "ok"]
for r in recs:
    if r["metric"] in ("issue_ns", "completion_ns", "rtt_ns", "msg_rate") and r["status"] == "ok":
        print(f"  METRIC {r['transport']} {r['params']['op']} {r['metric']} p50 {r['stats']['p50']:.6g} {r['unit']}")
    if r["metric"] == "rtt_ns" and r.get("path_check"):
        c = r["path_check"]
        print(f"  PATH {r['transport']} {r['params']['op']} {c['verdict']} {c['device']} port {c['port']}: "
              f"claimed {c['expected_bytes']} B sent, moved tx {c['tx_bytes']} rx {c['rx_bytes']} B, "
              f"peer rx {c['peer_rx_bytes']} tx {c['peer_tx_bytes']} B {c['reason'][:300]}")
for r in bad[:5]:
    print(f"  BAD {r['transport']} {r['params'].get('op')} {r['metric']}: {r['status']} "
          f"{r.get('rdma_provider')} path {(r.get('path_check') or {}).get('verdict')} {r.get('error', '')[:300]}")
print(f"  {'PASS' if recs and not bad else 'FAIL'} records: {len(recs)} records, {len(bad)} not "
      "ok/emulated/2 PEs on 1 GPU under MPS/path check ok")
sys.exit(0 if recs and not bad else 1)
PY
    fails=$((fails + 1))
    { echo "== $name records"; tail -5 "$summary"; } >> "$out/failures.txt"
  fi
}

{
  echo "== $(date -u +%FT%TZ) $(hostname)"
  nvidia-smi --query-gpu=index,name,driver_version,compute_mode --format=csv
  python3 -c "import nvidia.nvshmem as m, importlib.metadata as im; print('nvshmem', list(m.__path__)[0], im.version('nvidia-nvshmem-cu13'))"
  dpkg -l 2>/dev/null | grep -E 'ibverbs|rdma-core' | awk '{print $2, $3}'
  ls /sys/class/infiniband 2>&1
  command -v nvidia-cuda-mps-control
} > "$logs/host.log" 2>&1
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# NVSHMEM: the pip package python3 imports, else the first install of it under the usual prefixes.
nvshmem_root=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])" 2>/dev/null)
if [ ! -e "$nvshmem_root/include/nvshmem.h" ]; then
  found=$(find /usr /opt /root -maxdepth 8 -path '*nvidia/nvshmem/include/nvshmem.h' 2>/dev/null | head -1)
  [ -n "$found" ] && nvshmem_root=${found%/include/nvshmem.h}
fi

# The emulation and the replay first: they need no NVSHMEM, so a missing NVSHMEM still leaves them.
t0=$(date +%s)
{
  cmake -S native -B "$build" -DGICOMM_CUDA_ARCHS=90 -DGICOMM_NVSHMEM_ROOT="$nvshmem_root" &&
    cmake --build "$build" -j "$(nproc)" --target gicomm_emu $([ "$only" = baselines ] || echo emu_nvshmem_replay)
} > "$logs/build.log" 2>&1
rc=$?
echo "$([ $rc -eq 0 ] && echo PASS || echo FAIL) build: exit $rc in $(( $(date +%s) - t0 )) s" | tee -a "$summary"
if [ $rc -ne 0 ]; then
  fails=$((fails + 1))
  tail -40 "$logs/build.log"
  exit 1
fi
t0=$(date +%s)
cmake --build "$build" -j "$(nproc)" --target gicomm-bench-baselines-nvshmem \
  $([ "$only" = baselines ] || echo gicomm-emu-nvshmem) > "$logs/build-nvshmem.log" 2>&1
nv_rc=$?
echo "$([ $nv_rc -eq 0 ] && echo PASS || echo FAIL) build_nvshmem: exit $nv_rc in $(( $(date +%s) - t0 )) s (NVSHMEM at ${nvshmem_root:-none})" |
  tee -a "$summary"
if [ $nv_rc -ne 0 ]; then
  fails=$((fails + 1))
  { grep -h "gicomm-emu-nvshmem" "$logs/build.log"; tail -30 "$logs/build-nvshmem.log"; } | tee -a "$out/failures.txt"
fi

run=$bin/gicomm-emu-run
[ "$only" = baselines ] || step replay 30 env GICOMM_EMU_LOG=quiet GICOMM_EMU_DEVICES=mlx5_0:ib,mlx5_1:ib "$run" "$bin/emu_nvshmem_replay"
[ "$only" = baselines ] || step replay_wire 30 env GICOMM_EMU_LOG=quiet GICOMM_EMU_DEVICES=mlx5_0:ib "$run" "$bin/emu_nvshmem_replay" --two-process
[ $nv_rc -eq 0 ] || exit 1

# What every NVSHMEM step shares: the emulated device, NVSHMEM's NIC path, the logs.
nvshmem_env=(
  GICOMM_EMU_DEVICES=mlx5_0:ib GICOMM_EMU_LOG=verbose GICOMM_EMU_TRACE=300
  NVSHMEM_DEBUG=INFO NVSHMEM_DISABLE_P2P=1 NVSHMEM_BOOTSTRAP=UID NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo
  NVSHMEM_IB_GID_INDEX=0 NVSHMEM_DISABLE_DATA_DIRECT=1 NVSHMEM_HCA_PREFIX=mlx5 CUDA_MODULE_LOADING=EAGER
)
ibgda_env=(NVSHMEM_IB_ENABLE_IBGDA=1 NVSHMEM_REMOTE_TRANSPORT=none NVSHMEM_IBGDA_NIC_HANDLER=cpu_host_memory)
ibrc_env=(NVSHMEM_IB_ENABLE_IBGDA=0 NVSHMEM_REMOTE_TRANSPORT=ibrc)
meta=(--campaign emulated-nic-h200 --platform h200 --host "$(hostname)" --out "$records")

[ "$only" = baselines ] || step ibgda 130 env "${nvshmem_env[@]}" "${ibgda_env[@]}" "$run" --sysfs \
  "$bin/gicomm-emu-nvshmem" --transport ibgda --iters 50 --warmup 5 --timeout-s 160 --param mps=off "${meta[@]}"

if command -v nvidia-cuda-mps-control > /dev/null && [ "$(left)" -gt 60 ]; then
  if mps_start "$logs/mps-start.log"; then
    echo "PASS mps: daemon started (pipe $mps_dir/pipe)" | tee -a "$summary"
    if [ "$only" != baselines ]; then
      step ibgda_mps 100 env "${nvshmem_env[@]}" "${ibgda_env[@]}" "$run" --sysfs \
        "$bin/gicomm-emu-nvshmem" --transport ibgda --iters 200 --warmup 20 --timeout-s 130 --param mps=on "${meta[@]}"
      step ibrc_mps 90 env "${nvshmem_env[@]}" "${ibrc_env[@]}" "$run" --sysfs \
        "$bin/gicomm-emu-nvshmem" --transport ibrc --iters 200 --warmup 20 --timeout-s 120 --param mps=on "${meta[@]}"
    fi
    for t in ibgda ibrc; do
      baseline_step "$t"
    done
    [ -z "${LAUNCHED:-}" ] || baseline_step ibrc launched
  else
    echo "FAIL mps: nvidia-cuda-mps-control -d: $(tail -3 "$logs/mps-start.log")" | tee -a "$summary"
    fails=$((fails + 1))
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
else
  echo "SKIP mps: no nvidia-cuda-mps-control or no time left" | tee -a "$summary"
fi
if [ "$ngpus" -ge 2 ] && [ "$only" != baselines ]; then
  # One PE per GPU needs no MPS; stop it first so the two processes own their GPUs.
  stop_mps
  step ibgda_2gpu 90 env "${nvshmem_env[@]}" "${ibgda_env[@]}" "$run" --sysfs \
    "$bin/gicomm-emu-nvshmem" --transport ibgda --gpus 2 --iters 200 --warmup 20 --timeout-s 120 --param mps=off "${meta[@]}"
fi
exit $(( fails == 0 ? 0 : 1 ))
