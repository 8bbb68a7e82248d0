#!/usr/bin/env bash
# One device call for the NIC baselines (library_baselines): build the CUDA harnesses against the
# image's NVSHMEM and NCCL pip packages, run each directly on one point (without a NIC: each fails
# at library init, with the library's reason), and rerun the NVLink dissection briefly. (The
# pipeline's batch runner dispatches library_baselines points to these harnesses: gicomm.baselines.)
#   native/baselines/device_nic.sh POINTS_DIR
# POINTS_DIR holds nvlink_dissection.points.jsonl and
# <transport>.points.jsonl for nvshmem-ibrc/-ibgda and nccl-gin-gdaki/-proxy. Output under $OUT.
# Never changes clocks; NVLink multicast stays off.
set -uo pipefail
cd "$(dirname "$0")/../.."
source native/baselines/device_build.sh
pts=$1
out=${OUT:-/tmp/gicomm-nic-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
log="$out/logs.txt"
{
  echo "== date"; date -u
  echo "== nvidia-smi -L"; nvidia-smi -L
  echo "== /sys/class/infiniband"; ls -la /sys/class/infiniband 2>&1
  python3 -m pip show nvidia-nvshmem-cu13 nvidia-nccl-cu13 2>/dev/null | grep -E '^(Name|Version)'
} > "$log" 2>&1
nvshmem=$(python3 -c 'import nvidia.nvshmem as m; print(list(m.__path__)[0])' 2>/dev/null)
nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
targets="gicomm-bench-baselines-nvshmem gicomm-bench-baselines-nccl-gin gicomm-bench-nvlink gicomm-bench-nvlink-nvshmem gicomm-bench-nvlink-nccl"
bdir=build/device-nic
t0=$(date +%s)
build_baselines "$bdir" $targets >> "$log" 2>&1
echo "build exit $? after $(( $(date +%s) - t0 )) s" | tee -a "$log"
ls "$bdir/bin" >> "$log" 2>&1
common=(--campaign dev --host dev --platform h200 --run-index 0 --provenance-id dev --nic-backend mlx5)
for t in nvshmem-ibrc nvshmem-ibgda nccl-gin-gdaki nccl-gin-proxy; do
  case $t in nvshmem*) prog=gicomm-bench-baselines-nvshmem ;; *) prog=gicomm-bench-baselines-nccl-gin ;; esac
  echo "== $prog directly, $t" >> "$log"
  timeout 200 "$bdir/bin/$prog" --experiment library_baselines --points "$pts/$t.points.jsonl" \
    --out "$out/direct-$t.jsonl" --warmup 10 --iters 100 "${common[@]}" >> "$log" 2>&1
  echo "$t direct exit $?" | tee -a "$log"
done
echo "== gicomm-bench-nvlink, nvlink_dissection (short)" >> "$log"
timeout 300 "$bdir/bin/gicomm-bench-nvlink" --experiment nvlink_dissection --points "$pts/nvlink_dissection.points.jsonl" \
  --out "$out/nvlink_dissection.jsonl" --warmup 50 --iters 500 --timeout-ms 2000 --campaign dev --host dev \
  --platform h200 --run-index 0 --provenance-id dev >> "$log" 2>&1
echo "nvlink exit $?" | tee -a "$log"
grep -h '\[gicomm\]' "$log" | cut -c1-300 | tail -40
