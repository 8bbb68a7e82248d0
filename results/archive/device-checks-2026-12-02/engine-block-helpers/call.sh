#!/usr/bin/env bash
# scratch: engine check (helpers, ldcv) vs HEAD engine; plus helpers+ldcg goals
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $OUT/check $OUT/cg
CG=$(mktemp -d)
( cmake -S native -B $CG -DGICOMM_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DGICOMM_SOFTNIC_PAYLOAD_LDCG > $OUT/cg/build.log 2>&1 &&
  cmake --build $CG -j 4 --target gicomm-softnic-engine-goals >> $OUT/cg/build.log 2>&1; echo "cg build rc $?" >> $OUT/cg/build.log ) &
CGPID=$!
OUT=$OUT/check BASE=HEAD TOTAL_S=400 timeout 430 bash native/tests/softnic/device_check.sh > $OUT/check/stdout.txt 2>&1
echo "device_check rc $?"
wait $CGPID
tail -1 $OUT/cg/build.log
if [ -x $CG/bin/gicomm-softnic-engine-goals ]; then
  nvidia-smi --query-gpu=clocks.sm --format=csv > $OUT/cg/clock.txt
  timeout 120 $CG/bin/gicomm-softnic-engine-goals --label helpers-ldcg > $OUT/cg/goals.jsonl 2> $OUT/cg/goals.err; echo "cg goals rc $?"
  python3 native/tests/softnic/goals_table.py $OUT/cg/goals.jsonl $OUT/check/goals-after.jsonl > $OUT/cg/table-vs-cv.txt 2>&1
fi
tail -60 $OUT/check/summary.txt
