#!/usr/bin/env bash
# Device call (session 14, call 1): (1) 7a33d91's cleanup checked against 1a29d88 (device_check.sh);
# (2) the two-slot grid queue (.dev/two-slot.patch) checked against this tree; (3) the 1-QP grid
# shapes measured side by side, this tree against the two-slot variant, two rounds.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
LOG=$OUT/exp.log; RES=$OUT/points.jsonl; : > "$RES"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpus.txt 2>&1
# the variant's tree, and this tree's softnic as its baseline
V=/tmp/vsrc; mkdir -p $V && tar --exclude=./.whl --exclude=./build -cf - . | tar -xf - -C $V
(cd $V && patch -p1 < .dev/two-slot.patch > /tmp/patch.log 2>&1; echo "patch rc $?" >> $LOG)
V2=/tmp/v2src; mkdir -p $V2 && tar --exclude=./.whl --exclude=./build -cf - . | tar -xf - -C $V2
(cd $V2 && patch -p1 < .dev/var2.patch > /tmp/patch2.log 2>&1; echo "patch2 rc $?" >> $LOG)
mkdir -p /tmp/headbase/native/src/nic && cp -a native/src/nic/softnic /tmp/headbase/native/src/nic/
bench_build() {  # src-root build-dir
  cmake -S $1/native -B $2 -DGICOMM_CUDA_ARCHS=90 > $2.log 2>&1 &&
    cmake --build $2 -j 8 --target gicomm-bench-goodput gicomm-bench-engine >> $2.log 2>&1; echo $? > $2.rc
}
bench_build $PWD /tmp/ba & bench_build $V /tmp/bv & bench_build $V2 /tmp/bv2 & wait
echo "bench builds: head $(cat /tmp/ba.rc) var $(cat /tmp/bv.rc) var2 $(cat /tmp/bv2.rc) at $(( $(date +%s) - T0 )) s" | tee -a $LOG
C=/tmp/chk; mkdir -p $C/head $C/var
BASE=1a29d88 OUT=$C/head TOTAL_S=150 bash native/tests/softnic/device_check.sh > $C/head/check.log 2>&1
echo "check head (vs 1a29d88) exit $? at $(( $(date +%s) - T0 )) s" | tee -a $LOG
(cd $V2 && BASE=7a33d91 GICOMM_BASELINE_TREE=/tmp/headbase OUT=$C/var TOTAL_S=150 bash native/tests/softnic/device_check.sh > $C/var/check.log 2>&1)
echo "check var2 (vs 7a33d91) exit $? at $(( $(date +%s) - T0 )) s" | tee -a $LOG
for c in head var; do echo "== $c"; cat $C/$c/steps.tsv; grep -E "^goal|NOT met|all evaluated" $C/$c/summary.txt; done | tee -a $LOG
run() {  # which driver experiment params...
  local w=$1 d=$2 e=$3; shift 3
  local B=/tmp/ba; [ $w = var ] && B=/tmp/bv; [ $w = var2 ] && B=/tmp/bv2
  local args=(); for kv in "$@"; do args+=(--param "$kv"); done
  rm -f /tmp/pt.jsonl
  timeout 60 $B/bin/$d --experiment $e "${args[@]}" --nic-backend softnic-gpu-same --out /tmp/pt.jsonl \
    --campaign exp --host h200x1 --platform local --provenance-id exp-s14-$w >> $OUT/runs.log 2>&1
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
  [ $(( $(date +%s) - T0 )) -gt 470 ] && break
  for w in head var var2; do
    for size in 65536 16384; do run $w gicomm-bench-goodput goodput size=$size ctas=1 batch=16; done
    for size in 65536 16384 8192; do run $w gicomm-bench-engine engine_ceiling engine=gpu-same qps=1 payload=pointer size=$size depth=1024; done
    run $w gicomm-bench-engine engine_ceiling engine=gpu-same qps=4 payload=pointer size=65536 depth=1024
  done
done
echo "done at $(( $(date +%s) - T0 )) s" | tee -a $LOG
(cd /tmp && tar czf $OUT/check.tar.gz chk)
