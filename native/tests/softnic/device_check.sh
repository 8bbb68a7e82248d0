#!/usr/bin/env bash
# The softnic gpu engine on a GPU machine, in one bounded call: build, the CPU tests of the warp
# logic, every GPU check, and the engine's goals measured side by side with the engine it replaced.
#
#   bash native/tests/softnic/device_check.sh            (from the repository root)
#
# Expected: about 60 s on nvidia-h200 (one H200; 16 cores; measured 2026-12-02): the two builds in
# parallel ~50 s, the CPU tests, GPU checks and goal measurements a few seconds each. With two GPUs
# also the peer placement (softnic-gpu), a little longer. Hard bound: every step has its own timeout and the
# whole script stops starting steps after TOTAL_S (default 540) seconds.
#
# Writes under $OUT (default ./device-check-out), five files:
#   summary.txt         the goals table (goals_table.py), then every step's exit status
#   steps.tsv           step, exit status (124: timed out), seconds
#   goals-after.jsonl   the measurements with this tree's engine (one JSON object per line)
#   goals-before.jsonl  the same with the replaced engine (empty when no baseline was found)
#   logs.tar.gz         every step's log, nvidia-smi clocks before and after
# What to check: summary.txt says "all evaluated goals met"; every step in steps.tsv exited 0
# (the GPU checks print "all checks passed"); the SM clock beside each figure.
#
# The replaced ("before") engine: the softnic sources of BASE (default b813484, the engine last
# measured and landed: block passes, the lone-op form of the helped kernel; any engine from 735e3a3
# on builds against this tree, older ones lack the default warp count the gda session takes from
# the engine's header), from $GICOMM_BASELINE_TREE (default ./.device-baseline: a directory holding
# native/src/nic/softnic/ of that commit, made before the call with
#   mkdir -p .device-baseline && git archive b813484 native/src/nic/softnic | tar -x -C .device-baseline
# an untracked directory that travels with the working tree), else from git when this checkout
# holds BASE. Without either the before run is skipped and summary.txt says so.
# The serial engine of goal 2 (BASE=c6ea099: multi-WQEBB WQEs on lane 0, one-lane payload copies)
# predates three names this tree's callers use, and what later engines do before starting on their
# producer's GPU; serial-engine-shim.patch adds those names to its header (its default of 4 warps a
# block, same_gpu() false so no deadline is asked for, a deadline that never fires) and to its
# start() the context preparation (stack limit, printf FIFO and heap committed first; without it a
# producer's first launch beside the engine waited for the engine to end). Its kernel is untouched.
# It runs on every placement the machine has, and goals_table.py evaluates goal 2 on each.
set -u

OUT=${OUT:-$PWD/device-check-out}
BASE=${BASE:-b813484}
TOTAL_S=${TOTAL_S:-540}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT"
LOGS=$(mktemp -d)
WORK=$(mktemp -d)
STEPS=$OUT/steps.tsv
printf 'step\texit\tseconds\n' > "$STEPS"
START=$(date +%s)
JOBS=$(nproc)

source tools/device-steps.sh  # step NAME LIMIT_S CMD...

nvidia-smi -q -d CLOCK > "$LOGS/clocks-before.txt" 2>&1
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,driver_version --format=csv > "$LOGS/gpus.txt" 2>&1

# ---- builds: this tree, and the replaced engine beside it (in parallel) ---------------------------
BASELINE=""
GICOMM_BASELINE_TREE=${GICOMM_BASELINE_TREE:-$PWD/.device-baseline}
if [ -f "$GICOMM_BASELINE_TREE/native/src/nic/softnic/gpu_engine.cu" ]; then
  BASELINE=$(cd "$GICOMM_BASELINE_TREE" && pwd)
elif git rev-parse --verify -q "$BASE^{commit}" > /dev/null 2>&1; then
  mkdir -p "$WORK/baseline"
  git archive "$BASE" native/src/nic/softnic | tar -x -C "$WORK/baseline" && BASELINE=$WORK/baseline
fi

build_after() {
  cmake -S native -B "$WORK/after" -DGICOMM_CUDA_ARCHS=90 &&
    cmake --build "$WORK/after" -j "$JOBS" --target gicomm-gda-gpu-check gicomm-softnic-gpu-check \
      gicomm-softnic-engine-goals test_softnic_protocol test_warp_plan &&
    { cmake --build "$WORK/after" -j "$JOBS" --target test_mlx5_formats || echo "no rdma-core: test_mlx5_formats not built"; }
}
# The replaced engine: this tree with the softnic sources of BASE (all but its CMakeLists.txt, which
# would drop the ceiling measurement); only the measurement program is built against it.
build_before() {
  mkdir -p "$WORK/before-src" && cp -a native config "$WORK/before-src/" &&
    rm -rf "$WORK/before-src/native/build" &&
    (cd "$BASELINE/native/src/nic/softnic" && find . -type f ! -name CMakeLists.txt -print0 |
      xargs -0 -I{} cp {} "$WORK/before-src/native/src/nic/softnic/{}") &&
    if [ "$BASE" = c6ea099 ]; then
      (cd "$WORK/before-src" && git apply -p1 "$SHIM")
    fi &&
    cmake -S "$WORK/before-src/native" -B "$WORK/before" -DGICOMM_CUDA_ARCHS=90 &&
    cmake --build "$WORK/before" -j "$JOBS" --target gicomm-softnic-engine-goals
}
JOBS=$((JOBS > 2 ? JOBS / 2 : 1))
SHIM=$PWD/native/tests/softnic/serial-engine-shim.patch
export WORK JOBS BASELINE BASE SHIM
export -f build_after build_before
step build_after 300 bash -c build_after &
PID_AFTER=$!
PID_BEFORE=""
if [ -n "$BASELINE" ]; then
  step build_before 300 bash -c build_before &
  PID_BEFORE=$!
else
  printf 'build_before\tskipped (no baseline in %s, no git history holding %s)\t0\n' \
    "$GICOMM_BASELINE_TREE" "$BASE" >> "$STEPS"
fi
wait "$PID_AFTER"
AFTER_OK=$?
BEFORE_OK=1
[ -n "$PID_BEFORE" ] && { wait "$PID_BEFORE"; BEFORE_OK=$?; }
BIN=$WORK/after/bin

# ---- tests and measurements --------------------------------------------------------------------
: > "$OUT/goals-after.jsonl"
: > "$OUT/goals-before.jsonl"
if [ "$AFTER_OK" -eq 0 ]; then
  step cpu_warp_plan 60 "$BIN/test_warp_plan"
  step cpu_protocol 120 "$BIN/test_softnic_protocol"
  [ -x "$BIN/test_mlx5_formats" ] && step cpu_mlx5_formats 60 "$BIN/test_mlx5_formats"
  step gpu_engine_protocol_pinned 150 "$BIN/test_softnic_protocol" --engine gpu
  step gpu_engine_check 180 "$BIN/gicomm-softnic-gpu-check"
  step gda_gpu_protocol 240 "$BIN/gicomm-gda-gpu-check"
  step goals_after "${GOALS_S:-240}" bash -c "'$BIN/gicomm-softnic-engine-goals' --label after > '$OUT/goals-after.jsonl'"
fi
if [ "$BEFORE_OK" -eq 0 ]; then
  # The replaced engine predates the engine's own eager-loading default: without it its first
  # kernels, loaded lazily while the same-GPU engine runs, wait for the engine's watchdog.
  step goals_before "${GOALS_S:-240}" env CUDA_MODULE_LOADING=EAGER bash -c "'$WORK/before/bin/gicomm-softnic-engine-goals' --label before > '$OUT/goals-before.jsonl'"
fi
nvidia-smi -q -d CLOCK > "$LOGS/clocks-after.txt" 2>&1

# ---- summary -----------------------------------------------------------------------------------
{
  echo "# softnic gpu engine device check ($(date -u +%FT%TZ), $(head -2 "$LOGS/gpus.txt" | tail -1))"
  echo "# softnic numbers: the model NIC on the GPU, not a NIC; 'before' = the engine of $BASE"
  if [ -z "$BASELINE" ]; then
    echo "# no before run: no baseline of $BASE in $GICOMM_BASELINE_TREE and no git history here"
  fi
  if [ -s "$OUT/goals-before.jsonl" ]; then
    python3 native/tests/softnic/goals_table.py "$OUT/goals-after.jsonl" "$OUT/goals-before.jsonl" \
      $([ "$BASE" = c6ea099 ] && echo --before-serial)
  else
    python3 native/tests/softnic/goals_table.py "$OUT/goals-after.jsonl"
  fi
  echo
  echo "# steps (exit 124: timed out)"
  cat "$STEPS"
  for f in "$LOGS"/gpu_*.log "$LOGS"/gda_gpu_protocol.log "$LOGS"/cpu_*.log; do
    [ -f "$f" ] && { echo "--- tail of $(basename "$f")"; tail -5 "$f"; }
  done
} > "$OUT/summary.txt" 2>&1
cp "$STEPS" "$LOGS/"
tar -czf "$OUT/logs.tar.gz" -C "$LOGS" . 2> /dev/null
cat "$OUT/summary.txt"
echo "total $(($(date +%s) - START)) s; results in $OUT"
rm -rf "$WORK" "$LOGS"
