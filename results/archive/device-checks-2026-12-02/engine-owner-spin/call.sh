#!/usr/bin/env bash
# scratch: engine check, a helped warp 0 never sleeps, vs 735e3a3
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$(mktemp -d); T0=$(date +%s)
OUT=$R BASE=735e3a3 TOTAL_S=300 timeout 330 bash native/tests/softnic/device_check.sh > $R/stdout.txt 2>&1
echo "device_check rc $? $(( $(date +%s)-T0 )) s"
sed -n '/^== softnic-gpu-same/,/^# steps/p' $R/summary.txt; cat $R/steps.tsv
tar -czf $OUT/call5.tar.gz -C $R .
