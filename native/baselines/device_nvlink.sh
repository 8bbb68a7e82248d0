#!/usr/bin/env bash
# One device call for the NVLink experiments (nvlink_dissection, nvlink_put_size) on a two-GPU machine with no network:
# record the clocks and topology, find NVSHMEM and NCCL in the image's pip packages, build the three
# drivers, run every point of each experiment in RUNS independent process runs, and leave records
# and evidence under $OUT (at most 8 files: <experiment>-run<r>.jsonl, evidence.txt, logs.txt).
#   native/baselines/device_nvlink.sh RUNS EXPERIMENT...
# Each experiment's points are read from build/nvlink_run/<experiment>.points.jsonl (written by
# `python -m gicomm.baselines.points`, carried with the call); warmup and iters from its YAML.
# Never changes clocks or persistence; NVLink multicast stays off.
set -uo pipefail
cd "$(dirname "$0")/../.."
source native/baselines/device_build.sh
runs=$1
shift
out=${OUT:-/tmp/gicomm-nvlink-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ev="$out/evidence.txt"
logs="$out/logs.txt"
{
  echo "== date"; date -u
  echo "== nvidia-smi -L"; nvidia-smi -L
  echo "== nvidia-smi topo -m"; nvidia-smi topo -m
  echo "== nvidia-smi -q -d CLOCK (before)"; nvidia-smi -q -d CLOCK
  echo "== nvcc"; nvcc --version | tail -2
  echo "== packages"
  python3 -m pip show nvidia-nvshmem-cu13 nvidia-nccl-cu13 2>/dev/null | grep -E '^(Name|Version|Location)'
  echo "== git"; git log -1 --format='%H %s' 2>/dev/null || true
} > "$ev" 2>&1
nvshmem=$(python3 -c 'import nvidia.nvshmem as m; print(list(m.__path__)[0])' 2>/dev/null)
nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
echo "nvshmem=$nvshmem nccl=$nccl" >> "$ev"
bdir=build/device-nvlink
targets="gicomm-bench-nvlink gicomm-bench-nvlink-nvshmem gicomm-bench-nvlink-nccl"
t0=$(date +%s)
echo "== build" > "$logs"
{
  cmake -S native -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DGICOMM_CUDA_ARCHS=90 -DGICOMM_WITH_RDMA=OFF \
    -DGICOMM_NVSHMEM_ROOT="$nvshmem" -DGICOMM_NCCL_ROOT="$nccl" &&
    cmake --build "$bdir" -j 16 --target $targets
} >> "$logs" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
  # Another component's CMake failed: build the baselines alone on the shared harness.
  echo "full configure/build failed ($rc); building the baselines alone" | tee -a "$logs"
  bdir=build/device-nvlink-alone
  build_baselines "$bdir" $targets >> "$logs" 2>&1
  rc=$?
fi
echo "build exit $rc after $(( $(date +%s) - t0 )) s" | tee -a "$logs"
ls -la "$bdir/bin" >> "$logs" 2>&1
echo "== cuobjdump --dump-resource-usage" >> "$ev"
for b in "$bdir"/bin/gicomm-bench-nvlink*; do
  echo "-- $b"; cuobjdump --dump-resource-usage "$b" 2>&1 | grep -E 'Function|REG' | head -40
done >> "$ev" 2>&1
echo "== runs" >> "$logs"
for exp in "$@"; do
  read -r warmup iters < <(python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); print(d.get("warmup", 100), d.get("iters", 1000))' "config/experiments/$exp.yaml")
  for r in $(seq 0 $((runs - 1))); do
    t0=$(date +%s)
    timeout 200 "$bdir/bin/gicomm-bench-nvlink" --experiment "$exp" --points "build/nvlink_run/$exp.points.jsonl" \
      --out "$out/$exp-run$r.jsonl" --campaign h200x2-2026-11-30 --host h200x2 --platform h200 --run-index "$r" \
      --provenance-id h200x2-2026-11-30 --warmup "$warmup" --iters "$iters" --timeout-ms 2000 >> "$logs" 2>&1
    echo "$exp run $r exit $? after $(( $(date +%s) - t0 )) s" | tee -a "$logs"
  done
done
{ echo "== nvidia-smi -q -d CLOCK (after)"; nvidia-smi -q -d CLOCK; } >> "$ev" 2>&1
grep -h '\[gicomm\]' "$logs" | tail -30
