#!/usr/bin/env bash
# Diagnostic (not committed): is the gpu engine's ~2.5 us pass the CQE's system-scope release?
# Builds the bench drivers twice: as is (A) and with the CQE tail released at GPU scope (D), then
# runs the same engine ceilings and mini-gda points on each, interleaved A D A D.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source tools/device-env.sh
START=$(date +%s)
OUT=${OUT:-/tmp/out}; R=$OUT/diag1; mkdir -p $R
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
rm -rf /tmp/atree /tmp/dtree /tmp/ntree && mkdir -p /tmp/atree && cp -r native config /tmp/atree/
cp .dev/main/gpu_engine.cu /tmp/atree/native/src/nic/softnic/gpu_engine.cu
cp .dev/main/warp_plan.h /tmp/atree/native/src/nic/softnic/include/gicomm/softnic/warp_plan.h
cp -r /tmp/atree /tmp/dtree && cp -r /tmp/atree /tmp/ntree
sed -i 's/order::st_release_sys_u32(&cqe.dst->w\[15\], cqe.tail)/order::st_release_gpu_u32(\&cqe.dst->w[15], cqe.tail)/; s/order::st_release_sys_u32(&p.dst\[lane\]->w\[15\], p.tail\[lane\])/order::st_release_gpu_u32(\&p.dst[lane]->w[15], p.tail[lane])/' /tmp/dtree/native/src/nic/softnic/gpu_engine.cu
sed -i 's/order::st_release_sys_u32(&cqe.dst->w\[15\], cqe.tail)/order::st_relaxed_sys_u32(\&cqe.dst->w[15], cqe.tail)/; s/order::st_release_sys_u32(&p.dst\[lane\]->w\[15\], p.tail\[lane\])/order::st_relaxed_sys_u32(\&p.dst[lane]->w[15], p.tail[lane])/' /tmp/ntree/native/src/nic/softnic/gpu_engine.cu
{ grep -c st_release_gpu_u32 /tmp/dtree/native/src/nic/softnic/gpu_engine.cu; grep -c 'st_relaxed_sys_u32(&' /tmp/ntree/native/src/nic/softnic/gpu_engine.cu; diff -q native/src/nic/softnic/gpu_engine.cu /tmp/atree/native/src/nic/softnic/gpu_engine.cu; } > $R/diag-sites.txt
T0=$(date +%s)
b() { (cmake -S $2 -B build/d$1 -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release > $R/cfg$1.log 2>&1 && cmake --build build/d$1 -j5 --target gicomm-bench-engine gicomm-bench-gda > $R/build$1.log 2>&1; echo "$1 $?" >> $R/build-rc.txt) & }
b A /tmp/atree/native; (cmake -S native -B build/dS -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release > $R/cfgS.log 2>&1 && cmake --build build/dS -j5 --target gicomm-bench-engine gicomm-bench-gda gicomm-softnic-gpu-check gicomm-gda-gpu-check test_softnic_protocol > $R/buildS.log 2>&1; echo "S $?" >> $R/build-rc.txt) &
b N /tmp/ntree/native
wait
echo "build $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
P=$R/points; mkdir -p $P
: > $P/ec
for q in "1 4096" "16 1024" "132 256" "528 256"; do set -- $q
  echo "{\"point_id\": \"ec-i8-$1\", \"params\": {\"engine\": \"gpu-same\", \"qps\": $1, \"depth\": $2, \"payload\": \"inline\", \"size\": 8}}" >> $P/ec
done
echo "{\"point_id\": \"ec-i64-16\", \"params\": {\"engine\": \"gpu-same\", \"qps\": 16, \"depth\": 1024, \"payload\": \"inline\", \"size\": 64}}" >> $P/ec
echo "{\"point_id\": \"ec-p4k-16\", \"params\": {\"engine\": \"gpu-same\", \"qps\": 16, \"depth\": 256, \"payload\": \"pointer\", \"size\": 4096}}" >> $P/ec
g() { echo "{\"point_id\": \"$1\", \"transport\": \"mini-gda\", \"nic_backend\": \"softnic-gpu-same\", \"params\": {\"mode\": \"$2\", \"blocks\": $3, \"threads\": $4, \"qps\": $5, \"batch\": $6, \"payload\": \"inline\", \"completion\": \"used\", \"wqes\": $7}}" >> $P/gda; }
: > $P/gda
g w1 warp 1 32 1 32 1000000
g t16 thread 16 1 16 16 4000000
g t1 thread 1 1 1 16 200000
g t64 thread 64 1 64 16 4000000
g w132 warp 132 128 132 32 8000000
g w528 warp 132 128 528 32 8000000
for rep in 0 1; do for v in A S N; do
  timeout 120 build/d$v/bin/gicomm-bench-engine --experiment engine_ceiling --points $P/ec --out $R/ec-$v-$rep.jsonl --campaign diag --host h200 --platform local --provenance-id diag --run-index $rep --timeout-ms 2000 > $R/ec-$v-$rep.log 2>&1; echo "ec $v $rep rc=$?" >> $R/run-rc.txt
  timeout 180 build/d$v/bin/gicomm-bench-gda --experiment gda_msg_rate --points $P/gda --out $R/gda-$v-$rep.jsonl --campaign diag --host h200 --platform local --provenance-id diag --run-index $rep --timeout-ms 2000 > $R/gda-$v-$rep.log 2>&1; echo "gda $v $rep rc=$?" >> $R/run-rc.txt
done; done
nvidia-smi -q -d CLOCK > $R/clocks-after.txt 2>&1
export CUDA_MODULE_LOADING=EAGER
for c in "gpu_engine_check build/dS/bin/gicomm-softnic-gpu-check" "gpu_protocol build/dS/bin/test_softnic_protocol --engine gpu" "gda_check build/dS/bin/gicomm-gda-gpu-check"; do set -- $c; n=$1; shift
  t=$(date +%s); timeout 150 "$@" > $R/check-$n.log 2>&1; echo "check $n rc=$? $(( $(date +%s) - t )) s" >> $R/run-rc.txt; done
python3 - "$R" <<'PY' > $R/summary.txt 2>&1
import json, sys, glob, os
R = sys.argv[1]
for f in sorted(glob.glob(f"{R}/*.jsonl")):
    for line in open(f):
        r = json.loads(line)
        s = r.get("stats") or {}
        print(os.path.basename(f), r.get("point_id"), r.get("status"), r.get("metric"), s.get("p50"), "ceil", r.get("engine_ceiling"), "clk", r.get("sm_clock_mhz"), r.get("error", "")[:120] if r.get("status") != "ok" else "")
PY
cat $R/build-rc.txt $R/run-rc.txt $R/diag-sites.txt $R/summary.txt
if grep -q "check .* rc=[^0]" $R/run-rc.txt; then echo "S failed a check: no campaign" | tee -a $R/run-rc.txt
else
  left=$(( ${CALL_S:-585} - ($(date +%s) - START) - 35 ))
  echo "campaign with S, deadline $left s" | tee -a $R/run-rc.txt
  rm -rf build/dA build/dN
  T1=$(date +%s); OUT=$R/campaign DEADLINE_S=$left bash tools/device-campaign.sh config/campaigns/h200x1-softnic-gpu.yaml --config runs=2 > $R/campaign.log 2>&1
  echo "campaign rc=$? $(( $(date +%s) - T1 )) s" | tee -a $R/run-rc.txt; tail -5 $R/campaign.log
fi
tar -czf $OUT/diag1.tgz -C $OUT diag1 && rm -rf $R
