#!/usr/bin/env bash
set -u
O=$OUT
t0=$(date +%s)
OUT=$O NICRUN_SKIP=connection_scaling DEADLINE_S=${NICRUN_S:-180} native/emu/tools/nic-runs-device.sh > "$O/nicruns.console" 2>&1
echo "nic-runs exit $? after $(( $(date +%s) - t0 )) s" | tee "$O/call2.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv >> "$O/call2.txt"
