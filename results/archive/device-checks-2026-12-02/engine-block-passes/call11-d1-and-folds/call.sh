#!/usr/bin/env bash
# Device call 11 (scratch): GPU checks and goals of F1 (D1 + the two folds: the working tree)
# against D1 (.device-baseline); then goals of B (head f025a71), D1, F1 twice more, 8 warps a block.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; R=$OUT/call11; mkdir -p $R
T0=$(date +%s)
mk() {
  rm -rf /tmp/t$1 && mkdir -p /tmp/t$1 && cp -r native config workflow /tmp/t$1/ && rm -rf /tmp/t$1/native/build
  [ -f "$2" ] && cp $2 /tmp/t$1/native/src/nic/softnic/gpu_engine.cu
}
git show f025a71:native/src/nic/softnic/gpu_engine.cu > /tmp/b.cu 2>/dev/null || cp .dev/b.cu /tmp/b.cu
mk B /tmp/b.cu; mk D1 .dev/d1now.cu; mk F1 .dev/f1.cu
for v in B D1 F1; do
  (cmake -S /tmp/t$v/native -B build/g$v -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release > $R/cfg$v.log 2>&1 &&
   cmake --build build/g$v -j3 --target gicomm-softnic-engine-goals > $R/build$v.log 2>&1; echo "$v $?" >> $R/build-rc.txt) &
done
OUT=$R/check TOTAL_S=330 bash native/tests/softnic/device_check.sh > $R/check.log 2>&1
wait
echo "check+builds done at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
for rep in 0 1; do for v in B D1 F1; do
  timeout 120 build/g$v/bin/gicomm-softnic-engine-goals --label $v-w8 --engine-warps 8 --placement softnic-gpu-same > $R/goals-$v-$rep.jsonl 2> $R/goals-$v-$rep.err; echo "$v $rep rc=$?" >> $R/run-rc.txt
done; done
nvidia-smi -q -d CLOCK > $R/clocks-after.txt 2>&1
python3 - "$R" <<'PY' > $R/summary.txt 2>&1
import json, sys, glob, os
R = sys.argv[1]
for f in sorted(glob.glob(f"{R}/goals-*.jsonl")) + sorted(glob.glob(f"{R}/check/goals-*.jsonl")):
    out = []
    for line in open(f):
        try: r = json.loads(line)
        except Exception: continue
        m = r.get("measure", ""); sh = r.get("shape", "")
        if m in ("completion", "ceiling@528", "ceiling@64") or (m == "ceiling" and sh in ("inline 8 B", "inline 128 B", "pointer 4096 B", "pointer 65536 B")):
            out.append(f"{m}:{sh}={r.get('value'):.0f}" if isinstance(r.get('value'), (int, float)) else f"{m}:{sh}=?")
    print(os.path.relpath(f, R), " ".join(out))
PY
cat $R/build-rc.txt; grep -v "rc=0" $R/run-rc.txt; head -60 $R/check/summary.txt; cat $R/summary.txt
echo "total $(( $(date +%s) - T0 )) s"
tar -czf $OUT/call11.tgz -C $OUT call11 && rm -rf $R
