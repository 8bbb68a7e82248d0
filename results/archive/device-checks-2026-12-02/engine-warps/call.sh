#!/usr/bin/env bash
# scratch: engine goals with 4 and 8 warps per block (same build), then the cpu-engine ceiling check
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/goals
B=$(mktemp -d)
T0=$(date +%s)
( cmake -S native -B $B -DGICOMM_CUDA_ARCHS=90 > $OUT/goals/build.log 2>&1 &&
  cmake --build $B -j 8 --target gicomm-softnic-engine-goals >> $OUT/goals/build.log 2>&1 ); echo "goals build rc $? $(( $(date +%s)-T0 )) s"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv > $OUT/goals/clock-before.txt
for r in a b; do for w in 4 8; do
  timeout 120 $B/bin/gicomm-softnic-engine-goals --label w$w$r --engine-warps $w > $OUT/goals/w$w$r.jsonl 2> $OUT/goals/w$w$r.err; echo "goals w$w$r rc $? $(( $(date +%s)-T0 )) s"
done; done
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv > $OUT/goals/clock-after.txt
for r in a b; do python3 native/tests/softnic/goals_table.py $OUT/goals/w8$r.jsonl $OUT/goals/w4$r.jsonl > $OUT/goals/table-w8-vs-w4-$r.txt 2>&1; head -19 $OUT/goals/table-w8-vs-w4-$r.txt; done
CEILING_STEPS=cpu CEILING_OUT=$OUT/cpuceil TOTAL_S=240 GICOMM_DEVICE_BUILD=build/device timeout 400 bash tools/device-ceiling.sh > $OUT/cpuceil-stdout.txt 2>&1; echo "cpuceil rc $? $(( $(date +%s)-T0 )) s"
tail -30 $OUT/cpuceil/summary.txt
cat $OUT/cpuceil/steps.tsv
