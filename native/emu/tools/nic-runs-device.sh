#!/usr/bin/env bash
# The NIC experiments through the unmodified drivers on the emulated rdma-core, on one lent GPU
# machine, in one device-tool call from the repository root:
#   native/emu/tools/nic-runs-device.sh
# Builds only what it needs into ${GICOMM_DEVICE_BUILD:-build/device} (configured with
# -DGICOMM_CUDA_ARCHS=90; reused when already built), then runs with reduced points, each bounded:
#   two ranks (two processes, each its own emulated host and device, mlx5_0 and mlx5_1, with its
#   own sysfs view; rank 1 never touches the GPU, its responder is a host thread, so the two share
#   one H200 without MPS):
#     gda_one_op, gda_msg_rate, connection_scaling   gicomm-bench-gda, nic_backend mlx5 (DEVX QPs
#                                                     of rank 0 connected to rank 1's verbs QPs)
#     proxy_msg_rate                                  gicomm-bench-proxy, nic_backend verbs, GPU
#                                                     producers on rank 0
#     proxy_one_op pingpong                           the GPU ping on rank 0, rank 1's responder
#                                                     answering through its own worker and QP
#     gda_rtt, one_op (its round trip included)       gicomm-bench-gda, mlx5: the GPU ping on
#                                                     rank 0, rank 1's responder answering into
#                                                     rank 0's flag through its QP 0
#     goodput mini-proxy verbs                        GPU producers on rank 0, pointer writes of 8 B
#                                                     and 4 KiB into rank 1's buffer
#     loaded_rtt mini-proxy verbs                     the probe's pings and the bulk CTAs' writes
#                                                     into rank 1's buffer, rank 1's responder
#                                                     answering the probe
#     refused with the reason (PASS when every record is failed saying what it needs):
#       loaded_rtt and goodput on softnic-cpu
#   loopback (one process, --topology loopback): the same three mini-gda experiments
#   rank 1's GPU responder (`responder: gpu`: a GPU thread on rank 1 polls its buffer and answers
#   through its worker and QP 0), under a private MPS daemon (both ranks then run a kernel at once
#   on the one GPU; without MPS they would time-slice), each record ok with params.responder
#   "rank 1 GPU thread via its mini-proxy worker (verbs)":
#     gpu_responder_unit                              first, alone: test_bench_responder_gpu (the
#                                                     GPU thread answering into a null backend)
#     proxy_one_op_gpuresp                            the pingpong's two points above
#     gda_rtt_gpuresp                                 gda_rtt's inline point above
#   (one_op and loaded_rtt take `responder: gpu` too; left out to save device time: the same
#   responder, dispatch and flag scheme as gda_rtt_gpuresp)
# Expected: about 150-260 s once built (the build: 3-5 min on 16 cores), the GPU responder's two
# steps 10-30 s more (at most 30 + 40 + 25 s); everything stops by DEADLINE_S (default 330 after the
# build). NICRUN_TARGETS (default every driver below) limits what is built, e.g. to the GPU
# responder's steps alone (about 40 s of steps, its build 1-3 min when not yet built):
#   NICRUN_TARGETS="gicomm_emu gicomm-bench-gda gicomm-bench-proxy test_bench_responder_gpu" \
#   NICRUN_SKIP='^(loopback_|two_rank_(gda_one_op|gda_msg_rate|connection_scaling|proxy_msg_rate|proxy_one_op|gda_rtt|one_op|loaded_rtt|loaded_rtt_softnic|goodput|goodput_softnic)$)' \
#   DEADLINE_S=90 native/emu/tools/nic-runs-device.sh $OUT/nicrun/ receives summary.txt (one PASS/FAIL line
# per step, the records' status, topology and path_check verdict), records.jsonl (rank 0's
# records of every step, tagged with "step") and logs.tar.gz (build, step logs, points files).
# What to check: every step PASS; in records.jsonl every record has path_check.verdict "ok",
# rdma_provider "emulated" (once the records are schema version 2), peer.nic on two-rank steps; the
# round trips (proxy_one_op, gda_rtt, one_op's rtt_ns) rx and peer_tx non-zero (the answers crossed
# back) and params.responder naming rank 1's responder (the GPU one on the *_gpuresp steps); mps.log
# in logs.tar.gz says whether the MPS daemon ran.
# NICRUN_SKIP (an extended regex of step names, e.g. connection_scaling) leaves steps out, saying so.
set -uo pipefail
cd "$(dirname "$0")/../../.."
# The device safety settings, and the carried wheels (.whl/: the harness's build needs the
# nlohmann-json headers where Debian's package is absent).
# shellcheck source=../../../tools/device-env.sh
. tools/device-env.sh
out=${OUT:-/tmp/gicomm-nicrun-out}/nicrun
build=${GICOMM_DEVICE_BUILD:-build/device}
logs=$out/logs
mkdir -p "$logs"
summary=$out/summary.txt
records=$out/records.jsonl
: > "$summary"
: > "$records"
fails=0
pack() {
  tar -czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"
}

{
  echo "== $(date -u +%FT%TZ) host"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv
  ls /sys/class/infiniband 2>&1
} > "$logs/host.log" 2>&1

t0=$(date +%s)
read -r -a targets <<< "${NICRUN_TARGETS:-gicomm_emu gicomm-bench-gda gicomm-bench-proxy gicomm-bench-loaded-rtt gicomm-bench-goodput test_bench_responder_gpu}"
{
  { [ -f "$build/CMakeCache.txt" ] || cmake -S native -B "$build" -DGICOMM_CUDA_ARCHS=90; } &&
    cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
} > "$logs/build.log" 2>&1
rc=$?
echo "$([ $rc -eq 0 ] && echo PASS || echo FAIL) build: exit $rc in $(( $(date +%s) - t0 )) s" | tee -a "$summary"
if [ $rc -ne 0 ]; then
  tail -40 "$logs/build.log"
  pack
  exit 1
fi
deadline=$(( $(date +%s) + ${DEADLINE_S:-330} ))
bin=$build/bin
emu=$bin/gicomm-emu-run
# The emulation rewrites its counter files once per engine pass: on tmpfs, not the disk.
sys=$(mktemp -d /dev/shm/gicomm-nicrun.XXXXXX 2>/dev/null || mktemp -d)
# shellcheck source=mps.sh
. native/emu/tools/mps.sh
# Stops the MPS daemon this script started (if any), keeping its log; later processes run without.
stop_mps() {
  mps_stop "$logs"
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
trap 'stop_mps; rm -rf "$sys"' EXIT
port=$(( 21000 + $$ % 20000 ))

# points EXPERIMENT BACKEND PARAMS_JSON...: a points file, one point per PARAMS_JSON
points() {
  local e=$1 b=$2 i=0
  shift 2
  for p in "$@"; do
    i=$((i + 1))
    echo "{\"point_id\": \"nicrun-$e-$i\", \"nic_backend\": \"$b\", \"params\": $p}"
  done > "$logs/$e.points.jsonl"
}
points gda_one_op mlx5 '{"payload": "inline", "variant": "gpu_fence"}' '{"payload": "pointer", "variant": "gpu_fence"}'
points gda_msg_rate mlx5 \
  '{"mode": "thread", "blocks": 1, "threads": 1, "qps": 1, "batch": 16, "payload": "inline", "wqes": 20000}' \
  '{"mode": "thread", "blocks": 16, "threads": 1, "qps": 16, "batch": 16, "payload": "inline", "wqes": 40000}'
# (the emulation posts about 40 k writes/s: 20 k writes per launch instead of a NIC's 2 M)
points connection_scaling mlx5 '{"active_qps": 64, "writes_per_visit": 32, "size": 8, "producers": 64, "min_writes": 20000}' \
  '{"active_qps": 1024, "writes_per_visit": 32, "size": 8, "producers": 64, "min_writes": 20000}'
points proxy_msg_rate verbs '{"mode": "rate", "workers": 1, "rings": 1, "batch": 16, "msgs": 20000, "state": "warm", "warm_ms": 100}' \
  '{"mode": "rate", "workers": 2, "rings": 2, "batch": 4, "msgs": 20000, "state": "warm", "warm_ms": 100}'
points proxy_one_op verbs '{"mode": "pingpong", "workers": 1, "state": "warm", "warm_ms": 100}' \
  '{"mode": "pingpong", "workers": 2, "state": "cold", "idle_ms": 50}'
points one_op mlx5 '{"payload": "inline"}'
points gda_rtt mlx5 '{"payload": "inline", "variant": "gpu_fence"}' '{"payload": "pointer", "variant": "gpu_fence"}'
# rank 1's GPU responder: the same round trips answered by a GPU thread on rank 1
points proxy_one_op_gpuresp verbs '{"mode": "pingpong", "workers": 1, "state": "warm", "warm_ms": 100, "responder": "gpu"}' \
  '{"mode": "pingpong", "workers": 2, "state": "cold", "idle_ms": 50, "responder": "gpu"}'
points gda_rtt_gpuresp mlx5 '{"payload": "inline", "variant": "gpu_fence", "responder": "gpu"}'
echo '{"point_id": "nicrun-loaded_rtt-softnic-1", "transport": "mini-proxy", "nic_backend": "softnic-cpu", "params": {"bulk_ctas": 0}}' \
  > "$logs/loaded_rtt_softnic.points.jsonl"
for p in '{"queue": "reserved", "bulk_ctas": 0}' '{"queue": "reserved", "bulk_ctas": 4}' '{"queue": "shared", "bulk_ctas": 4}'; do
  echo "{\"point_id\": \"nicrun-loaded_rtt-$(echo "$p" | tr -dc 'a-z0-9' | head -c 24)\", \"transport\": \"mini-proxy\", \"nic_backend\": \"verbs\", \"params\": $p}"
done > "$logs/loaded_rtt.points.jsonl"
echo '{"point_id": "nicrun-goodput-softnic-1", "transport": "mini-proxy", "nic_backend": "softnic-cpu", "params": {"size": 8, "ctas": 1}}' \
  > "$logs/goodput_softnic.points.jsonl"
for p in '{"size": 8, "ctas": 4, "msgs_total": 20000}' '{"size": 4096, "ctas": 1, "msgs_total": 4000}'; do
  echo "{\"point_id\": \"nicrun-goodput-$(echo "$p" | tr -dc '0-9')\", \"transport\": \"mini-proxy\", \"nic_backend\": \"verbs\", \"params\": $p}"
done > "$logs/goodput.points.jsonl"

common="--campaign nicrun --host $(hostname) --platform h200 --provenance-id nicrun --run-index 0 --timeout-ms 20000"
loops="--warmup 10 --iters 200"

# collect STEP FILE: rank 0's records, tagged, and one summary line with their verdicts
collect() {
  local name=$1 file=$2
  [ -s "$file" ] && sed "s/^{/{\"step\": \"$name\", /" "$file" >> "$records"
  python3 - "$file" "$name" >> "$summary" <<'PY'
import json, sys
path, name = sys.argv[1], sys.argv[2]
try:
    recs = [json.loads(l) for l in open(path)]
except OSError:
    recs = []
for r in recs:
    pc = r.get("path_check") or {}
    print(f"  {name}: {r['point_id']} {r['metric']} {r['status']} topology={r.get('topology', '?')} "
          f"path={pc.get('verdict', 'none')} tx={pc.get('tx_bytes')} peer_rx={pc.get('peer_rx_bytes')} "
          f"rx={pc.get('rx_bytes')} peer_tx={pc.get('peer_tx_bytes')} "
          f"p50={(r.get('stats') or {}).get('p50')} {r.get('error', '')[:200]}")
PY
}

left() { echo $(( deadline - $(date +%s) - 5 )); }
verdict() {  # verdict NAME RC FILE: PASS when exit 0 and every record ok
  local name=$1 rc=$2 file=$3 v=PASS
  if [ "$rc" -ne 0 ] || [ ! -s "$file" ] || grep -qv '"status": "ok"' "$file"; then v=FAIL; fails=$((fails + 1)); fi
  echo "$v $name: exit $rc in $(( $(date +%s) - t0 )) s" | tee -a "$summary"
  collect "$name" "$file"
}

# refused NAME RC FILE METRIC: PASS when exit 0, the records of METRIC (every metric: "*") are failed
# saying the experiment does not run between two ranks, and every other record is ok
refused() {
  local name=$1 rc=$2 file=$3 v=PASS
  python3 - "$file" "$4" <<'PY' || v=FAIL
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])] if sys.argv[1] else []
named = [r for r in recs if sys.argv[2] in ("*", r["metric"])]
rest = [r for r in recs if r not in named]
ok = named and all(r["status"] == "failed" and "does not run between two ranks" in r.get("error", "") for r in named)
sys.exit(0 if ok and all(r["status"] == "ok" for r in rest) else 1)
PY
  [ "$rc" -eq 0 ] || v=FAIL
  [ $v = PASS ] || fails=$((fails + 1))
  echo "$v $name (refused on two ranks: $4): exit $rc in $(( $(date +%s) - t0 )) s" | tee -a "$summary"
  collect "$name" "$file"
}

# budget STEP LIMIT_S: sets t to the smaller of the limit and the time left; false (the step
# skipped and counted failed) when too little is left.
budget() {
  # NICRUN_SKIP: an extended regex of step names left out on purpose (said so, not counted failed),
  # e.g. steps another script of the same device call already runs.
  if [ -n "${NICRUN_SKIP:-}" ] && [[ $1 =~ $NICRUN_SKIP ]]; then
    echo "SKIP $1: NICRUN_SKIP" | tee -a "$summary"
    return 1
  fi
  t=$(left)
  [ "$t" -gt "$2" ] && t=$2
  [ "$t" -gt 5 ] && return 0
  echo "SKIP $1: deadline" | tee -a "$summary"
  fails=$((fails + 1))
  return 1
}

# two_ranks EXPERIMENT DRIVER LIMIT_S [extra flags]; REFUSED=METRIC: judged by refused() instead;
# STEP=NAME: the points file $logs/NAME.points.jsonl and the step's name (default: the experiment)
two_ranks() {
  local e=$1 drv=$2 n=${STEP:-$1}
  budget "two_rank_$n" "$3" || return
  shift 3
  port=$((port + 1))
  t0=$(date +%s)
  local flags="--experiment $e --points $logs/$n.points.jsonl $common --world-size 2 --rendezvous-port $port --peer-timeout-ms 30000"
  # shellcheck disable=SC2086
  GICOMM_EMU_SYSFS_DIR=$sys/$n.sys1 timeout "$t" "$emu" --devices mlx5_1:ib "$bin/$drv" $flags "$@" --rank 1 \
    --nic-device mlx5_1 --out "$logs/$n.rank1.jsonl" > "$logs/two_rank_$n.rank1.log" 2>&1 &
  local p1=$!
  # shellcheck disable=SC2086
  GICOMM_EMU_SYSFS_DIR=$sys/$n.sys0 timeout "$t" "$emu" --devices mlx5_0:ib "$bin/$drv" $flags "$@" --rank 0 \
    --nic-device mlx5_0 --out "$logs/$n.rank0.jsonl" > "$logs/two_rank_$n.rank0.log" 2>&1
  local rc=$?
  wait $p1
  local rc1=$?
  [ $rc1 -ne 0 ] && echo "  rank 1 of $n: exit $rc1" >> "$summary"
  if [ -n "${REFUSED:-}" ]; then
    refused "two_rank_$n" $(( rc > rc1 ? rc : rc1 )) "$logs/$n.rank0.jsonl" "$REFUSED"
  elif [ -n "${RESPONDER:-}" ]; then
    verdict "two_rank_$n" $(( rc > rc1 ? rc : rc1 )) "$logs/$n.rank0.jsonl"
    # ... and every record names the responder that answered it
    python3 - "$logs/$n.rank0.jsonl" "$RESPONDER" <<'PY' ||
import json, sys
try:
    recs = [json.loads(l) for l in open(sys.argv[1])]
except OSError:
    recs = []
sys.exit(0 if recs and all(r["params"].get("responder") == sys.argv[2] for r in recs) else 1)
PY
      { echo "FAIL two_rank_$n: not every record names params.responder '$RESPONDER'" | tee -a "$summary"; fails=$((fails + 1)); }
  else
    verdict "two_rank_$n" $(( rc > rc1 ? rc : rc1 )) "$logs/$n.rank0.jsonl"
  fi
}

# loopback EXPERIMENT DRIVER LIMIT_S [extra flags]
loopback() {
  local e=$1 drv=$2
  budget "loopback_$e" "$3" || return
  shift 3
  t0=$(date +%s)
  # shellcheck disable=SC2086
  GICOMM_EMU_SYSFS_DIR=$sys/$e.sysl timeout "$t" "$emu" --devices mlx5_0:ib "$bin/$drv" --experiment "$e" \
    --points "$logs/$e.points.jsonl" $common --topology loopback "$@" --out "$logs/$e.loopback.jsonl" \
    > "$logs/loopback_$e.log" 2>&1
  verdict "loopback_$e" $? "$logs/$e.loopback.jsonl"
}

# shellcheck disable=SC2086
two_ranks gda_one_op gicomm-bench-gda 15 $loops
two_ranks gda_msg_rate gicomm-bench-gda 15 --iters 1
two_ranks connection_scaling gicomm-bench-gda 60 --iters 1
two_ranks proxy_msg_rate gicomm-bench-proxy 15 --iters 1
# shellcheck disable=SC2086
two_ranks proxy_one_op gicomm-bench-proxy 40 $loops
# shellcheck disable=SC2086
two_ranks gda_rtt gicomm-bench-gda 20 $loops
# shellcheck disable=SC2086
two_ranks one_op gicomm-bench-gda 25 $loops
two_ranks loaded_rtt gicomm-bench-loaded-rtt 45 --warmup 10 --iters 100
STEP=loaded_rtt_softnic REFUSED='*' two_ranks loaded_rtt gicomm-bench-loaded-rtt 15 --warmup 10 --iters 100
two_ranks goodput gicomm-bench-goodput 40 --warmup 1 --iters 2
STEP=goodput_softnic REFUSED='*' two_ranks goodput gicomm-bench-goodput 15 --iters 1
# The GPU responder alone first (one process, no NIC: its answers go to mini-proxy's null backend):
# the GPU thread answers exactly the pings it saw and stops at a ping that never comes.
if budget gpu_responder_unit 30; then
  t0=$(date +%s)
  timeout "$t" "$bin/test_bench_responder_gpu" > "$logs/gpu_responder_unit.log" 2>&1
  rc=$?
  v=PASS
  { [ $rc -eq 0 ] && grep -q '(GPU thread): ok' "$logs/gpu_responder_unit.log"; } || { v=FAIL; fails=$((fails + 1)); }
  echo "$v gpu_responder_unit: exit $rc in $(( $(date +%s) - t0 )) s: $(tail -1 "$logs/gpu_responder_unit.log")" |
    tee -a "$summary"
fi
# The GPU responder's steps: two kernels at once on the one GPU, under a private MPS daemon.
gpu_responder="rank 1 GPU thread via its mini-proxy worker (verbs)"
if [ -n "${NICRUN_SKIP:-}" ] && [[ two_rank_proxy_one_op_gpuresp =~ $NICRUN_SKIP ]] &&
  [[ two_rank_gda_rtt_gpuresp =~ $NICRUN_SKIP ]]; then
  echo "SKIP mps: both GPU responder steps left out (NICRUN_SKIP)" | tee -a "$summary"
elif command -v nvidia-cuda-mps-control > /dev/null; then
  if mps_start "$logs/mps.log"; then
    echo "PASS mps: daemon started (pipe $CUDA_MPS_PIPE_DIRECTORY)" | tee -a "$summary"
  else
    echo "FAIL mps: nvidia-cuda-mps-control -d: $(tail -3 "$logs/mps.log") (the steps run time-sliced)" |
      tee -a "$summary"
    fails=$((fails + 1))
  fi
else
  echo "FAIL mps: no nvidia-cuda-mps-control (the GPU responder steps run time-sliced)" | tee -a "$summary"
  fails=$((fails + 1))
fi
# shellcheck disable=SC2086
STEP=proxy_one_op_gpuresp RESPONDER=$gpu_responder two_ranks proxy_one_op gicomm-bench-proxy 40 $loops
# shellcheck disable=SC2086
STEP=gda_rtt_gpuresp RESPONDER=$gpu_responder two_ranks gda_rtt gicomm-bench-gda 25 $loops
stop_mps
# shellcheck disable=SC2086
loopback gda_one_op gicomm-bench-gda 10 $loops
loopback gda_msg_rate gicomm-bench-gda 10 --iters 1
loopback connection_scaling gicomm-bench-gda 60 --iters 1
echo "$([ $fails -eq 0 ] && echo ALL PASS || echo "$fails FAILED") ($(date -u +%FT%TZ))" | tee -a "$summary"
pack
exit $(( fails == 0 ? 0 : 1 ))
