#!/usr/bin/env bash
# The emulated rdma-core on a lent GPU machine, in one device-tool call from the repository root:
#   native/emu/tools/device-check.sh
# Builds the emulation and its checks (CMake, sm_90), then runs, each bounded:
#   1. gicomm-mlx5-probe on the system rdma-core (no NIC: exit 3 expected)
#   2. symbol versions of the emulation against the machine's rdma-core (50 on the H200 image)
#   3. gicomm-verbs-suite (the public-API suite) on the emulation, three devices, cross-device
#   4. the DEVX backend and raw PRM commands on the emulation (IB and RoCE), host queues
#   5. mini-proxy's verbs backend end to end on the emulation (CPU producers)
#   6. gicomm-mlx5-probe on the emulation: queues, MR and doorbell mapping in GPU 0's memory
#   7. gicomm-emu-gda-check: mini-gda's mlx5 placement (Session engine "mlx5") on the emulation,
#      GPU threads posting puts with payload checks, error CQE, put+quiet round trip (IB, RoCE)
#   8. gicomm-emu-bench three times: the emulation's per-operation cost beside the softnic's
# Expected: about 4 minutes (build 2-3, checks 1-2); everything stops by DEADLINE_S (default 560).
# $OUT receives summary.txt (one PASS/FAIL line per step), results.jsonl (every JSON line the
# programs printed, tagged with the step) and logs.tar.gz (build and step logs).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/gicomm-emu-out}
logs=$out/logs
mkdir -p "$logs"
summary=$out/summary.txt
: > "$summary"
: > "$out/results.jsonl"
build=${GICOMM_DEVICE_BUILD:-build/emu-device}
bin=$build/bin
fails=0

# step NAME TIMEOUT_S --expect RC command... (tools/device-steps.sh): bounded by DEADLINE_S with
# 15 s kept to pack, logged, PASS/FAIL in summary.txt; step_done counts failures and collects the
# step's JSON lines.
TOTAL_S=${DEADLINE_S:-560} START=$(date +%s) LOGS=$logs SUMMARY=$summary STEP_RESERVE_S=15
source tools/device-steps.sh
step_done() {
  [ "$2" = PASS ] || fails=$((fails + 1))
  [ "$2" = SKIP ] && return
  grep '^{' "$logs/$1.log" | sed "s/^{/{\"step\": \"$1\", /" >> "$out/results.jsonl"
}

{
  echo "== $(date -u +%FT%TZ) host"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv
  dpkg -l 2>/dev/null | grep -E 'ibverbs|rdma-core' | awk '{print $2, $3}'
  ls /sys/class/infiniband 2>&1
} > "$logs/host.log" 2>&1

t0=$(date +%s)
{
  cmake -S native -B "$build" -DGICOMM_CUDA_ARCHS=90 &&
    cmake --build "$build" -j "$(nproc)" --target gicomm_emu gicomm-emu-gda-check gicomm-verbs-suite emu_devx_test \
      gicomm-emu-bench gicomm-mlx5-probe proxy_verbs_test
} > "$logs/build.log" 2>&1
rc=$?
echo "$([ $rc -eq 0 ] && echo PASS || echo FAIL) build: exit $rc in $(( $(date +%s) - t0 )) s" | tee -a "$summary"
if [ $rc -ne 0 ]; then
  tail -40 "$logs/build.log"
  tar -czf "$out/logs.tar.gz" -C "$out" logs
  exit 1
fi

run=$bin/gicomm-emu-run
sysverbs=$(ldconfig -p | awk '$1 == "libibverbs.so.1" {print $NF; exit}')
sysmlx5=$(ldconfig -p | awk '$1 == "libmlx5.so.1" {print $NF; exit}')
step system_probe 30 --expect 3 "$bin/gicomm-mlx5-probe"
step symbol_versions 60 sh native/emu/tests/check_symbol_versions.sh "$build/emu/lib" "$sysverbs" "$sysmlx5"
step verbs_suite 120 env GICOMM_EMU_LOG=quiet "$run" --devices mlx5_0:ib,mlx5_1:roce,mlx5_2:roce "$bin/gicomm-verbs-suite" --cross
step devx_ib 60 env GICOMM_EMU_LOG=quiet "$run" --devices mlx5_0:ib "$bin/emu_devx_test"
step devx_roce 60 env GICOMM_EMU_LOG=quiet "$run" --devices mlx5_0:roce "$bin/emu_devx_test"
step proxy_verbs 60 "$run" --devices mlx5_0:roce "$bin/proxy_verbs_test"
step emulated_probe_gpu 60 "$run" --devices mlx5_0:ib "$bin/gicomm-mlx5-probe"
step gda_mlx5_ib 200 "$run" --devices mlx5_0:ib "$bin/gicomm-emu-gda-check"
step gda_mlx5_roce 200 "$run" --devices mlx5_0:roce "$bin/gicomm-emu-gda-check"
for i in 1 2 3; do
  step "emu_bench_$i" 60 "$run" --devices mlx5_0:roce "$bin/gicomm-emu-bench" --ops 20000 --batch 64
done
echo "$([ $fails -eq 0 ] && echo ALL PASS || echo "$fails FAILED") ($(date -u +%FT%TZ))" | tee -a "$summary"
tar -czf "$out/logs.tar.gz" -C "$out" logs
rm -rf "$logs"
exit $(( fails == 0 ? 0 : 1 ))
