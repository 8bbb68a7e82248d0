#!/usr/bin/env bash
# scratch: what the CQE's system-scope release costs. Goals only (no protocol checks: host-side
# consumers would need the system scope): the engine built with GICOMM_EXPERIMENT_RELEASE_GPU (CQEs
# released at GPU scope; every consumer in the goals program is a kernel on the same GPU) against
# the same tree without it.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$(mktemp -d); T0=$(date +%s); A=$(mktemp -d); B=$(mktemp -d)
( cmake -S native -B $A -DGICOMM_CUDA_ARCHS=90 -DCMAKE_CUDA_FLAGS=-DGICOMM_EXPERIMENT_RELEASE_GPU > $R/build-gpu.log 2>&1 &&
  cmake --build $A -j 8 --target gicomm-softnic-engine-goals >> $R/build-gpu.log 2>&1; echo "gpu build rc $?" >> $R/build-gpu.log ) &
( cmake -S native -B $B -DGICOMM_CUDA_ARCHS=90 > $R/build-sys.log 2>&1 &&
  cmake --build $B -j 8 --target gicomm-softnic-engine-goals >> $R/build-sys.log 2>&1; echo "sys build rc $?" >> $R/build-sys.log ) &
wait; tail -1 $R/build-gpu.log $R/build-sys.log; echo "builds $(( $(date +%s)-T0 )) s"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv > $R/clock-before.txt
for r in a b; do
  timeout 90 $B/bin/gicomm-softnic-engine-goals --label sys$r > $R/sys$r.jsonl 2> $R/sys$r.err; echo "sys$r rc $?"
  timeout 90 $A/bin/gicomm-softnic-engine-goals --label gpu$r > $R/gpu$r.jsonl 2> $R/gpu$r.err; echo "gpu$r rc $?"
done
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv > $R/clock-after.txt
for r in a b; do python3 native/tests/softnic/goals_table.py $R/gpu$r.jsonl $R/sys$r.jsonl > $R/table-$r.txt 2>&1; done
cat $R/table-a.txt; grep -A14 "^shape" $R/table-b.txt
tar -czf $OUT/call7.tar.gz -C $R .
