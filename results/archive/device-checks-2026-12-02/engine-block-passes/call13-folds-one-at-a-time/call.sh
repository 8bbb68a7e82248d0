#!/usr/bin/env bash
# Device call 13 (scratch): the two folds of call 11 one at a time, against the head (b813484's
# engine): FA (warp 0's next CQ index from block_cq_pi), FB (one helper for a pass's CQE writes,
# one for its counts). GPU checks on FA and FB; goals program of H, FA, FB (8 warps a block), three
# rounds, interleaved.
set -u
source tools/device-env.sh
OUT=${OUT:-/tmp/out}; R=$OUT/call13; mkdir -p $R
T0=$(date +%s)
mk() {
  rm -rf /tmp/t$1 && mkdir -p /tmp/t$1 && cp -r native config workflow /tmp/t$1/ && rm -rf /tmp/t$1/native/build
  cp $2 /tmp/t$1/native/src/nic/softnic/gpu_engine.cu
}
mk H .dev/head.cu; mk FA .dev/fa.cu; mk FB .dev/fb.cu
for v in H FA FB; do
  tg="gicomm-softnic-engine-goals"; [ $v != H ] && tg="$tg gicomm-softnic-gpu-check gicomm-gda-gpu-check test_softnic_protocol"
  (cmake -S /tmp/t$v/native -B build/g$v -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release > $R/cfg$v.log 2>&1 &&
   cmake --build build/g$v -j5 --target $tg > $R/build$v.log 2>&1; echo "$v $?" >> $R/build-rc.txt) &
done
wait
echo "builds done at $(( $(date +%s) - T0 )) s" >> $R/build-rc.txt
nvidia-smi -q -d CLOCK > $R/clocks-before.txt 2>&1
for v in FA FB; do
  timeout 150 build/g$v/bin/test_softnic_protocol --engine gpu > $R/check-$v-protocol.log 2>&1; echo "$v protocol rc=$?" >> $R/check-rc.txt
  timeout 180 build/g$v/bin/gicomm-softnic-gpu-check > $R/check-$v-gpu.log 2>&1; echo "$v gpu-check rc=$?" >> $R/check-rc.txt
  timeout 240 build/g$v/bin/gicomm-gda-gpu-check > $R/check-$v-gda.log 2>&1; echo "$v gda-check rc=$?" >> $R/check-rc.txt
done
for rep in 0 1 2; do for v in H FA FB; do
  timeout 120 build/g$v/bin/gicomm-softnic-engine-goals --label $v-w8 --engine-warps 8 --placement softnic-gpu-same > $R/goals-$v-$rep.jsonl 2> $R/goals-$v-$rep.err; echo "$v $rep rc=$?" >> $R/run-rc.txt
done; done
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
    print(os.path.relpath(f, R), " ".join(out))
PY
cat $R/build-rc.txt $R/check-rc.txt; grep -v "rc=0" $R/run-rc.txt; tail -1 $R/check-*-gpu.log $R/check-*-gda.log; cat $R/summary.txt
echo "total $(( $(date +%s) - T0 )) s"
tar -czf $OUT/call13.tgz -C $OUT call13 && rm -rf $R
