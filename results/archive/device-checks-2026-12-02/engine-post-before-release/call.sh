#!/usr/bin/env bash
# Scratch device call: device_check (this tree: the next pass's copies posted before the pending
# pass's CQEs are released), against e15b15e.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm --format=csv > "$R/clk0.txt" 2>&1
BASE=e15b15e OUT=$R/check TOTAL_S=400 GOALS_S=120 timeout 470 bash native/tests/softnic/device_check.sh > "$R/check.log" 2>&1
echo "check rc $?" >> "$R/check.log"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm --format=csv > "$R/clk1.txt" 2>&1
tar -czf "$OUT/r.tgz" -C "$OUT" r
sed -n 1,40p "$R/check/summary.txt"; grep -E "passed|FAIL|fail" "$R/check/summary.txt" | head
