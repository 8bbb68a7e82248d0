#!/usr/bin/env bash
# Device call (scratch): where a gpu-engine pass's cycles go. Two builds of one tree: A (plain) and
# P (-DGICOMM_ENGINE_PHASES=ON); every point run A then P, twice, one process per point; P's stderr
# carries "engine phases:" lines (cycles per pass per step).
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; R=$OUT/phases1; mkdir -p $R
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
T0=$(date +%s)
for v in A P; do
  opt=OFF; [ $v = P ] && opt=ON
  (cmake -S native -B build/d$v -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release -DGICOMM_ENGINE_PHASES=$opt > $R/cfg$v.log 2>&1 &&
   cmake --build build/d$v -j8 --target gicomm-bench-engine gicomm-bench-gda > $R/build$v.log 2>&1
   echo "$v $?" >> $R/build-rc.txt) &
done
wait
echo "builds done at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
P=$R/points; mkdir -p $P
e() { echo "{\"point_id\": \"ec-$1-q$2-s$3-w$5\", \"params\": {\"engine\": \"gpu-same\", \"qps\": $2, \"depth\": $4, \"payload\": \"$1\", \"size\": $3, \"engine_warps_per_block\": $5}}" > $P/ec-$1-q$2-s$3-w$5; }
for q in "1 4096" "16 1024" "132 256" "528 256"; do set -- $q; e inline $1 8 $2 8; done
e inline 1 8 4096 1; e inline 16 64 1024 8; e pointer 16 4096 256 8; e pointer 1 4096 1024 8
g() { echo "{\"point_id\": \"$1\", \"transport\": \"mini-gda\", \"nic_backend\": \"softnic-gpu-same\", \"params\": {\"mode\": \"$2\", \"blocks\": $3, \"threads\": $4, \"qps\": $5, \"batch\": $6, \"payload\": \"inline\", \"completion\": \"used\", \"wqes\": $7}}" > $P/gda-$1; }
g w1 warp 1 32 1 32 1000000; g w132 warp 132 128 132 32 8000000; g w528 warp 132 128 528 32 8000000; g t16 thread 16 1 16 16 4000000
for rep in 0 1; do for f in $P/*; do n=$(basename $f); for v in A P; do
  case $n in ec-*) bin=gicomm-bench-engine; exp=engine_ceiling;; *) bin=gicomm-bench-gda; exp=gda_msg_rate;; esac
  timeout 60 build/d$v/bin/$bin --experiment $exp --points $f --out $R/$n-$v-$rep.jsonl --campaign phases1 --host h200x1 --platform local --provenance-id phases1 --run-index $rep --timeout-ms 2000 > $R/$n-$v-$rep.log 2>&1; echo "$n $v $rep rc=$?" >> $R/run-rc.txt
done; done; done
nvidia-smi -q -d CLOCK > $R/clocks-after.txt 2>&1
python3 - "$R" <<'PY' > $R/summary.txt 2>&1
import json, sys, glob, os, re
R = sys.argv[1]
for f in sorted(glob.glob(f"{R}/*.jsonl")):
    base = os.path.basename(f)[:-6]
    for line in open(f):
        r = json.loads(line)
        s = r.get("stats") or {}
        print(f"{base:34s} {r.get('status')} {r.get('metric'):12s} p50 {s.get('p50')} ceil {r.get('engine_ceiling')} clk {r.get('sm_clock_mhz')}")
    log = f[:-6] + ".log"
    for l in open(log):
        if l.startswith("engine phases"): print("   ", l.strip())
PY
cat $R/build-rc.txt; grep -v "rc=0" $R/run-rc.txt; cat $R/summary.txt
echo "total $(( $(date +%s) - T0 )) s"
tar -czf $OUT/phases1.tgz -C $OUT phases1 && rm -rf $R
