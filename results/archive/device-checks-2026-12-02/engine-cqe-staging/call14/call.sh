#!/usr/bin/env bash
# Device call (scratch, not committed): the engine check of this tree (CQE staging, release fence) against
# main's engine (31c9d4e), then main's engine (A) and this tree's (S) side by side in one run:
# engine ceilings (8 B inline at 1/16/132/528 QPs, also with one engine warp per block; 64 B inline
# and 4 KiB pointer at 16 QPs) and mini-gda rates, A S A S; then the h200x1-softnic-gpu campaign (2 runs).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source tools/device-env.sh
START=$(date +%s)
OUT=${OUT:-/tmp/out}; R=$OUT/call3; mkdir -p $R
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
rm -rf /tmp/atree && mkdir -p /tmp/atree && cp -r native config workflow /tmp/atree/
cp .dev/main/gpu_engine.cu /tmp/atree/native/src/nic/softnic/gpu_engine.cu
cp .dev/main/warp_plan.h /tmp/atree/native/src/nic/softnic/include/gicomm/softnic/warp_plan.h
BASE=31c9d4e OUT=$R/check TOTAL_S=230 bash native/tests/softnic/device_check.sh > $R/check.log 2>&1 &
CHECK_PID=$!
T0=$(date +%s)
for v in A S; do
  src=/tmp/atree/native; [ $v = S ] && src=native
  (nice -n 10 cmake -S $src -B build/d$v -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release > $R/cfg$v.log 2>&1 &&
   nice -n 10 cmake --build build/d$v -j4 --target gicomm-bench-engine gicomm-bench-gda > $R/build$v.log 2>&1
   echo "$v $?" >> $R/build-rc.txt) &
done
wait $CHECK_PID; echo "device_check rc=$? $(( $(date +%s) - T0 )) s" >> $R/run-rc.txt
wait
echo "builds done at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
P=$R/points; mkdir -p $P; : > $P/ec; : > $P/gda
e() { echo "{\"point_id\": \"ec-$1-$2-$3-w$5\", \"params\": {\"engine\": \"gpu-same\", \"qps\": $2, \"depth\": $4, \"payload\": \"$1\", \"size\": $3, \"engine_warps_per_block\": $5}}" >> $P/ec; }
for q in "1 4096" "16 1024" "132 256" "528 256"; do set -- $q; e inline $1 8 $2 8; done
e inline 1 8 4096 1; e inline 16 8 1024 1; e inline 16 64 1024 8; e pointer 16 4096 256 8
g() { echo "{\"point_id\": \"$1\", \"transport\": \"mini-gda\", \"nic_backend\": \"softnic-gpu-same\", \"params\": {\"mode\": \"$2\", \"blocks\": $3, \"threads\": $4, \"qps\": $5, \"batch\": $6, \"payload\": \"inline\", \"completion\": \"used\", \"wqes\": $7}}" >> $P/gda; }
g w1 warp 1 32 1 32 1000000; g t1 thread 1 1 1 16 200000; g t16 thread 16 1 16 16 4000000
g t64 thread 64 1 64 16 4000000; g w132 warp 132 128 132 32 8000000; g w528 warp 132 128 528 32 8000000
for rep in 0 1; do for v in A S; do
  timeout 90 build/d$v/bin/gicomm-bench-engine --experiment engine_ceiling --points $P/ec --out $R/ec-$v-$rep.jsonl --campaign call3 --host h200x1 --platform local --provenance-id call3 --run-index $rep --timeout-ms 2000 > $R/ec-$v-$rep.log 2>&1; echo "ec $v $rep rc=$?" >> $R/run-rc.txt
  timeout 120 build/d$v/bin/gicomm-bench-gda --experiment gda_msg_rate --points $P/gda --out $R/gda-$v-$rep.jsonl --campaign call3 --host h200x1 --platform local --provenance-id call3 --run-index $rep --timeout-ms 2000 > $R/gda-$v-$rep.log 2>&1; echo "gda $v $rep rc=$?" >> $R/run-rc.txt
done; done
nvidia-smi -q -d CLOCK > $R/clocks-after.txt 2>&1
python3 - "$R" <<'PY' > $R/summary.txt 2>&1
import json, sys, glob, os
R = sys.argv[1]
for f in sorted(glob.glob(f"{R}/*.jsonl")):
    for line in open(f):
        r = json.loads(line)
        s = r.get("stats") or {}
        print(f"{os.path.basename(f):16s} {r.get('point_id'):22s} {r.get('status')} {r.get('metric'):15s} p50 {s.get('p50')} ceil {r.get('engine_ceiling')} clk {r.get('sm_clock_mhz')}")
PY
cat $R/build-rc.txt $R/run-rc.txt; head -44 $R/check/summary.txt; cat $R/summary.txt
if grep -q "rc=[^0]" $R/run-rc.txt; then echo "a step failed: no campaign"
else
  left=$(( ${CALL_S:-540} - ($(date +%s) - START) - 30 ))
  echo "campaign, deadline $left s" | tee -a $R/run-rc.txt
  T1=$(date +%s); OUT=$R/campaign DEADLINE_S=$left bash tools/device-campaign.sh config/campaigns/h200x1-softnic-gpu.yaml --config runs=2 > $R/campaign.log 2>&1
  echo "campaign rc=$? $(( $(date +%s) - T1 )) s" | tee -a $R/run-rc.txt; tail -3 $R/campaign.log
fi
tar -czf $OUT/call3.tgz -C $OUT call3 && rm -rf $R
