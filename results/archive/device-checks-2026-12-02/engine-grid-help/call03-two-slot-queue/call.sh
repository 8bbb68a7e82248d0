#!/usr/bin/env bash
# Device call: the grid queue of two slots (posted ahead) against 97ab78f (one slot), checked and measured.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG=$OUT/exp.log; RES=$OUT/points.jsonl; : > "$RES"
bench_build() {  # src-root build-dir
  cmake -S $1/native -B $2 -DGICOMM_CUDA_ARCHS=90 > $2.log 2>&1 &&
    cmake --build $2 -j 4 --target gicomm-bench-goodput gicomm-bench-engine >> $2.log 2>&1; echo $? > $2.rc
}
mkdir -p /tmp/bsrc && cp -a native config /tmp/bsrc/ && rm -rf /tmp/bsrc/native/build &&
  (cd .device-baseline/native/src/nic/softnic && find . -type f ! -name CMakeLists.txt -print0 |
   xargs -0 -I{} cp {} /tmp/bsrc/native/src/nic/softnic/{})
( bench_build $PWD /tmp/ba; bench_build /tmp/bsrc /tmp/bb ) &
BUILD=$!
C=/tmp/chk/check; mkdir -p $C
BASE=97ab78f OUT=$C TOTAL_S=200 bash native/tests/softnic/device_check.sh > $C/check.log 2>&1
echo "check exit $?"
cat $C/steps.tsv; grep -E "^goal|NOT met|all evaluated" $C/summary.txt
wait $BUILD; echo "bench build rc after $(cat /tmp/ba.rc) before $(cat /tmp/bb.rc)"
run() {  # which driver experiment params...
  local w=$1 d=$2 e=$3; shift 3
  local B=/tmp/ba; [ $w = before ] && B=/tmp/bb
  local args=(); for kv in "$@"; do args+=(--param "$kv"); done
  rm -f /tmp/pt.jsonl
  timeout 90 $B/bin/$d --experiment $e "${args[@]}" --nic-backend softnic-gpu-same --out /tmp/pt.jsonl \
    --campaign exp --host h200x1 --platform local --provenance-id exp-grid-$w >> "$LOG" 2>&1
  echo "rc $? $w $e $*" >> "$LOG"
  [ -s /tmp/pt.jsonl ] && cat /tmp/pt.jsonl >> "$RES"
  python3 - "$w $e $*" <<'PY'
import json,sys
for l in open('/tmp/pt.jsonl'):
    r=json.loads(l)
    if r.get('metric') not in ('msg_rate','engine_wqe_rate'): continue
    st=r.get('stats') or {}
    print(f"{sys.argv[1]:66s} {r['metric']:15s} {r.get('status')} p50 {st.get('p50'):.3f} ceiling {r.get('engine_ceiling')} @{r.get('sm_clock_mhz'):.0f} {r.get('error','')}")
PY
}
for round in 0 1; do
  for w in after before; do
    for size in 65536 16384; do run $w gicomm-bench-goodput goodput size=$size ctas=1 batch=16; done
    for size in 65536 16384 8192; do run $w gicomm-bench-engine engine_ceiling engine=gpu-same qps=1 payload=pointer size=$size depth=1024; done
    run $w gicomm-bench-engine engine_ceiling engine=gpu-same qps=4 payload=pointer size=65536 depth=1024
  done
done
(cd /tmp/chk && tar czf $OUT/check.tar.gz check)
