#!/usr/bin/env bash
# scratch: engine check, the helped warp 0 going on while its helpers copy (deferred CQEs; pending flag in a register, small passes skip the vote), vs HEAD's engine
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$(mktemp -d); T0=$(date +%s)
OUT=$R TOTAL_S=300 timeout 330 bash native/tests/softnic/device_check.sh > $R/stdout.txt 2>&1
echo "device_check rc $? $(( $(date +%s)-T0 )) s"
sed -n '/^== softnic-gpu-same/,/^# steps/p' $R/summary.txt; cat $R/steps.tsv
grep -h "FAIL\|mismatch\|timed out\|error" $R/stdout.txt | head -20
tar -czf $OUT/call9.tar.gz -C $R .
