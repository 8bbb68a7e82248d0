#!/usr/bin/env bash
# scratch: tools/device-ceiling.sh (all mode) with the hook's deeper gpu rounds and the 528-QP points
set -u
R=$(mktemp -d); T0=$(date +%s)
CEILING_OUT=$R/ceiling TOTAL_S=400 GICOMM_DEVICE_BUILD=build/device timeout 450 bash tools/device-ceiling.sh > $R/stdout.txt 2>&1
echo "device-ceiling rc $? $(( $(date +%s)-T0 )) s"
grep -E "528|132 QPs|MISSING|FAIL" $R/ceiling/summary.txt | head -20; cat $R/ceiling/steps.tsv
tar -czf $OUT/call6.tar.gz -C $R .
