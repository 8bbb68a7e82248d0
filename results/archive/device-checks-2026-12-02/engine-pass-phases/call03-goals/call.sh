#!/usr/bin/env bash
# Device call (scratch): the landed profiling build (GICOMM_ENGINE_PHASES=ON) against the plain one,
# one tree: the 1-QP inline 8 B ceiling, mini-gda at 1 QP (one WQE a doorbell, 16 a doorbell, warp
# mode), and the engine goals program (put+completion of one pointer write per doorbell, 8 B-4 KiB,
# beside a bare warp copy): where a lone WQE's pass goes.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; R=$OUT/phases2; mkdir -p $R
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
T0=$(date +%s)
for v in A P; do
  opt=OFF; [ $v = P ] && opt=ON
  (cmake -S native -B build/d$v -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release -DGICOMM_ENGINE_PHASES=$opt > $R/cfg$v.log 2>&1 &&
   cmake --build build/d$v -j8 --target gicomm-bench-engine gicomm-bench-gda gicomm-softnic-engine-goals > $R/build$v.log 2>&1
   echo "$v $?" >> $R/build-rc.txt) &
done
wait
echo "builds done at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
P=$R/points; mkdir -p $P
echo '{"point_id": "ec-inline-q1-s8", "params": {"engine": "gpu-same", "qps": 1, "depth": 4096, "payload": "inline", "size": 8, "engine_warps_per_block": 8}}' > $P/ec-inline-q1-s8
g() { echo "{\"point_id\": \"$1\", \"transport\": \"mini-gda\", \"nic_backend\": \"softnic-gpu-same\", \"params\": {\"mode\": \"$2\", \"blocks\": $3, \"threads\": $4, \"qps\": $5, \"batch\": $6, \"payload\": \"inline\", \"completion\": \"used\", \"wqes\": $7}}" > $P/gda-$1; }
g t1b1 thread 1 1 1 1 200000; g t1b16 thread 1 1 1 16 200000; g w1 warp 1 32 1 32 1000000
for rep in 0 1; do for f in $P/*; do n=$(basename $f); for v in A P; do
  case $n in ec-*) bin=gicomm-bench-engine; exp=engine_ceiling;; *) bin=gicomm-bench-gda; exp=gda_msg_rate;; esac
  timeout 60 build/d$v/bin/$bin --experiment $exp --points $f --out $R/$n-$v-$rep.jsonl --campaign phases2 --host h200x1 --platform local --provenance-id phases2 --run-index $rep --timeout-ms 2000 > $R/$n-$v-$rep.log 2>&1; echo "$n $v $rep rc=$?" >> $R/run-rc.txt
done; done; done
for v in A P; do
  timeout 120 build/d$v/bin/gicomm-softnic-engine-goals --label $v > $R/goals-$v.jsonl 2> $R/goals-$v.err; echo "goals $v rc=$?" >> $R/run-rc.txt
done
nvidia-smi -q -d CLOCK > $R/clocks-after.txt 2>&1
python3 - "$R" <<'PY' > $R/summary.txt 2>&1
import json, sys, glob, os
R = sys.argv[1]
for f in sorted(glob.glob(f"{R}/*-[AP]-[01].jsonl")):
    for line in open(f):
        r = json.loads(line); s = r.get("stats") or {}
        print(f"{os.path.basename(f)[:-6]:22s} {r.get('status')} {r.get('metric'):15s} p50 {s.get('p50')} ceil {r.get('engine_ceiling')} clk {r.get('sm_clock_mhz')}")
    for l in open(f[:-6] + ".log"):
        if l.startswith("engine phases"): print("   ", l.strip())
for v in "AP":
    print(f"--- goals {v} (stderr: phases lines precede the measure they belong to)")
    for l in open(f"{R}/goals-{v}.err"):
        if l.startswith("engine phases") or "completion" in l or "warp_copy" in l or "chain" in l or "ceiling " in l: print("   ", l.rstrip())
PY
cat $R/build-rc.txt; grep -v "rc=0" $R/run-rc.txt; cat $R/summary.txt
echo "total $(( $(date +%s) - T0 )) s"
tar -czf $OUT/phases2.tgz -C $OUT phases2 && rm -rf $R
