#!/usr/bin/env bash
# Device call (scratch): block passes (a helped block's warps share its QP's window) against main's
# engine (4596e78, .device-baseline): 1. the engine's device check (builds, CPU tests, every GPU
# check, the goals per shape with both engines); 2. the campaign's model-NIC-bound points and their
# neighbours, both engines, two rounds, one process per point (ceilings attached by the drivers).
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; R=$OUT/block1; mkdir -p $R
T0=$(date +%s)
BASE=4596e78 OUT=$OUT/check TOTAL_S=330 bash native/tests/softnic/device_check.sh > $R/check.log 2>&1
echo "check rc=$? at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
rm -rf /tmp/atree && mkdir -p /tmp/atree && cp -r native config /tmp/atree/ && rm -rf /tmp/atree/native/build &&
  (cd .device-baseline/native/src/nic/softnic && find . -type f ! -name CMakeLists.txt -print0 | xargs -0 -I{} cp {} /tmp/atree/native/src/nic/softnic/{})
for v in A B; do
  src=native; [ $v = A ] && src=/tmp/atree/native
  (cmake -S $src -B build/d$v -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release > $R/cfg$v.log 2>&1 &&
   cmake --build build/d$v -j8 --target gicomm-bench-gda gicomm-bench-goodput > $R/build$v.log 2>&1
   echo "$v $?" >> $R/build-rc.txt) &
done
wait
echo "builds done at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
P=$R/points; mkdir -p $P
g() { echo "{\"point_id\": \"$1\", \"transport\": \"mini-gda\", \"nic_backend\": \"softnic-gpu-same\", \"params\": {\"mode\": \"$2\", \"blocks\": $3, \"threads\": $4, \"qps\": $5, \"batch\": $6, \"payload\": \"inline\", \"completion\": \"used\", \"wqes\": $7}}" > $P/gda-$1; }
g w1 warp 1 32 1 32 1000000; g t1b16 thread 1 1 1 16 200000; g w132 warp 132 128 132 32 8000000; g w528 warp 132 128 528 32 8000000
gp() { echo "{\"point_id\": \"gp-c$1-s$2\", \"transport\": \"mini-gda\", \"nic_backend\": \"softnic-gpu-same\", \"params\": {\"ctas\": $1, \"size\": $2, \"batch\": 16, \"sq_wqebbs\": 1024}}" > $P/gp-c$1-s$2; }
gp 1 8; gp 1 4096; gp 1 65536; gp 16 8; gp 16 4096; gp 16 65536
for rep in 0 1; do for f in $P/*; do n=$(basename $f); for v in A B; do
  [ $(( $(date +%s) - T0 )) -gt 560 ] && { echo "$n $v $rep skipped (time)" >> $R/run-rc.txt; continue; }
  case $n in gp-*) bin=gicomm-bench-goodput; exp=goodput;; *) bin=gicomm-bench-gda; exp=gda_msg_rate;; esac
  timeout 40 build/d$v/bin/$bin --experiment $exp --points $f --out $R/$n-$v-$rep.jsonl --campaign block1 --host h200x1 --platform local --provenance-id block1 --run-index $rep --timeout-ms 2000 > $R/$n-$v-$rep.log 2>&1; echo "$n $v $rep rc=$?" >> $R/run-rc.txt
done; done; done
nvidia-smi -q -d CLOCK > $R/clocks-after.txt 2>&1
python3 - "$R" <<'PY' > $R/summary.txt 2>&1
import json, sys, glob, os
R = sys.argv[1]
for f in sorted(glob.glob(f"{R}/*-[AB]-[01].jsonl")):
    for line in open(f):
        r = json.loads(line); s = r.get("stats") or {}
        c = r.get("engine_ceiling"); p = s.get("p50")
        ratio = f"{c / p:.2f}x" if (c and p and r.get("metric") == "msg_rate") else ""
        print(f"{os.path.basename(f)[:-6]:20s} {r.get('status')} {r.get('metric'):13s} p50 {p} ceil {c} {ratio} clk {r.get('sm_clock_mhz')} {r.get('error','')}")
PY
cat $R/build-rc.txt; grep -v "rc=0" $R/run-rc.txt; cat $OUT/check/summary.txt | head -60; cat $R/summary.txt
echo "total $(( $(date +%s) - T0 )) s"
tar -czf $OUT/block1.tgz -C $OUT block1 && rm -rf $R
