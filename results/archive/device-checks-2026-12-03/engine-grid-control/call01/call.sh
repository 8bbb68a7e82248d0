#!/usr/bin/env bash
# Device call (session 15, call 1): a helper block's warp 0 runs its queue and copies nothing, the
# next job handed over while its warps move this one (ctl = this tree: the owner's warps keep their
# share of a deferred grid job; ctl0: they take none), side by side with head (f9581aa), two rounds;
# then the better one's device check against head, and, when its 1-QP 64 KiB ceiling reaches 6.7
# M WQE/s and the check passes, the one-GPU campaign with it.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
LOG=$OUT/exp.log; RES=$OUT/points.jsonl; : > "$RES"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpus.txt 2>&1
for v in head ctl0; do
  mkdir -p /tmp/$v && tar --exclude=./.whl --exclude=./build -cf - . | tar -xf - -C /tmp/$v
done
(cd /tmp/head && patch -R -p1 < .dev/s15/ctl.patch > /tmp/patch-head.log 2>&1; echo "patch -R head rc $?" >> $LOG)
sed -i 's/constexpr bool kDeferredGridShare = true;/constexpr bool kDeferredGridShare = false;/' /tmp/ctl0/native/src/nic/softnic/gpu_engine.cu
grep -c "kDeferredGridShare = false" /tmp/ctl0/native/src/nic/softnic/gpu_engine.cu >> $LOG
mkdir -p /tmp/ctl && tar --exclude=./.whl --exclude=./build -cf - . | tar -xf - -C /tmp/ctl
mkdir -p /tmp/headbase/native/src/nic && cp -a /tmp/head/native/src/nic/softnic /tmp/headbase/native/src/nic/
bench_build() {  # src-root build-dir
  cmake -S $1/native -B $2 -DGICOMM_CUDA_ARCHS=90 > $2.log 2>&1 &&
    cmake --build $2 -j 6 --target gicomm-bench-goodput gicomm-bench-engine >> $2.log 2>&1; echo $? > $2.rc
}
bench_build /tmp/head /tmp/b-head & bench_build /tmp/ctl /tmp/b-ctl & bench_build /tmp/ctl0 /tmp/b-ctl0 & wait
echo "bench builds: head $(cat /tmp/b-head.rc) ctl $(cat /tmp/b-ctl.rc) ctl0 $(cat /tmp/b-ctl0.rc) at $(( $(date +%s) - T0 )) s" | tee -a $LOG
run() {  # which driver experiment params...
  local w=$1 d=$2 e=$3; shift 3
  local args=(); for kv in "$@"; do args+=(--param "$kv"); done
  rm -f /tmp/pt.jsonl
  timeout 60 /tmp/b-$w/bin/$d --experiment $e "${args[@]}" --nic-backend softnic-gpu-same --out /tmp/pt.jsonl \
    --campaign exp --host h200x1 --platform local --provenance-id exp-s15-$w >> $OUT/runs.log 2>&1
  echo "rc $? $w $e $*" >> $OUT/runs.log
  [ -s /tmp/pt.jsonl ] || return
  sed "s/^{/{\"variant\": \"$w\", /" /tmp/pt.jsonl >> "$RES"
  python3 - "$w $e $*" <<'PY' | tee -a $LOG
import json,sys
for l in open('/tmp/pt.jsonl'):
    r=json.loads(l)
    if r.get('metric') not in ('msg_rate','engine_wqe_rate'): continue
    st=r.get('stats') or {}
    print(f"{sys.argv[1]:66s} {r['metric']:15s} {r.get('status')} p50 {st.get('p50'):.3f} ceiling {r.get('engine_ceiling')} @{r.get('sm_clock_mhz'):.0f} {r.get('error','')}")
PY
}
for round in 0 1; do
  for w in head ctl ctl0; do
    run $w gicomm-bench-goodput goodput size=65536 ctas=1 batch=16
    for size in 65536 16384 8192; do run $w gicomm-bench-engine engine_ceiling engine=gpu-same qps=1 payload=pointer size=$size depth=1024; done
    run $w gicomm-bench-engine engine_ceiling engine=gpu-same qps=4 payload=pointer size=65536 depth=1024
  done
done
echo "measured at $(( $(date +%s) - T0 )) s" | tee -a $LOG
BEST=$(RES=$RES python3 -c "
import json,os,statistics as s
v={}
for l in open(os.environ['RES']):
    r=json.loads(l)
    p=r.get('params',{})
    if r.get('metric')=='engine_wqe_rate' and str(p.get('qps'))=='1' and str(p.get('size'))=='65536':
        v.setdefault(r['variant'],[]).append(r['stats']['p50'])
m={k:s.median(x) for k,x in v.items() if k!='head'}
b=max(m,key=m.get) if m else 'none'
print(b, round(m.get(b,0),3))
")
echo "best: $BEST" | tee -a $LOG
set -- $BEST; W=$1; R=$2
C=/tmp/chk; mkdir -p $C/$W
(cd /tmp/$W && BASE=f9581aa GICOMM_BASELINE_TREE=/tmp/headbase OUT=$C/$W TOTAL_S=130 bash native/tests/softnic/device_check.sh > $C/$W/check.log 2>&1)
CK=$?
echo "check $W (vs f9581aa) exit $CK at $(( $(date +%s) - T0 )) s" | tee -a $LOG
cat $C/$W/steps.tsv; grep -E "^goal|NOT met|all evaluated" $C/$W/summary.txt | tee -a $LOG
(cd /tmp && tar czf $OUT/check.tar.gz chk)
EL=$(( $(date +%s) - T0 ))
STEPS_OK=$(awk -F'\t' 'NR>1 && $2!=0' $C/$W/steps.tsv | wc -l)
if [ -s $C/$W/steps.tsv ] && [ "$STEPS_OK" = 0 ] && python3 -c "import sys; sys.exit(0 if float('$R') >= 6.7 else 1)" && [ $EL -lt 360 ]; then
  echo "campaign with $W at $EL s" | tee -a $LOG
  (cd /tmp/$W && OUT=/tmp/camp DEADLINE_S=$(( 560 - EL - 40 )) bash tools/device-campaign.sh config/campaigns/h200x1-softnic-gpu.yaml --config runs=2 > /tmp/camp-call.log 2>&1; echo "campaign rc $?" | tee -a $LOG)
  mv /tmp/camp/*.tar.gz $OUT/ 2>/dev/null
  (cd /tmp && tar czf $OUT/campaign-extra.tar.gz camp camp-call.log)
else
  echo "no campaign: steps failing $STEPS_OK, 64 KiB ceiling $R, at $EL s" | tee -a $LOG
fi
echo "done at $(( $(date +%s) - T0 )) s" | tee -a $LOG
(cd $OUT && tar czf exp.tar.gz points.jsonl runs.log gpus.txt && rm -f points.jsonl runs.log gpus.txt)
