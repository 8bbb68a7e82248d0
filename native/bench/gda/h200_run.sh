#!/bin/bash
# One device-tool call on nvidia-h200-x2: build the mini-gda / softnic targets, run the GPU
# protocol check on both engines, then the benchmarks. Usage: h200_run.sh STAGE (smoke|full).
# Writes under $OUT: log.txt, clocks.txt and one JSONL per experiment.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STAGE=${1:-smoke}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/log.txt
exec > >(tee -a "$LOG") 2>&1
ROOT=$(pwd)
echo "== $(date -u +%FT%TZ) stage=$STAGE"
nvidia-smi -q -d CLOCK > "$OUT/clocks.txt" 2>&1
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,driver_version --format=csv
nvidia-smi topo -m | head -5
# Build only this area (a copy without folders other engineers are editing).
SRC=/tmp/gicomm-native
rm -rf $SRC && mkdir -p $SRC
(cd native && tar cf - --exclude=build --exclude=bench/proxy --exclude=tests/proxy --exclude=src/proxy \
   --exclude=src/nic/verbs --exclude=baselines .) | (cd $SRC && tar xf -)
cmake -S $SRC -B /tmp/gicomm-build -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release > /tmp/cmake.log 2>&1 || { tail -20 /tmp/cmake.log; exit 1; }
T0=$(date +%s)
make -C /tmp/gicomm-build -j16 gicomm-gda-gpu-check gicomm-bench-gda gicomm-bench-engine gicomm-bench-timer 2>&1 | grep -E "error|warning" ; echo "build ${PIPESTATUS[0]} in $(( $(date +%s) - T0 )) s"
B=/tmp/gicomm-build/bin
COMMON="--campaign h200x2-2026-11-30 --host h200x2 --platform h200 --run-index ${RUN:-0} --provenance-id h200x2-2026-11-30"
P=/tmp/points; mkdir -p $P
echo "== protocol check"
timeout 180 $B/gicomm-gda-gpu-check; echo "protocol exit $?"
pts() { python3 -c "
import json,sys,itertools
for p in $1: print(json.dumps({'params': p}))
" > $P/$2; }
if [ "$STAGE" = smoke ]; then
  pts "[{'injected_ns': n} for n in (1000, 100000)]" timer.jsonl
  pts "[{'engine':'gpu','qps':q,'depth':1024} for q in (1,16)] + [{'engine':'cpu','qps':4,'depth':1024,'threads':2}]" engine.jsonl
  pts "[{'variant':v,'payload':'inline','backend':'softnic-gpu'} for v in ('none','gpu_fence','sys_fence')]" oneop.jsonl
  pts "[{'variant':'gpu_fence','payload':'inline','backend':'softnic-gpu'}]" rtt.jsonl
  pts "[{'mode':m,'blocks':b,'threads':t,'qps':q,'batch':ba,'wqes':200000} for (m,b,t,q,ba) in (('thread',1,1,1,1),('thread',64,1,64,16),('warp',4,128,4,32),('handoff',4,64,4,4),('lock',4,64,4,4),('hybrid',16,1,16,16))]" rate.jsonl
  ITERS=200
else
  pts "[{'injected_ns': n} for n in (1000, 10000, 100000, 1000000)]" timer.jsonl
  pts "[{'engine':'gpu','qps':q,'depth':4096,'payload':pl} for q in (1,16,64,132,528) for pl in ('inline',)] + [{'engine':'gpu','qps':64,'depth':4096,'payload':'pointer'}] + [{'engine':'cpu','qps':q,'depth':4096,'threads':t} for q in (16,64) for t in (1,4,8)]" engine.jsonl
  pts "[{'variant':v,'payload':p,'backend':'softnic-gpu'} for v in ('none','gpu_fence','fenced_dbrec','gpu_release','threadfence','sys_release','sys_fence') for p in ('inline','pointer')]" oneop.jsonl
  pts "[{'variant':v,'payload':'inline','backend':'softnic-gpu'} for v in ('none','gpu_fence','fenced_dbrec','gpu_release','threadfence','sys_release','sys_fence')] + [{'variant':'gpu_fence','payload':'pointer','backend':'softnic-gpu'}]" rtt.jsonl
  pts "[{'mode':'thread','blocks':1,'threads':1,'qps':1,'batch':b,'wqes':200000} for b in (1,4,16,64,256)] + [{'mode':'warp','blocks':1,'threads':t,'qps':1,'batch':32,'wqes':1000000} for t in (32,64,128)] + [{'mode':'thread','blocks':s,'threads':1,'qps':s,'batch':b,'wqes':4000000} for s in (1,16,64,132) for b in (1,16)] + [{'mode':'thread','blocks':64,'threads':1,'qps':64,'batch':16,'completion':'all','wqes':4000000}] + [{'mode':'warp','blocks':s,'threads':128,'qps':q,'batch':32,'wqes':8000000} for (s,q) in ((16,16),(64,64),(132,132),(132,528))] + [{'mode':m,'blocks':16,'threads':64,'qps':16,'batch':b,'wqes':2000000} for m in ('lock','handoff') for b in (1,16)] + [{'mode':'hybrid','blocks':s,'threads':1,'qps':s,'batch':16,'wqes':4000000} for s in (16,64)] + [{'mode':'thread','blocks':132,'threads':4,'qps':528,'batch':16,'wqes':8000000}]" rate.jsonl
  ITERS=2000
fi
run() { local name=$1; shift; echo "== $name"; timeout ${TMO:-150} "$@" $COMMON; echo "$name exit $?"; }
run timer $B/gicomm-bench-timer --experiment timer_selfcheck --points $P/timer.jsonl --out $OUT/timer_selfcheck.jsonl --iters 50
run engine $B/gicomm-bench-engine --experiment engine_ceiling --points $P/engine.jsonl --out $OUT/engine_ceiling.jsonl --timeout-ms 5000
run oneop $B/gicomm-bench-gda --experiment gda_one_op --points $P/oneop.jsonl --out $OUT/gda_one_op.jsonl --iters $ITERS --warmup 100 --nic-backend softnic-gpu
run rtt $B/gicomm-bench-gda --experiment gda_rtt --points $P/rtt.jsonl --out $OUT/gda_rtt.jsonl --iters $ITERS --warmup 100 --nic-backend softnic-gpu
run rate $B/gicomm-bench-gda --experiment gda_msg_rate --points $P/rate.jsonl --out $OUT/gda_msg_rate.jsonl --iters 3 --nic-backend softnic-gpu --timeout-ms 5000
# The cpu engine with GPU producers (queues in pinned host memory): one-op and a rate point.
sed 's/softnic-gpu/softnic-cpu/' $P/oneop.jsonl | grep -E '"gpu_fence"' > $P/oneop_cpu.jsonl
run oneop_cpu $B/gicomm-bench-gda --experiment gda_one_op --points $P/oneop_cpu.jsonl --out $OUT/gda_one_op.jsonl --iters 500 --warmup 50 --nic-backend softnic-cpu
echo "== $(date -u +%FT%TZ) done"
