#!/usr/bin/env bash
# The engine ceiling on a GPU machine, in one bounded call from the repository root: builds the
# drivers that carry it, runs the host test, measures the engine ceiling per WQE shape on the
# same-GPU engine (softnic-gpu-same; with two GPUs also the peer engine, softnic-gpu), and mini-gda's
# message rate, inline-payload rate and goodput on it, each rate record with the ceiling of its own
# shape measured at the start of its driver run; summary.txt sets each rate beside its ceiling.
# Also 8 B inline at 528 QPs at 62, 256 and 2048 WQEs a QP (how much of a short round is the
# engine's ramp) and mini-gda's warp-mode rate at 528 QPs.
#
#   OUT=/some/dir tools/device-ceiling.sh      (GICOMM_DEVICE_BUILD: the build folder, default build/device)
#
# CEILING_STEPS=cpu: only the cpu engine's check, side by side in one run, three times over
# (run-index 0..2): for pointer writes of 8, 64, 512 and 4096 B at 2 QPs and 2 engine threads
# (and 4096 B at 1 QP and 1 thread), the earlier ceiling (engine_ceiling method=window, the depth
# and rounds the driver hook used: 4096 WQEs per QP, median of 3), the ceiling as the hook now
# measures it (method=steady, its depths, best of 5) and mini-proxy's goodput on softnic-cpu (16
# CTAs and 2 workers; 1 and 1; batch 16), whose records carry the hook's ceiling. Builds gicomm-bench-engine, gicomm-bench-goodput and
# test_bench_ceiling_cpu only. Expected on one H200: ~60-120 s to build in a fresh folder (less
# where it exists), then ~30 s of steps (bound: TOTAL_S, default 240 in this mode). summary.txt
# then ends with "cpu engine: old vs new ceiling beside mini-proxy's goodput", one line per run
# and size, and "new ceiling >= rate: PASS" (or FAIL, naming the points); CEILING_OUT (default
# $OUT/ceiling) is where its four files go.
#
# Expected on one H200 (16 cores): configure and build of three drivers ~120 s (a fresh build folder),
# measurements ~70 s (two GPUs: ~120 s); hard bound: every step has its own timeout and no step
# starts after TOTAL_S (default 540) s.
# Writes under $OUT/ceiling/ (four files):
#   summary.txt    every rate beside its engine ceiling (ratio, model-NIC bound or not), the
#                  ceilings per shape, then every step's exit status
#   steps.tsv      step, exit status (124: timed out), seconds
#   records.jsonl  every record of every driver run
#   logs.tar.gz    every step's log, nvidia-smi clocks before and after
# What to check: every step exited 0; every msg_rate / goodput_gbps record in summary.txt has an
# engine ceiling (no "MISSING"); the softnic-gpu-same points ran (the same-GPU placement of the
# harness is new: it waits on streams, never on the device, and frees device memory only once the
# engine stopped); whether points are model-NIC bound is the finding, not a pass/fail.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT_DIR=${CEILING_OUT:-${OUT:-$PWD/device-out}/ceiling}
BUILD=${GICOMM_DEVICE_BUILD:-build/device}
STEPS_MODE=${CEILING_STEPS:-all}
case "$STEPS_MODE" in
  all) TOTAL_S=${TOTAL_S:-540} ;;
  cpu) TOTAL_S=${TOTAL_S:-240} ;;
  *) echo "CEILING_STEPS must be all or cpu, not '$STEPS_MODE'" >&2; exit 2 ;;
esac
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT_DIR"
LOGS=$(mktemp -d)
WORK=$(mktemp -d)
STEPS=$OUT_DIR/steps.tsv
printf 'step\texit\tseconds\n' > "$STEPS"
START=$(date +%s)
[ -f tools/device-env.sh ] && source tools/device-env.sh  # carried wheels (nlohmann-json headers)

source tools/device-steps.sh  # step NAME LIMIT_S CMD...

# drive NAME DRIVER EXPERIMENT POINTS_FILE [flags]: one driver run over a points file (RUN_INDEX:
# its run index, default 0).
drive() {
  local name=$1 driver=$2 experiment=$3 points=$4
  shift 4
  step "$name" 120 "$BUILD/bin/$driver" --experiment "$experiment" --points "$points" \
    --out "$WORK/$name.jsonl" --campaign device-ceiling --host "$(hostname -s)" --platform local \
    --provenance-id device --run-index "${RUN_INDEX:-0}" --timeout-ms 2000 "$@"
}

# finish: the records, the summary (its exit status is the script's), the logs.
finish() {
  nvidia-smi -q -d CLOCK > "$LOGS/clocks-after.txt" 2>&1
  cat "$WORK"/*.jsonl > "$OUT_DIR/records.jsonl" 2>/dev/null
  ${PYTHON:-python3} tools/ceiling_summary.py "$OUT_DIR/records.jsonl" > "$OUT_DIR/summary.txt" 2>&1
  local rc=$?
  { echo; echo "steps:"; cat "$STEPS"; } >> "$OUT_DIR/summary.txt"
  tar -czf "$OUT_DIR/logs.tar.gz" -C "$LOGS" .
  rm -rf "$LOGS" "$WORK"
  cat "$OUT_DIR/summary.txt"
  exit $rc
}

# The cpu engine: the earlier ceiling, the steady one and mini-proxy's goodput, per run.
cpu_engine_check() {
  local run p s ctas depth qps
  : > "$WORK/cpu-old.points"
  : > "$WORK/cpu-new.points"
  : > "$WORK/cpu-gp.points"
  # size, CTAs (2 workers, QPs and engine threads at 16 CTAs; 1 at 1), the steady depth (the
  # hook's short_plan: 32768 WQEs or 64 MiB per round over the QPs); the earlier hook used 4096.
  for p in "8 16 16384" "64 16 16384" "512 16 16384" "4096 16 8192" "4096 1 16384"; do
    set -- $p
    s=$1 ctas=$2 depth=$3 qps=$((ctas == 1 ? 1 : 2))
    echo "{\"point_id\": \"ec-cpu-window-$s-$qps\", \"params\": {\"engine\": \"cpu\", \"qps\": $qps, \"threads\": $qps, \"depth\": 4096, \"payload\": \"pointer\", \"size\": $s, \"method\": \"window\"}}" >> "$WORK/cpu-old.points"
    echo "{\"point_id\": \"ec-cpu-steady-$s-$qps\", \"params\": {\"engine\": \"cpu\", \"qps\": $qps, \"threads\": $qps, \"depth\": $depth, \"payload\": \"pointer\", \"size\": $s, \"method\": \"steady\"}}" >> "$WORK/cpu-new.points"
    echo "{\"point_id\": \"gp-proxy-$s-$ctas\", \"transport\": \"mini-proxy\", \"nic_backend\": \"softnic-cpu\", \"params\": {\"ctas\": $ctas, \"size\": $s, \"batch\": 16}}" >> "$WORK/cpu-gp.points"
  done
  for run in 0 1 2; do
    RUN_INDEX=$run drive "cpu-old-$run" gicomm-bench-engine engine_ceiling "$WORK/cpu-old.points" --warmup 1 --iters 3
    RUN_INDEX=$run drive "cpu-new-$run" gicomm-bench-engine engine_ceiling "$WORK/cpu-new.points" --warmup 1 --iters 5
    RUN_INDEX=$run drive "cpu-goodput-$run" gicomm-bench-goodput goodput "$WORK/cpu-gp.points"
  done
}

nvidia-smi -q -d CLOCK > "$LOGS/clocks-before.txt" 2>&1
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

step configure 120 cmake -S native -B "$BUILD" -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release
if [ "$STEPS_MODE" = cpu ]; then
  step build 180 cmake --build "$BUILD" -j "$(nproc)" --target gicomm-bench-engine gicomm-bench-goodput \
    test_bench_ceiling_cpu
  step host_test 60 "$BUILD/bin/test_bench_ceiling_cpu"
  cpu_engine_check
  finish
fi
step build 360 cmake --build "$BUILD" -j "$(nproc)" --target gicomm-bench-engine gicomm-bench-gda \
  gicomm-bench-goodput test_bench_engine_ceiling test_bench_ceiling_cpu
step host_test 60 "$BUILD/bin/test_bench_engine_ceiling"
step host_test_cpu 60 "$BUILD/bin/test_bench_ceiling_cpu"

# The placements this machine has: the same-GPU engine always, the peer engine with two GPUs.
placements="softnic-gpu-same"
[ "$GPUS" -ge 2 ] && placements="softnic-gpu-same softnic-gpu"

for nb in $placements; do
  engine=gpu-same
  [ "$nb" = softnic-gpu ] && engine=gpu
  # engine_ceiling per shape: the inline sizes and pointer sizes the paper's rate figures sweep.
  : > "$WORK/ec-$nb.points"
  for s in 8 32 64 128 220; do
    echo "{\"point_id\": \"ec-$engine-inline-$s\", \"params\": {\"engine\": \"$engine\", \"qps\": 16, \"depth\": 1024, \"payload\": \"inline\", \"size\": $s}}" >> "$WORK/ec-$nb.points"
  done
  for s in 8 512 4096 65536; do
    echo "{\"point_id\": \"ec-$engine-pointer-$s\", \"params\": {\"engine\": \"$engine\", \"qps\": 16, \"depth\": 256, \"payload\": \"pointer\", \"size\": $s}}" >> "$WORK/ec-$nb.points"
  done
  # 8 B at 528 QPs (the warp-mode rate point's QP count) at the rate hook's depth before (62 a QP)
  # and now (256), and deeper: how much of a short round is the engine's ramp.
  for d in 62 256 2048; do
    echo "{\"point_id\": \"ec-$engine-inline-8-528-$d\", \"params\": {\"engine\": \"$engine\", \"qps\": 528, \"depth\": $d, \"payload\": \"inline\", \"size\": 8}}" >> "$WORK/ec-$nb.points"
  done
  drive "engine_ceiling-$nb" gicomm-bench-engine engine_ceiling "$WORK/ec-$nb.points"

  # Tables 5 and 13 (gda_msg_rate): 8-byte inline writes, one and several QPs.
  cat > "$WORK/mr-$nb.points" <<EOF
{"point_id": "mr-$nb-1", "nic_backend": "$nb", "params": {"mode": "thread", "blocks": 1, "threads": 1, "qps": 1, "batch": 16, "wqes": 200000}}
{"point_id": "mr-$nb-16", "nic_backend": "$nb", "params": {"mode": "thread", "blocks": 16, "threads": 1, "qps": 16, "batch": 16, "wqes": 4000000}}
{"point_id": "mr-$nb-64", "nic_backend": "$nb", "params": {"mode": "thread", "blocks": 64, "threads": 1, "qps": 64, "batch": 16, "wqes": 4000000}}
{"point_id": "mr-$nb-warp132", "nic_backend": "$nb", "params": {"mode": "warp", "blocks": 132, "threads": 128, "qps": 132, "batch": 32, "wqes": 8000000}}
{"point_id": "mr-$nb-warp528", "nic_backend": "$nb", "params": {"mode": "warp", "blocks": 132, "threads": 128, "qps": 528, "batch": 32, "wqes": 8000000}}
EOF
  drive "gda_msg_rate-$nb" gicomm-bench-gda gda_msg_rate "$WORK/mr-$nb.points"

  # Figure 3 (inline_payload): 16 QPs x 16 per doorbell, inline and pointer payloads.
  : > "$WORK/ip-$nb.points"
  for p in inline pointer; do
    for s in 8 64 220; do
      echo "{\"point_id\": \"ip-$nb-$p-$s\", \"nic_backend\": \"$nb\", \"params\": {\"payload\": \"$p\", \"size\": $s, \"qps\": 16, \"batch\": 16}}" >> "$WORK/ip-$nb.points"
    done
  done
  drive "inline_payload-$nb" gicomm-bench-gda inline_payload "$WORK/ip-$nb.points" --warmup 50 --iters 500

  # Figure 8 (goodput): pointer writes from 16 CTAs.
  : > "$WORK/gp-$nb.points"
  for s in 8 4096 65536; do
    echo "{\"point_id\": \"gp-$nb-$s\", \"transport\": \"mini-gda\", \"nic_backend\": \"$nb\", \"params\": {\"ctas\": 16, \"size\": $s, \"batch\": 16}}" >> "$WORK/gp-$nb.points"
  done
  drive "goodput-$nb" gicomm-bench-goodput goodput "$WORK/gp-$nb.points"
done
# mini-proxy's goodput on the cpu engine beside the earlier and the steady ceiling of its shapes.
cpu_engine_check
finish
