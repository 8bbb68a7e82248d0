#!/usr/bin/env bash
# Scratch probe (not committed as is): the same-GPU engine's pointer ceiling against QPs and warps.
set -u
OUT=${OUT:-/tmp/pout}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
. tools/device-env.sh 2>/dev/null
{ which ncu nsys cuobjdump nvdisasm compute-sanitizer; ls /usr/local/cuda*/bin 2>/dev/null | tr '\n' ' '; } > "$OUT/tools.txt" 2>&1
b=${GICOMM_DEVICE_BUILD:-build/device}
{ [ -f "$b/CMakeCache.txt" ] || cmake -S native -B "$b" -DGICOMM_CUDA_ARCHS=90; } > "$OUT/build.log" 2>&1
cmake --build "$b" -j 16 --target gicomm-bench-engine >> "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
i=0
: > "$OUT/points.jsonl"
for size in 4096 65536; do for q in 1 4 16 64; do for w in 1 4; do
  i=$((i+1))
  echo "{\"point_id\": \"p$i\", \"params\": {\"engine\": \"gpu-same\", \"payload\": \"pointer\", \"size\": $size, \"qps\": $q, \"depth\": 256, \"engine_warps_per_block\": $w}}" >> "$OUT/points.jsonl"
done; done; done
timeout 200 "$b/bin/gicomm-bench-engine" --experiment engine_ceiling --points "$OUT/points.jsonl" --out "$OUT/records.jsonl" \
  --campaign probe --host h200x1 --platform h200 --provenance-id probe --run-index 0 --warmup 1 --iters 3 --timeout-ms 20000 > "$OUT/run.log" 2>&1
echo "exit $?"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
pts = {json.loads(l)["point_id"]: json.loads(l)["params"] for l in open(f"{out}/points.jsonl")}
for l in open(f"{out}/records.jsonl"):
    r = json.loads(l)
    p = pts[r["point_id"]]
    st = r.get("stats") or {}
    p50 = st.get("p50")
    gbs = p50 * p["size"] / 1e3 if p50 else None
    print(p["size"], "qps", p["qps"], "wpb", p["engine_warps_per_block"], r["status"], "MWQE/s", p50, "GB/s", gbs, "MHz", r.get("sm_clock_mhz"), r.get("error", "")[:150])
PY
