#!/usr/bin/env bash
# Device call (scratch): the same-GPU engine on 16, 32, 64 SMs (GICOMM_SAME_GPU_ENGINE_BLOCKS, a
# scratch override of kSameGpuEngineBlocks in a copied tree): engine ceilings and mini-gda rates
# at 16/132/528 QPs, one process per point, two rounds.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; R=$OUT/sms1; mkdir -p $R
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
T0=$(date +%s)
rm -rf /tmp/stree && mkdir -p /tmp/stree && cp -r native config workflow /tmp/stree/
H=/tmp/stree/native/bench/harness/engine_shape.h
python3 - "$H" <<'PY'
import sys
p=sys.argv[1]; s=open(p).read()
old="constexpr int kSameGpuEngineBlocks = 16;"
assert old in s
s=s.replace(old,'inline const int kSameGpuEngineBlocks = [] { const char* e = std::getenv("GICOMM_SAME_GPU_ENGINE_BLOCKS"); return e ? std::atoi(e) : 16; }();')
s=s.replace("#include <cstdint>","#include <cstdint>\n#include <cstdlib>",1)
open(p,"w").write(s)
PY
(cmake -S /tmp/stree/native -B build/dS -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release > $R/cfg.log 2>&1 &&
 cmake --build build/dS -j16 --target gicomm-bench-engine gicomm-bench-gda > $R/build.log 2>&1; echo "build $?" > $R/build-rc.txt)
tail -20 $R/build.log | grep -i error
echo "build done at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
P=$R/points; mkdir -p $P
e() { echo "{\"point_id\": \"ec-$1-q$2-s$3\", \"params\": {\"engine\": \"gpu-same\", \"qps\": $2, \"depth\": $4, \"payload\": \"$1\", \"size\": $3, \"engine_warps_per_block\": 8}}" > $P/ec-$1-q$2-s$3; }
e inline 16 8 1024; e inline 128 8 256; e inline 512 8 256; e inline 16 64 1024; e pointer 16 4096 256
g() { echo "{\"point_id\": \"$1\", \"transport\": \"mini-gda\", \"nic_backend\": \"softnic-gpu-same\", \"params\": {\"mode\": \"$2\", \"blocks\": $3, \"threads\": $4, \"qps\": $5, \"batch\": $6, \"payload\": \"inline\", \"completion\": \"used\", \"wqes\": $7}}" > $P/gda-$1; }
g w1 warp 1 32 1 32 1000000; g w16 warp 16 128 16 32 8000000; g w132 warp 132 128 132 32 8000000; g w528 warp 132 128 528 32 8000000
g t132 thread 132 1 132 16 4000000; g t528 thread 132 4 528 16 8000000
for rep in 0 1; do for f in $P/*; do n=$(basename $f); for b in 16 32 64; do
  case $n in ec-*) bin=gicomm-bench-engine; exp=engine_ceiling;; *) bin=gicomm-bench-gda; exp=gda_msg_rate;; esac
  GICOMM_SAME_GPU_ENGINE_BLOCKS=$b timeout 60 build/dS/bin/$bin --experiment $exp --points $f --out $R/$n-b$b-$rep.jsonl --campaign sms1 --host h200x1 --platform local --provenance-id sms1 --run-index $rep --timeout-ms 2000 > $R/$n-b$b-$rep.log 2>&1; echo "$n b$b $rep rc=$?" >> $R/run-rc.txt
done; done; done
nvidia-smi -q -d CLOCK > $R/clocks-after.txt 2>&1
python3 - "$R" <<'PY' > $R/summary.txt 2>&1
import json, sys, glob, os
R = sys.argv[1]
for f in sorted(glob.glob(f"{R}/*.jsonl")):
    for line in open(f):
        r = json.loads(line); s = r.get("stats") or {}
        print(f"{os.path.basename(f)[:-6]:24s} {r.get('status')} {r.get('metric'):15s} p50 {s.get('p50')} ceil {r.get('engine_ceiling')} {r.get('engine_ceiling_shape')} clk {r.get('sm_clock_mhz')} {r.get('error','')}")
PY
cat $R/build-rc.txt; grep -v "rc=0" $R/run-rc.txt; cat $R/summary.txt
echo "total $(( $(date +%s) - T0 )) s"
tar -czf $OUT/sms1.tgz -C $OUT sms1 && rm -rf $R
