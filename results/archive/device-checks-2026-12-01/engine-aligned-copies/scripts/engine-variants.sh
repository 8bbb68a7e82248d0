#!/usr/bin/env bash
# Scratch experiment (not committed): engine variants side by side, goals program of each.
set -u
OUT=${OUT:-/tmp/vout}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=$(mktemp -d)
sn=native/src/nic/softnic
mk() {  # mk NAME SED_FILE SED_EXPR
  local n=$1 f=$2 e=$3
  mkdir -p "$W/$n" && cp -a native config "$W/$n/" && rm -rf "$W/$n/native/build"
  [ -n "$f" ] && sed -i "$e" "$W/$n/$f"
  if [ -n "$f" ] && cmp -s "$f" "$W/$n/$f"; then echo "variant $n: sed changed nothing" > "$OUT/$n.build.log"; return 1; fi
  cmake -S "$W/$n/native" -B "$W/$n/b" -DGICOMM_CUDA_ARCHS=90 > "$OUT/$n.build.log" 2>&1 &&
    cmake --build "$W/$n/b" -j 4 --target gicomm-softnic-engine-goals >> "$OUT/$n.build.log" 2>&1
}
mk base "" "" &
mk cg $sn/gpu_engine.cu 's/const uint4 v = global ? __ldcv(reinterpret_cast<const uint4\*>(chunk))/const uint4 v = global ? __ldcg(reinterpret_cast<const uint4*>(chunk))/' &
mk nosleep $sn/gpu_engine.cu 's/__nanosleep(a.num_qps > warp ? 32 : 1000);/if (a.num_qps <= warp) __nanosleep(1000);/' &
mk relgpu $sn/gpu_engine.cu 's/if (slot.write) order::st_release_sys_u32(&cqe.dst->w\[15\], cqe.tail);/if (slot.write) order::st_release_gpu_u32(\&cqe.dst->w[15], cqe.tail);/' &
wait
mk b12 $sn/include/gicomm/softnic/warp_plan.h 's/constexpr int kAlignedBlocksPerLane = 8;/constexpr int kAlignedBlocksPerLane = 12;/' &
mk winwarm $sn/gpu_engine.cu 's/if (lane == 0) db = order::ld_relaxed_sys_u64(q.sq.doorbell);/if (lane == 0) db = *reinterpret_cast<volatile uint64_t*>(q.sq.doorbell);/' &
wait
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv > "$OUT/clocks.txt"
for rep in 1 2; do
  for n in base cg nosleep relgpu b12 winwarm; do
    [ -x "$W/$n/b/bin/gicomm-softnic-engine-goals" ] || continue
    timeout 120 "$W/$n/b/bin/gicomm-softnic-engine-goals" --label "$n" >> "$OUT/goals-$n.jsonl" 2> "$OUT/$n.run$rep.err"
    echo "$n rep $rep exit $?" >> "$OUT/runs.txt"
  done
done
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv >> "$OUT/clocks.txt"
python3 - "$OUT" <<'PY'
import json, sys, glob, collections, os
out = sys.argv[1]
vals = collections.defaultdict(dict)
for f in sorted(glob.glob(f"{out}/goals-*.jsonl")):
    n = os.path.basename(f)[6:-6]
    for l in open(f):
        r = json.loads(l)
        k = (r.get("measure"), r.get("shape"), r.get("qps"))
        vals[k].setdefault(n, []).append(r["value"])
names = ["base", "cg", "nosleep", "relgpu", "b12", "winwarm"]
print("measure shape qps | " + " | ".join(names))
for k in sorted(vals, key=str):
    print(k, "|", " | ".join("/".join(f"{v:.3g}" for v in vals[k].get(n, [])) or "-" for n in names))
PY
