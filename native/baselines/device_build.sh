# Sourced by the baselines' device scripts (device_nvlink.sh, device_nic.sh): configure the native
# tree for the H200 (sm_90) with the pip packages' NVSHMEM and NCCL, and build only the targets named.
# Uses $nvshmem and $nccl (the pip packages' folders).
#   build_baselines BUILD_DIR TARGET...    (from the repository root)
build_baselines() {
  local bdir=$1
  shift
  cmake -S native -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DGICOMM_CUDA_ARCHS=90 \
    -DGICOMM_NVSHMEM_ROOT="$nvshmem" -DGICOMM_NCCL_ROOT="$nccl" &&
    cmake --build "$bdir" -j 16 --target "$@"
}
