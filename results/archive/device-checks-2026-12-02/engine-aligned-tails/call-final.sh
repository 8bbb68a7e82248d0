#!/usr/bin/env bash
# scratch: engine check (this tree: aligned copies with tails on the aligned road) against 65c8777, then the h200x1-softnic-gpu campaign
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$(mktemp -d); T0=$(date +%s)
mkdir -p $R/check $R/campaign
OUT=$R/check BASE=65c8777 TOTAL_S=200 timeout 230 bash native/tests/softnic/device_check.sh > $R/check/stdout.txt 2>&1
echo "device_check rc $? $(( $(date +%s)-T0 )) s"
grep -A22 "^== softnic-gpu-same" $R/check/summary.txt | head -34; grep -P "\t[1-9]" $R/check/steps.tsv
OUT=$R/campaign DEADLINE_S=${CAMPAIGN_S:-380} bash tools/device-campaign.sh config/campaigns/h200x1-softnic-gpu.yaml --config runs=2 > $R/campaign/console.txt 2>&1
echo "campaign rc $? $(( $(date +%s)-T0 )) s"
tail -3 $R/campaign/snakemake.log
tar -czf $OUT/call9.tar.gz -C $R .
