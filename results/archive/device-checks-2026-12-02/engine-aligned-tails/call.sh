#!/usr/bin/env bash
# Scratch device call: device_check (this tree: aligned copies with a partial last block on the
# aligned road, their tails by their own lanes; the new signal checks at 220 and 1000 B), against
# 65c8777.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm --format=csv > "$R/clk0.txt" 2>&1
BASE=65c8777 OUT=$R/check TOTAL_S=400 GOALS_S=120 timeout 470 bash native/tests/softnic/device_check.sh > "$R/check.log" 2>&1
echo "check rc $?" >> "$R/check.log"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm --format=csv > "$R/clk1.txt" 2>&1
tar -czf "$OUT/r.tgz" -C "$OUT" r
sed -n 3,22p "$R/check/summary.txt"; grep -E "passed|FAIL|fail|signal-" "$R/check/summary.txt" | head -20
