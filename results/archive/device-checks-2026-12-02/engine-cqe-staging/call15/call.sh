#!/usr/bin/env bash
# Device call 4 (scratch, not committed): the engine check of this tree (V2: CQE staging that releases
# a lone QP's drained pass at once) against main's engine (31c9d4e, "before"); the goals program of
# V1 (77d59c7: staging released at the end of the sweep) in the same call, run after; then the
# h200x1-softnic-gpu campaign (2 runs) with this tree, bounded by the call's time.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source tools/device-env.sh
START=$(date +%s)
OUT=${OUT:-/tmp/out}; R=$OUT/call4; mkdir -p $R
rm -rf /tmp/v1 && mkdir -p /tmp/v1 && cp -r native config workflow /tmp/v1/
cp .dev/v1/gpu_engine.cu /tmp/v1/native/src/nic/softnic/gpu_engine.cu
cp .dev/v1/warp_plan.h /tmp/v1/native/src/nic/softnic/include/gicomm/softnic/warp_plan.h
cp .dev/v1/order.cuh /tmp/v1/native/include/gicomm/order.cuh
(nice -n 5 cmake -S /tmp/v1/native -B /tmp/v1/b -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release > $R/cfg-v1.log 2>&1 &&
 nice -n 5 cmake --build /tmp/v1/b -j6 --target gicomm-softnic-engine-goals > $R/build-v1.log 2>&1; echo "v1 build $? $(( $(date +%s) - START )) s" >> $R/rc.txt) &
V1=$!
BASE=31c9d4e OUT=$R/check TOTAL_S=200 bash native/tests/softnic/device_check.sh > $R/check.log 2>&1
echo "device_check rc=$? $(( $(date +%s) - START )) s" >> $R/rc.txt
wait $V1
CUDA_MODULE_LOADING=EAGER timeout 120 /tmp/v1/b/bin/gicomm-softnic-engine-goals --label v1 > $R/goals-v1.jsonl 2> $R/goals-v1.err
echo "goals v1 rc=$? $(( $(date +%s) - START )) s" >> $R/rc.txt
cat $R/rc.txt; head -44 $R/check/summary.txt
python3 - $R <<'PY'
import json, sys
R = sys.argv[1]
rows = {}
for lab, f in (("before", f"{R}/check/goals-before.jsonl"), ("v1", f"{R}/goals-v1.jsonl"), ("v2", f"{R}/check/goals-after.jsonl")):
    try:
        for l in open(f):
            r = json.loads(l); rows.setdefault((r["measure"], r["shape"]), {})[lab] = r["value"]
    except OSError as e:
        print("missing", f, e)
for k, v in rows.items():
    print(f"{k[0]:14s} {k[1]:16s} " + "  ".join(f"{lab} {v.get(lab, float('nan')):9.1f}" for lab in ("before", "v1", "v2")))
PY
if grep -q "rc=[^0]" $R/rc.txt; then echo "a step failed: no campaign"
else
  left=$(( ${CALL_S:-280} - ($(date +%s) - START) - 25 ))
  if [ $left -gt 170 ]; then
    echo "campaign, deadline $left s" | tee -a $R/rc.txt
    T1=$(date +%s); OUT=$R/campaign DEADLINE_S=$left bash tools/device-campaign.sh config/campaigns/h200x1-softnic-gpu.yaml --config runs=1 > $R/campaign.log 2>&1
    echo "campaign rc=$? $(( $(date +%s) - T1 )) s" | tee -a $R/rc.txt; tail -3 $R/campaign.log
  else echo "no time left for the campaign ($left s)" | tee -a $R/rc.txt; fi
fi
tar -czf $OUT/call4.tgz -C $OUT call4 && rm -rf $R
