#!/usr/bin/env bash
# One device-machine call for mini-proxy: build (one arch), run the proxy ctests there, measure the
# three experiments (one_op: issue / put+completion / ping-pong RTT; msg_rate: workers x batch x
# rings, cold and warm; worker_ceiling: the same workers with no NIC), check the verbs no-device
# exit, record the GPU clocks before and after, and leave everything under $OUT (<= 8 files):
#   env.txt log.txt proxy_one_op-runN.jsonl proxy_msg_rate-runN.jsonl proxy_worker_ceiling-runN.jsonl
# Usage (repository root): RUNS=2 [SET=main|followup] [SKIP_CTEST=1] native/bench/proxy/device_run.sh
#   SET=main: the sweep of the first call; SET=followup: enqueue-only issue timing with the store
#   scope variants, and rings > workers so one worker is fed by several producers.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/proxy-out}
mkdir -p "$out"
runs=${RUNS:-1}
budget_s=${BUDGET_S:-240}  # skip further runs once this much wall time is spent
t_begin=$(date +%s)
build=/tmp/gicomm-proxy-build
host=${GICOMM_HOST:-h200x2}
campaign=${GICOMM_CAMPAIGN:-h200x2-2026-11-30}
prov=${GICOMM_PROVENANCE:-h200x2-proxy}

{
  echo "== date"; date -u; echo "== hostname"; hostname; echo "== git"; git rev-parse HEAD 2>/dev/null
  echo "== cpus"; nproc; lscpu 2>/dev/null | grep -E "Model name|Socket|NUMA|MHz"
  for n in /sys/devices/system/node/node*/cpulist; do echo "$n: $(cat "$n")"; done
  ls /sys/devices/system/cpu/cpu0/cpufreq 2>&1 | head -3
  echo "== nvidia-smi"; nvidia-smi; echo "== clocks before"; nvidia-smi -q -d CLOCK
} > "$out/env.txt" 2>&1

log="$out/log.txt"
echo "== build" | tee -a "$log"
cmake -S native -B "$build" -DGICOMM_CUDA_ARCHS=90 -DCMAKE_BUILD_TYPE=Release >> "$log" 2>&1 &&
  cmake --build "$build" -j 16 --target gicomm-bench-proxy proxy_ring_test proxy_protocol_test \
    proxy_topology_test proxy_softnic_test >> "$log" 2>&1
rc=$?
[ $rc -ne 0 ] && { tail -40 "$log"; echo "build failed"; exit 1; }
cmake --build "$build" -j 16 --target proxy_verbs_test >> "$log" 2>&1 || echo "(no rdma-core here: verbs test not built)" | tee -a "$log"
[ -z "${SKIP_CTEST:-}" ] && (cd "$build" && ctest -L proxy --output-on-failure 2>&1 | tail -15) | tee -a "$log"
bench="$build/bin/gicomm-bench-proxy"
[ -x "$bench" ] || bench=$(find "$build" -name gicomm-bench-proxy -type f | head -1)

pts=/tmp/proxy-points; mkdir -p "$pts"
python3 - "$pts" "${SET:-main}" <<'PY'
import json, sys, itertools
d, which = sys.argv[1], sys.argv[2]
def write(name, rows):
    with open(f"{d}/{name}.jsonl", "w") as f:
        for p in rows:
            pid = name + "-" + "-".join(f"{k}{v}" for k, v in p.items())
            f.write(json.dumps({"point_id": pid, "params": p}) + "\n")
one = []
for state, enq, comp in itertools.product(["cold", "warm"], ["baseline", "tuned"], ["host", "gpu"]):
    one.append(dict(mode="issue", enqueue=enq, completion=comp, state=state, workers=1, rings=1, batch=1))
for state, enq in itertools.product(["cold", "warm"], ["baseline", "tuned"]):
    one.append(dict(mode="pingpong", enqueue=enq, completion="host", state=state, workers=2, rings=2, batch=1))
rate = []
for state, w, b in itertools.product(["cold", "warm"], [1, 2, 4, 8], [1, 4, 16]):
    rate.append(dict(mode="rate", enqueue="tuned", completion="host", state=state, workers=w, rings=w, batch=b))
for r in [8, 32]:
    rate.append(dict(mode="rate", enqueue="tuned", completion="host", state="warm", workers=2, rings=r, batch=16))
for enq, comp, b in [("baseline", "host", 1), ("baseline", "host", 16), ("tuned", "gpu", 1), ("tuned", "gpu", 16)]:
    rate.append(dict(mode="rate", enqueue=enq, completion=comp, state="warm", workers=1, rings=1, batch=b))
ceil = [dict(mode="rate", enqueue="tuned", completion="host", state="warm", workers=w, rings=w, batch=b)
        for w, b in itertools.product([1, 8], [1, 16])]
if which == "followup":
    def pt(**k):
        k.setdefault("completion", "host"); k.setdefault("batch", 1); k.setdefault("store", "sys")
        return k
    one = [pt(mode="issue", enqueue=e, state=s, workers=1, rings=1)
           for e, s in itertools.product(["baseline", "tuned"], ["cold", "warm"])]
    one += [pt(mode="issue", enqueue="tuned", completion="gpu", state="warm", workers=1, rings=1)]
    one += [pt(mode="issue", enqueue="tuned", state="warm", workers=1, rings=1, store=st) for st in ["gpu", "weak"]]
    one += [pt(mode="pingpong", enqueue="tuned", state=s, workers=2, rings=2) for s in ["cold", "warm"]]
    one += [pt(mode="pingpong", enqueue="tuned", state="warm", workers=2, rings=2, store="weak")]
    rate = [pt(mode="rate", enqueue="tuned", state=s, workers=1, rings=8, batch=b)
            for s, b in itertools.product(["cold", "warm"], [1, 4, 16])]
    rate += [pt(mode="rate", enqueue="tuned", state="warm", workers=8, rings=32, batch=b) for b in [1, 4, 16]]
    rate += [pt(mode="rate", enqueue="tuned", state="warm", workers=1, rings=1, batch=b) for b in [1, 16]]
    rate += [pt(mode="rate", enqueue="tuned", state="warm", workers=1, rings=r, batch=16, store="weak") for r in [1, 8]]
    ceil = [pt(mode="rate", enqueue="tuned", state="warm", workers=1, rings=8, batch=b) for b in [1, 4, 16]]
    ceil += [pt(mode="rate", enqueue="tuned", state="warm", workers=8, rings=32, batch=b) for b in [1, 16]]
write("proxy_one_op", one); write("proxy_msg_rate", rate); write("proxy_worker_ceiling", ceil)
PY

common=(--campaign "$campaign" --host "$host" --platform h200 --provenance-id "$prov" --timeout-ms 2000)
for ((run = 0; run < runs; run++)); do
  if (( run > 0 && $(date +%s) - t_begin > budget_s )); then echo "skip run $run: time budget" | tee -a "$log"; break; fi
  echo "== run $run" | tee -a "$log"
  timeout 150 "$bench" --experiment proxy_one_op --points "$pts/proxy_one_op.jsonl" \
    --out "$out/proxy_one_op-run$run.jsonl" --run-index $run --iters 2000 --warmup 200 "${common[@]}" 2>> "$log"
  echo "one_op exit $?" | tee -a "$log"
  timeout 200 "$bench" --experiment proxy_msg_rate --points "$pts/proxy_msg_rate.jsonl" \
    --out "$out/proxy_msg_rate-run$run.jsonl" --run-index $run "${common[@]}" 2>> "$log"
  echo "msg_rate exit $?" | tee -a "$log"
  timeout 60 "$bench" --experiment proxy_worker_ceiling --points "$pts/proxy_worker_ceiling.jsonl" \
    --out "$out/proxy_worker_ceiling-run$run.jsonl" --run-index $run --nic-backend none "${common[@]}" 2>> "$log"
  echo "worker_ceiling exit $?" | tee -a "$log"
done
"$bench" --experiment proxy_verbs --out /tmp/verbs.jsonl --run-index 0 --nic-backend verbs --param mode=issue \
  "${common[@]}" 2>> "$log"
echo "verbs backend exit $? (3 = hardware missing, expected without an RDMA NIC)" | tee -a "$log"
{ echo "== clocks after"; nvidia-smi -q -d CLOCK; } >> "$out/env.txt" 2>&1

python3 - "$out" <<'PY' | tee -a "$log"
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")):
    for line in open(f):
        r = json.loads(line)
        p = r["params"]
        key = f'{r["experiment"][6:]:<14} {p.get("mode",""):<8} {p.get("enqueue",""):<8} {p.get("completion",""):<4} {p.get("state",""):<4} {p.get("store","-"):<4} w{p.get("workers","")} r{p.get("rings","")} b{p.get("batch","")} run{r["run_index"]}'
        if r["status"] != "ok":
            print(key, "FAILED:", r.get("error", "")[:160]); continue
        s = r["stats"]
        print(f'{key} {r["metric"]:<13} p50 {s["p50"]:9.3f} p99 {s.get("p99",0):9.3f} {r["unit"]:<6} sm {r.get("sm_clock_mhz") or 0:6.0f} cpu {r.get("cpu_clock_mhz") or 0:6.0f} chain {p.get("mean_chain",0):.2f}')
PY
echo "total $(( $(date +%s) - t_begin )) s"
