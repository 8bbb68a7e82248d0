#!/usr/bin/env bash
# Scratch device call: device_check (this tree: help_copies picks its rounds with one offset) against 4d1b5fe.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p "$R"
BASE=4d1b5fe OUT=$R/check TOTAL_S=200 GOALS_S=100 timeout 230 bash native/tests/softnic/device_check.sh > "$R/check.log" 2>&1
echo "check rc $?" >> "$R/check.log"
tar -czf "$OUT/r.tgz" -C "$OUT" r
sed -n 3,22p "$R/check/summary.txt"; grep -E "passed|FAIL|fail" "$R/check/summary.txt" | head; grep -P "\t[1-9]" "$R/check/steps.tsv"
