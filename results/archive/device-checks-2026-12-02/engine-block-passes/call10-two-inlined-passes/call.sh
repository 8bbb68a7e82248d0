#!/usr/bin/env bash
# Device call (scratch): the helped kernel with two inlined passes, one with block passes and one
# without (D1: the drain picks), against A (4596e78) and B (c6d3c9d): the goals program, 8 warps a
# block, two rounds.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; R=$OUT/block9; mkdir -p $R
T0=$(date +%s)
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
mk() {
  rm -rf /tmp/t$1 && mkdir -p /tmp/t$1 && cp -r native config workflow /tmp/t$1/ && rm -rf /tmp/t$1/native/build
  if [ -d "$2" ]; then
    (cd $2/native/src/nic/softnic && find . -type f ! -name CMakeLists.txt -print0 | xargs -0 -I{} cp {} /tmp/t$1/native/src/nic/softnic/{})
  elif [ -f "$2" ]; then cp $2 /tmp/t$1/native/src/nic/softnic/gpu_engine.cu; fi
}
mk A .device-baseline; mk B none; mk D1 .dev/d1.cu
for v in A B D1; do
  t=$v; opt=OFF
  (cmake -S /tmp/t$t/native -B build/g$v -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release -DGICOMM_ENGINE_PHASES=$opt > $R/cfg$v.log 2>&1 &&
   cmake --build build/g$v -j4 --target gicomm-softnic-engine-goals > $R/build$v.log 2>&1; echo "$v $?" >> $R/build-rc.txt) &
done
wait
echo "builds done at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
for rep in 0 1; do for v in A B D1; do for w in 8; do
  timeout 120 build/g$v/bin/gicomm-softnic-engine-goals --label $v-w$w --engine-warps $w --placement softnic-gpu-same > $R/goals-$v-w$w-$rep.jsonl 2> $R/goals-$v-w$w-$rep.err; echo "$v w$w $rep rc=$?" >> $R/run-rc.txt
done; done; done
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
        if m in ("completion", "ceiling@528", "ceiling@64") or (m == "ceiling" and sh in ("inline 8 B", "inline 128 B", "pointer 4096 B", "pointer 65536 B")):
            out.append(f"{m}:{sh}={r.get('value'):.0f}" if isinstance(r.get('value'), (int, float)) else f"{m}:{sh}=?")
    print(os.path.basename(f)[6:-6], " ".join(out))
PY
cat $R/build-rc.txt; grep -v "rc=0" $R/run-rc.txt; cat $R/summary.txt
echo "total $(( $(date +%s) - T0 )) s"
tar -czf $OUT/block9.tgz -C $OUT block9 && rm -rf $R
