# shellcheck shell=bash
# Sourced by the device scripts whose two processes share one GPU with kernels running at once
# (nvshmem-device-check.sh, nic-runs-device.sh): a private MPS daemon, with its own pipe and log
# directories, so it never meets another one on the machine.
#   mps_start LOG  starts it and exports CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY (the
#                  processes started from then on join it); the daemon's output goes to LOG. False
#                  when it did not start (nothing left behind, the variables unset).
#   mps_stop DIR   stops the daemon mps_start started (if any), keeping its log as DIR/mps-log.
mps_dir=""

mps_start() {
  mps_dir=$(mktemp -d /tmp/gicomm-mps.XXXXXX)
  mkdir -p "$mps_dir/pipe" "$mps_dir/log"
  export CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe CUDA_MPS_LOG_DIRECTORY=$mps_dir/log
  nvidia-cuda-mps-control -d > "$1" 2>&1 && return 0
  rm -rf "$mps_dir"
  mps_dir=""
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  return 1
}

mps_stop() {
  [ -n "$mps_dir" ] || return 0
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe nvidia-cuda-mps-control > /dev/null 2>&1
  sleep 1
  cp -r "$mps_dir/log" "$1/mps-log" 2>/dev/null
  rm -rf "$mps_dir"
  mps_dir=""
}
