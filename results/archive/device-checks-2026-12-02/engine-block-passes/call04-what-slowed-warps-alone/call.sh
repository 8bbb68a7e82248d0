#!/usr/bin/env bash
# Device call (scratch): where the block passes' engine loses 7-9 % at 528 QPs (warps alone, no
# block pass taken). Engine ceilings (inline 8 B at 16, 64, 528 QPs) of: A main's engine (4596e78,
# .device-baseline), B this tree, V1 this tree with no helped block (the helpers' and warp 0's
# helped paths compiled out), V2 this tree without the sub-window's extra window load; three rounds,
# interleaved; then the profiling builds of A and B at 64 and 528 QPs (cycles per pass by step).
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; R=$OUT/block4; mkdir -p $R
T0=$(date +%s)
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
mk() {  # mk NAME ENGINE_SOURCE(.cu or dir of softnic sources)
  rm -rf /tmp/t$1 && mkdir -p /tmp/t$1 && cp -r native config workflow /tmp/t$1/ && rm -rf /tmp/t$1/native/build
  if [ -d "$2" ]; then
    (cd $2/native/src/nic/softnic && find . -type f ! -name CMakeLists.txt -print0 | xargs -0 -I{} cp {} /tmp/t$1/native/src/nic/softnic/{})
  elif [ -f "$2" ]; then cp $2 /tmp/t$1/native/src/nic/softnic/gpu_engine.cu; fi
}
mk A .device-baseline; mk B none; mk V1 .dev/v1.cu; mk V2 .dev/v2.cu
for v in A B V1 V2 AP BP; do
  t=${v:0:1}; [ $v = V1 ] && t=V1; [ $v = V2 ] && t=V2; opt=OFF; [ ${#v} = 2 ] && [ ${v:1:1} = P ] && { opt=ON; t=${v:0:1}; }
  (cmake -S /tmp/t$t/native -B build/e$v -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release -DGICOMM_ENGINE_PHASES=$opt > $R/cfg$v.log 2>&1 &&
   cmake --build build/e$v -j4 --target gicomm-bench-engine > $R/build$v.log 2>&1; echo "$v $?" >> $R/build-rc.txt) &
done
wait
echo "builds done at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
P=$R/points; mkdir -p $P
e() { echo "{\"point_id\": \"ec-q$1\", \"params\": {\"engine\": \"gpu-same\", \"qps\": $1, \"depth\": $2, \"payload\": \"inline\", \"size\": 8, \"engine_warps_per_block\": 8}}" > $P/ec-q$1; }
e 16 1024; e 64 1024; e 528 256
for rep in 0 1 2; do for f in $P/*; do n=$(basename $f); for v in A B V1 V2; do
  timeout 40 build/e$v/bin/gicomm-bench-engine --experiment engine_ceiling --points $f --out $R/$n-$v-$rep.jsonl --campaign block4 --host h200x1 --platform local --provenance-id block4 --run-index $rep --timeout-ms 2000 > $R/$n-$v-$rep.log 2>&1; echo "$n $v $rep rc=$?" >> $R/run-rc.txt
done; done; done
for n in ec-q64 ec-q528; do for v in AP BP; do
  timeout 40 build/e$v/bin/gicomm-bench-engine --experiment engine_ceiling --points $P/$n --out $R/$n-$v-0.jsonl --campaign block4 --host h200x1 --platform local --provenance-id block4 --run-index 0 --timeout-ms 2000 > $R/$n-$v-0.log 2>&1; echo "$n $v rc=$?" >> $R/run-rc.txt
done; done
nvidia-smi -q -d CLOCK > $R/clocks-after.txt 2>&1
python3 - "$R" <<'PY' > $R/summary.txt 2>&1
import json, sys, glob, os, re, collections
R = sys.argv[1]
rows = collections.defaultdict(list)
for f in sorted(glob.glob(f"{R}/ec-*.jsonl")):
    n = os.path.basename(f)[:-6]
    pt, v, rep = n.rsplit("-", 2)
    for line in open(f):
        r = json.loads(line); s = r.get("stats") or {}
        rows[(pt, v)].append((s.get("p50"), r.get("sm_clock_mhz")))
    for l in open(f[:-6] + ".log"):
        if l.startswith("engine phases"): print(f"{pt} {v}: {l.strip()}")
for (pt, v), xs in sorted(rows.items()):
    print(f"{pt:8s} {v:3s} " + "  ".join(f"{p:.1f}@{c:.0f}" for p, c in xs if p))
PY
cat $R/build-rc.txt; grep -v "rc=0" $R/run-rc.txt; cat $R/summary.txt
echo "total $(( $(date +%s) - T0 )) s"
tar -czf $OUT/block4.tgz -C $OUT block4 && rm -rf $R
