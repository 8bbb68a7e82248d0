#!/usr/bin/env bash
# Device call: the grid's help (blocks without a QP move a QP's long copy epochs), checked and measured.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG=$OUT/exp.log; RES=$OUT/points.jsonl; : > "$RES"
B=/tmp/b
( cmake -S native -B $B -DGICOMM_CUDA_ARCHS=90 > /tmp/bench-build.log 2>&1 &&
  cmake --build $B -j 8 --target gicomm-bench-goodput gicomm-bench-engine >> /tmp/bench-build.log 2>&1; echo $? > /tmp/bench-build.rc ) &
BUILD=$!
C=/tmp/chk/check; mkdir -p $C
BASE=b813484 OUT=$C TOTAL_S=200 bash native/tests/softnic/device_check.sh > $C/check.log 2>&1
echo "check exit $?"
cat $C/steps.tsv; grep -E "^goal|NOT met|all evaluated" $C/summary.txt
wait $BUILD; echo "bench build rc $(cat /tmp/bench-build.rc)"; tail -3 /tmp/bench-build.log >> "$LOG"
run() {  # driver experiment params...
  local d=$1 e=$2; shift 2
  local args=(); for kv in "$@"; do args+=(--param "$kv"); done
  rm -f /tmp/pt.jsonl
  timeout 90 $B/bin/$d --experiment $e "${args[@]}" --nic-backend softnic-gpu-same --out /tmp/pt.jsonl \
    --campaign exp --host h200x1 --platform local --provenance-id exp-grid >> "$LOG" 2>&1
  echo "rc $? $e $*" >> "$LOG"
  [ -s /tmp/pt.jsonl ] && cat /tmp/pt.jsonl >> "$RES"
  python3 - "$e $*" <<'PY'
import json,sys
for l in open('/tmp/pt.jsonl'):
    r=json.loads(l)
    if r.get('metric') not in ('goodput_gbps','msg_rate','engine_wqe_rate'): continue
    st=r.get('stats') or {}
    print(f"{sys.argv[1]:58s} {r['metric']:15s} {r.get('status')} p50 {st.get('p50')} ceiling {r.get('engine_ceiling')} ({r.get('engine_ceiling_shape')}) @{r.get('sm_clock_mhz')} {r.get('error','')}")
PY
}
for round in 0 1; do
  for size in 65536 16384 4096; do run gicomm-bench-goodput goodput size=$size ctas=1 batch=16; done
  run gicomm-bench-goodput goodput size=65536 ctas=16 batch=16
  run gicomm-bench-engine engine_ceiling engine=gpu-same qps=1 payload=pointer size=65536 depth=1024
done
(cd /tmp/chk && tar czf $OUT/check.tar.gz check)
