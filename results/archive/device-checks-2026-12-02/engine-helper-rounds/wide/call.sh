#!/usr/bin/env bash
# Scratch device call: device_check (this tree: helpers. rounds 32 blocks a lane, against e15b15e),
# then the goals of a 24-block variant and of this tree again (prebuilt), in one call.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm --format=csv > "$R/clk0.txt" 2>&1
BASE=e15b15e OUT=$R/check TOTAL_S=400 GOALS_S=120 timeout 470 bash native/tests/softnic/device_check.sh > "$R/check.log" 2>&1
echo "check rc $?" >> "$R/check.log"
for v in h24 h32; do
  nvidia-smi --query-gpu=clocks.sm --format=csv,noheader >> "$R/clk-$v.txt" 2>&1
  timeout 100 devbin/goals-$v --label $v > "$R/goals-$v.jsonl" 2> "$R/goals-$v.err"
  echo "$v rc $?" >> "$R/rc.txt"
done
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm --format=csv > "$R/clk1.txt" 2>&1
tar -czf "$OUT/r.tgz" -C "$OUT" r
tail -40 "$R/check/summary.txt"; cat "$R/rc.txt"
