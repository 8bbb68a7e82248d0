#!/usr/bin/env bash
# Experiment (not kept): the kernel of warps alone with its registers capped so a block holds W warps.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LOG=$OUT/exp.log; RES=$OUT/points.jsonl; : > "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$LOG"
B=/tmp/b
cmake -S native -B $B -DGICOMM_CUDA_ARCHS=90 >> "$LOG" 2>&1 || { echo cmake failed; tail -20 "$LOG"; exit 1; }
for W in 8 16 12; do
  sed -i "s/^#define GICOMM_ALONE_WARPS .*/#define GICOMM_ALONE_WARPS $W/" native/src/nic/softnic/gpu_engine.cu
  s=$(date +%s)
  cmake --build $B -j 16 --target gicomm-bench-gda gicomm-softnic-gpu-check >> "$LOG" 2>&1 || { echo "build W=$W failed"; tail -30 "$LOG"; exit 1; }
  mkdir -p /tmp/v$W && cp $B/bin/gicomm-bench-gda $B/bin/gicomm-softnic-gpu-check /tmp/v$W/
  echo "built W=$W in $(( $(date +%s) - s )) s"
done
for W in 8 16 12; do
  timeout 120 /tmp/v$W/gicomm-softnic-gpu-check > "$OUT/check-W$W.log" 2>&1
  echo "gpu check W=$W: exit $? ($(tail -1 "$OUT/check-W$W.log"))"
done
P1="mode=warp blocks=132 threads=128 qps=132 batch=32 wqes=8000000"
P2="mode=warp blocks=132 threads=128 qps=528 batch=32 wqes=8000000"
P3="mode=thread blocks=64 threads=1 qps=64 batch=16 wqes=4000000"
P4="mode=thread blocks=132 threads=4 qps=528 batch=16 wqes=8000000"
P5="mode=warp blocks=16 threads=128 qps=16 batch=32 wqes=8000000"
for round in 0 1; do
  for W in 8 16 12; do
    for P in "$P1" "$P2" "$P3" "$P4" "$P5"; do
      args=(); for kv in $P payload=inline completion=used; do args+=(--param "$kv"); done
      o=/tmp/pt.jsonl; rm -f $o
      timeout 60 /tmp/v$W/gicomm-bench-gda --experiment gda_msg_rate "${args[@]}" --nic-backend softnic-gpu-same \
        --out $o --campaign exp --host h200x1 --platform local --provenance-id exp-W$W-r$round --run-index $round >> "$LOG" 2>&1
      rc=$?
      if [ -s $o ]; then python3 -c "
import json,sys
for l in open('$o'):
  r=json.loads(l); r['alone_warps']=$W; r['round']=$round; print(json.dumps(r))" >> "$RES"; fi
      python3 - "$o" "$W" "$round" "$rc" "$P" <<'PY'
import json,sys
o,W,rnd,rc,P=sys.argv[1:]
try:
    rs=[json.loads(l) for l in open(o)]
except OSError:
    rs=[]
for r in rs:
    if r.get('metric')!='msg_rate': continue
    st=r.get('stats') or {}
    print(f"W={W} r={rnd} {P:55s} {r.get('status')} rate {st.get('p50')} ceiling {r.get('engine_ceiling')} ({r.get('engine_ceiling_shape')}) mhz {r.get('sm_clock_mhz')} {r.get('error','')}")
if not rs: print(f"W={W} r={rnd} {P} rc={rc} no records")
PY
    done
  done
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> "$LOG"
