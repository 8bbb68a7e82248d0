#!/usr/bin/env bash
# Device call (scratch): where a grid epoch's time goes (grid-trace.patch: %globaltimer marks of QP 0's
# jobs, the last 64 per engine run, printed to stderr when the engine stops).
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=/tmp/b
cmake -S native -B $B -DGICOMM_CUDA_ARCHS=90 > $OUT/build.log 2>&1 &&
  cmake --build $B -j 16 --target gicomm-bench-goodput gicomm-bench-engine >> $OUT/build.log 2>&1
echo "build rc $?"
run() {  # tag driver experiment params...
  local t=$1 d=$2 e=$3; shift 3
  local args=(); for kv in "$@"; do args+=(--param "$kv"); done
  timeout 90 $B/bin/$d --experiment $e "${args[@]}" --nic-backend softnic-gpu-same --out $OUT/$t.jsonl \
    --campaign trace --host h200x1 --platform local --provenance-id grid-trace > $OUT/$t.log 2>&1
  echo "rc $? $t"
}
for size in 65536 8192; do run ceil-$size gicomm-bench-engine engine_ceiling engine=gpu-same qps=1 payload=pointer size=$size depth=1024; done
run goodput-65536 gicomm-bench-goodput goodput size=65536 ctas=1 batch=16
for f in $OUT/*.log; do echo "== $f"; grep -E "Mmsg|p50" $f | head -3; done
