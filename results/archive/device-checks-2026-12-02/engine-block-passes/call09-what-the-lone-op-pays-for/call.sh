#!/usr/bin/env bash
# Device call (scratch): where the helped kernel's lone-op latency comes from. The goals program
# (8 warps a block) of A (4596e78), B (67b8da8), L1 (B, warp 0 never starts a block pass), L2 (L1,
# and the helpers without the block-pass branch), L4 (B, warp 0 reading 32 WQEBBs at most); two rounds.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; R=$OUT/block8; mkdir -p $R
T0=$(date +%s)
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
mk() {
  rm -rf /tmp/t$1 && mkdir -p /tmp/t$1 && cp -r native config workflow /tmp/t$1/ && rm -rf /tmp/t$1/native/build
  if [ -d "$2" ]; then
    (cd $2/native/src/nic/softnic && find . -type f ! -name CMakeLists.txt -print0 | xargs -0 -I{} cp {} /tmp/t$1/native/src/nic/softnic/{})
  elif [ -f "$2" ]; then cp $2 /tmp/t$1/native/src/nic/softnic/gpu_engine.cu; fi
}
mk A .device-baseline; mk B none; mk L1 .dev/l1.cu; mk L2 .dev/l2.cu; mk L4 .dev/l4.cu
for v in A B L1 L2 L4; do
  t=$v; opt=OFF
  (cmake -S /tmp/t$t/native -B build/g$v -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release -DGICOMM_ENGINE_PHASES=$opt > $R/cfg$v.log 2>&1 &&
   cmake --build build/g$v -j4 --target gicomm-softnic-engine-goals > $R/build$v.log 2>&1; echo "$v $?" >> $R/build-rc.txt) &
done
wait
echo "builds done at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
for rep in 0 1; do for v in A B L1 L2 L4; do for w in 8; do
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
        if m in ("completion", "split_landed") or (m == "ceiling" and sh in ("inline 8 B", "inline 128 B")):
            out.append(f"{m}:{sh}={r.get('value'):.0f}" if isinstance(r.get('value'), (int, float)) else f"{m}:{sh}=?")
    print(os.path.basename(f)[6:-6], " ".join(out))
PY
cat $R/build-rc.txt; grep -v "rc=0" $R/run-rc.txt; cat $R/summary.txt
echo "total $(( $(date +%s) - T0 )) s"
tar -czf $OUT/block8.tgz -C $OUT block8 && rm -rf $R
