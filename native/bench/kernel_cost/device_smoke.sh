#!/usr/bin/env bash
# One device-machine call for the kernel-cost, loaded-RTT and goodput drivers: use the binaries
# carried from the developer machine when they load there (else build the three targets, one arch),
# run each experiment's `reduced` sweep (config/experiments/<name>.yaml, same point ids as the
# pipeline), and leave under $OUT (<= 8 files):
#   env.txt log.txt kernel_cost.jsonl loaded_rtt.jsonl goodput.jsonl
# Usage (repository root): [BIN=build/kc/bin] [PER_DRIVER_S=45] native/bench/kernel_cost/device_smoke.sh
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/kc-out}
mkdir -p "$out"
bin=${BIN:-build/kc/bin}
per_driver_s=${PER_DRIVER_S:-45}
log="$out/log.txt"
{
  echo "== date"; date -u; echo "== git"; git rev-parse HEAD 2>/dev/null
  echo "== nvidia-smi"; nvidia-smi; nvidia-smi topo -m; echo "== clocks before"; nvidia-smi -q -d CLOCK
} > "$out/env.txt" 2>&1

# A carried binary that loads answers a bad argument with exit 2. The CUDA runtime they were linked
# against travels beside them (libcudart.so.13), in case the image keeps it elsewhere.
export LD_LIBRARY_PATH="$PWD/$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
usable=1
for d in kernel-cost loaded-rtt goodput; do
  "$bin/gicomm-bench-$d" --no-such-argument > /dev/null 2>&1
  [ $? -eq 2 ] || usable=0
done
if [ $usable = 0 ]; then
  echo "== carried binaries do not load here: building" | tee -a "$log"
  b=/tmp/gicomm-kc-build
  cmake -S native -B "$b" -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release >> "$log" 2>&1 &&
    cmake --build "$b" -j 32 --target gicomm-bench-kernel-cost gicomm-bench-loaded-rtt gicomm-bench-goodput >> "$log" 2>&1 ||
    { tail -40 "$log"; echo "build failed"; exit 1; }
  bin=$b/bin
else
  echo "== using carried binaries from $bin" | tee -a "$log"
fi

# Points of the reduced sweep, ids as workflow/gicomm/experiments.py computes them.
python3 - <<'EOF' >> "$log" 2>&1
import hashlib, itertools, json, yaml
for name in ["kernel_cost", "loaded_rtt", "goodput"]:
    d = yaml.safe_load(open(f"config/experiments/{name}.yaml"))
    sweep = {**d["sweep"], **d.get("reduced", {})}
    keys = list(sweep)
    with open(f"/tmp/{name}.points.jsonl", "w") as f:
        for values in itertools.product(*(sweep[k] for k in keys)):
            params = dict(zip(keys, values))
            pid = hashlib.sha1(json.dumps({"experiment": name, "params": params}, sort_keys=True).encode()).hexdigest()[:16]
            f.write(json.dumps({"point_id": pid, "params": params}) + "\n")
    print(name, "points:", sum(1 for _ in open(f"/tmp/{name}.points.jsonl")), "warmup", d.get("warmup"), "iters", d.get("iters"))
EOF

for name in kernel_cost loaded_rtt goodput; do
  exe=$bin/gicomm-bench-${name//_/-}
  read -r warmup iters < <(python3 -c "import yaml; d=yaml.safe_load(open('config/experiments/$name.yaml')); print(d.get('warmup',100), d.get('iters',1000))")
  echo "== $name (warmup $warmup, iters $iters)" | tee -a "$log"
  t0=$(date +%s.%N)
  timeout -s KILL "$per_driver_s" "$exe" --experiment "$name" --points "/tmp/$name.points.jsonl" --out "$out/$name.jsonl" \
    --campaign h200x2-2026-11-30 --host h200x2 --platform h200 --run-index 0 --provenance-id h200x2-2026-11-30 \
    --warmup "$warmup" --iters "$iters" --timeout-ms 2000 >> "$log" 2>&1
  echo "== $name exit $? after $(python3 -c "import time; print(round(time.time()-$t0,1))") s" | tee -a "$log"
done
echo "== clocks after" >> "$out/env.txt"; nvidia-smi -q -d CLOCK >> "$out/env.txt" 2>&1
grep -h '"status": "failed"' "$out"/*.jsonl | head -20
tail -60 "$log"
