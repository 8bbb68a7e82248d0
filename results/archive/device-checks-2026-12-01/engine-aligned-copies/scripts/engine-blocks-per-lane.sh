#!/usr/bin/env bash
set -u
OUT=${OUT:-/tmp/vout}; mkdir -p "$OUT/var"
W=$(mktemp -d)
sn=native/src/nic/softnic
mk() {
  local n=$1 e=$2
  mkdir -p "$W/$n" && cp -a native config "$W/$n/" && rm -rf "$W/$n/native/build"
  sed -i "$e" "$W/$n/$sn/include/gicomm/softnic/warp_plan.h"
  cmake -S "$W/$n/native" -B "$W/$n/b" -DGICOMM_CUDA_ARCHS=90 > "$OUT/var/$n.build.log" 2>&1 &&
    cmake --build "$W/$n/b" -j 8 --target gicomm-softnic-engine-goals >> "$OUT/var/$n.build.log" 2>&1
}
mk k8 's/constexpr int kAlignedBlocksPerLane = 16;/constexpr int kAlignedBlocksPerLane = 8;/' &
mk k12 's/constexpr int kAlignedBlocksPerLane = 16;/constexpr int kAlignedBlocksPerLane = 12;/' &
wait
for n in k8 k12; do
  timeout 120 "$W/$n/b/bin/gicomm-softnic-engine-goals" --label "$n" > "$OUT/var/goals-$n.jsonl" 2> "$OUT/var/$n.err"; echo "$n exit $?"
done
