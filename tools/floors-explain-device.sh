#!/usr/bin/env bash
# One device-tool call on a lent GPU machine (one H200; two NVLink peers add the cross-GPU case):
# measures, side by side, what explains two gaps between gicomm's numbers and the floors under them
# (docs/mini-proxy.md, "The tuned enqueue against its floor"; docs/nvlink.md, "The direct store's
# round trip against a flag ping-pong").
#   (a) mini-proxy's tuned enqueue: gicomm-bench-proxy proxy_one_op in issue mode records issue_ns
#       (the whole enqueue call timed, paper-comparable) and issue_store_ns (the 16-byte store alone,
#       timed as the floor is) for each store scope; floors_explain times the bare 16-byte store to
#       pinned host memory, alone and after an acquire poll of a host word.
#   (b) the NVLink direct store's round trip: floors_explain's flag ping-pong with the direct
#       store's p (flag only) and put (payload, then a system-scope release of the flag) protocols,
#       a GPU-scope release and a fence-free 16-byte payload+flag store; between two blocks of one
#       GPU always, between GPU 0 and GPU 1 when they are peers.
# Usage, from the repository root:  tools/floors-explain-device.sh
# Builds only gicomm-bench-proxy and floors_explain into ${GICOMM_DEVICE_BUILD:-build/device}
# (reused when built: about 2-4 min the first time, seconds after). Measuring takes under 60 s.
# Writes $OUT/blindcheck/: floors-explain.jsonl (one JSON line a case), proxy_one_op.jsonl (the
# driver's records), log.txt (build and run logs, clocks before and after).
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/gicomm-out}/blindcheck
build=${GICOMM_DEVICE_BUILD:-build/device}
mkdir -p "$out" "$build/floors-explain"
log=$out/log.txt
: > "$log"
say() { echo "== $(date -u +%FT%TZ) $*" | tee -a "$log"; }

say "build into $build"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S native -B "$build" -DGICOMM_CUDA_ARCHS=90 >> "$log" 2>&1 || say "configure failed (see above)"
fi
t0=$(date +%s)
cmake --build "$build" -j "$(nproc)" --target gicomm-bench-proxy >> "$log" 2>&1
say "gicomm-bench-proxy build exit $? in $(( $(date +%s) - t0 )) s"
fe=$build/floors-explain/floors_explain
src=tools/floors-explain/floors_explain.cu
if [ ! -x "$fe" ] || [ "$src" -nt "$fe" ] || [ native/baselines/nvlink/dissect_kernels.cuh -nt "$fe" ]; then
  nvcc -std=c++17 -O3 -arch=sm_90 -Inative/baselines -o "$fe" "$src" >> "$log" 2>&1
  say "floors_explain build exit $?"
fi
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,driver_version --format=csv >> "$log" 2>&1

say "(b) flag ping-pong and (a) bare 16-byte store: floors_explain (bounded 25 s)"
: > "$out/floors-explain.jsonl"
timeout 15 "$fe" --iters 2000 --timeout-ms 3000 >> "$out/floors-explain.jsonl" 2>> "$log"
say "floors_explain exit $?"
timeout 10 "$fe" --only flag --peer --iters 2000 --timeout-ms 3000 >> "$out/floors-explain.jsonl" 2>> "$log"
say "floors_explain --peer exit $?"

say "(a) proxy_one_op issue mode, tuned enqueue: issue_ns beside issue_store_ns (bounded 30 s)"
points=$out/points.jsonl
: > "$points"
for scope in sys gpu weak; do
  for state in warm cold; do
    [ "$scope" != sys ] && [ "$state" = cold ] && continue
    printf '{"point_id": "explain-%s-%s", "transport": "mini-proxy", "nic_backend": "softnic-cpu", "params": {"mode": "issue", "enqueue": "tuned", "store": "%s", "state": "%s", "completion": "host", "workers": 1, "batch": 1}}\n' \
      "$scope" "$state" "$scope" "$state" >> "$points"
  done
done
timeout 30 "$build/bin/gicomm-bench-proxy" --experiment proxy_one_op --points "$points" \
  --out "$out/proxy_one_op.jsonl" --campaign floors-explain --host device --platform h200 \
  --run-index 0 --provenance-id floors-explain --iters 2000 --warmup 100 --timeout-ms 2000 >> "$log" 2>&1
say "gicomm-bench-proxy exit $?"
rm -f "$points"
nvidia-smi --query-gpu=index,clocks.sm --format=csv >> "$log" 2>&1
[ -f "$out/proxy_one_op.jsonl" ] && python3 - "$out/proxy_one_op.jsonl" <<'EOF' | tee -a "$log"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    p = r.get("params", {})
    s = r.get("stats") or {}
    print(r["metric"], p.get("store"), p.get("state"), r["status"], s.get("p50"), r.get("error", ""))
EOF
say "done"
