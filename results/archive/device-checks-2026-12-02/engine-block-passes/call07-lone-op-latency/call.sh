#!/usr/bin/env bash
# Device call (scratch): one op's put+completion, 420 ns longer with block passes (goals program,
# 4 KiB, one pointer write a doorbell, which never takes a block pass). The goals program of:
# A main's engine (4596e78), B this tree, V3 this tree without the sub-window's extra window load;
# each with 8 warps a block (helped: one QP a block) and with 1 (no helpers); then the profiling
# builds of A and B (cycles per pass by step, the put+completion engine last). Two rounds each.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; R=$OUT/block6; mkdir -p $R
T0=$(date +%s)
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
mk() {
  rm -rf /tmp/t$1 && mkdir -p /tmp/t$1 && cp -r native config workflow /tmp/t$1/ && rm -rf /tmp/t$1/native/build
  if [ -d "$2" ]; then
    (cd $2/native/src/nic/softnic && find . -type f ! -name CMakeLists.txt -print0 | xargs -0 -I{} cp {} /tmp/t$1/native/src/nic/softnic/{})
  elif [ -f "$2" ]; then cp $2 /tmp/t$1/native/src/nic/softnic/gpu_engine.cu; fi
}
mk A .device-baseline; mk B none; mk V3 .dev/v3.cu
for v in A B V3 AP BP; do
  t=$v; opt=OFF; case $v in AP) t=A; opt=ON;; BP) t=B; opt=ON;; esac
  (cmake -S /tmp/t$t/native -B build/g$v -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release -DGICOMM_ENGINE_PHASES=$opt > $R/cfg$v.log 2>&1 &&
   cmake --build build/g$v -j4 --target gicomm-softnic-engine-goals > $R/build$v.log 2>&1; echo "$v $?" >> $R/build-rc.txt) &
done
wait
echo "builds done at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
for rep in 0 1; do for v in A B V3; do for w in 8 1; do
  timeout 120 build/g$v/bin/gicomm-softnic-engine-goals --label $v-w$w --engine-warps $w --placement softnic-gpu-same > $R/goals-$v-w$w-$rep.jsonl 2> $R/goals-$v-w$w-$rep.err; echo "$v w$w $rep rc=$?" >> $R/run-rc.txt
done; done; done
for v in AP BP; do
  timeout 120 build/g$v/bin/gicomm-softnic-engine-goals --label $v --placement softnic-gpu-same > $R/goals-$v.jsonl 2> $R/goals-$v.err; echo "$v rc=$?" >> $R/run-rc.txt
done
nvidia-smi -q -d CLOCK > $R/clocks-after.txt 2>&1
python3 - "$R" <<'PY' > $R/summary.txt 2>&1
import json, sys, glob, os
R = sys.argv[1]
for f in sorted(glob.glob(f"{R}/goals-*.jsonl")):
    out = []
    for line in open(f):
        try: r = json.loads(line)
        except Exception: continue
        m = r.get("measure", ""); sh = r.get("shape", "")
        if any(k in m for k in ("completion", "warp_copy", "chain", "split")) or (m == "ceiling" and sh in ("inline 8 B", "pointer 4096 B")):
            out.append(f"{m}:{sh}={r.get('value'):.0f}" if isinstance(r.get('value'), (int, float)) else f"{m}:{sh}=?")
    print(os.path.basename(f)[6:-6], " ".join(out))
for v in ("AP", "BP"):
    lines = [l.strip() for l in open(f"{R}/goals-{v}.err") if l.startswith("engine phases")]
    print(v, "last phases:", lines[-1] if lines else "-")
PY
cat $R/build-rc.txt; grep -v "rc=0" $R/run-rc.txt; cat $R/summary.txt
echo "total $(( $(date +%s) - T0 )) s"
tar -czf $OUT/block6.tgz -C $OUT block6 && rm -rf $R
