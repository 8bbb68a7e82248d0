// Where the NIC harness's two PEs run, and whether their kernels can run at the same time. Host
// code only (tested on the CPU: test_nvshmem_placement).
//  - Two or more GPUs: one PE per GPU (rank r on GPU r), as on a real two-GPU or two-node host;
//    one PE per node (ranks a launcher started on two nodes): GPU 0 of each node.
//  - One GPU on the emulated NIC: both PEs share GPU 0 (NVSHMEM's "limited" multi-process per GPU,
//    with NVSHMEM_DISABLE_P2P=1 so every operation still takes the NIC transport). Their kernels
//    then run at the same time only under MPS; without it the GPU time-slices the two processes,
//    and every wait on the peer (a round trip, and the emulation's copies into the peer's memory)
//    advances once per time slice (milliseconds). The records say which (params mps, pes_per_gpu).
//  - One GPU on a real NIC: refused. Sharing a GPU changes what is measured, and the library
//    baselines on a NIC compare one PE per GPU.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <string>

namespace gicomm::nvshmem_path {

struct Placement {
  int device = 0;       // this rank's GPU
  int pes_per_gpu = 1;  // 1, or 2 when both PEs share the GPU
  std::string refusal;  // non-empty: the PEs cannot run here, and why
};

// `local_rank` of `local_ranks` PEs on this host (two forked PEs: their ranks of 2; one PE per node
// under a launcher: 0 of 1), with `gpus` GPUs.
inline Placement place_pe(int local_rank, int gpus, bool emulated, const std::string& transport, int local_ranks = 2) {
  if (gpus >= local_ranks && gpus > 0) return {local_rank, 1, ""};
  if (gpus == 1 && emulated) return {0, local_ranks, ""};
  if (gpus >= 1)
    return {0, 0,
            transport + " needs " + std::to_string(local_ranks) + " GPUs (one PE per GPU, talking through the NIC), found " +
                std::to_string(gpus) + "; two PEs share one GPU only on the emulated NIC"};
  return {0, 0, transport + " needs a GPU, found none"};
}

// Whether an MPS control daemon listens where this process's CUDA clients would look for one
// (CUDA_MPS_PIPE_DIRECTORY, else CUDA's default /tmp/nvidia-mps): CUDA then runs them through it.
// The daemon's `control` endpoint is a named pipe or, as the CUDA 13 daemon on our H200s made it,
// a UNIX socket (a pipeline run under a started daemon recorded mps off while it checked FIFOs).
inline bool mps_daemon_present() {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string control = std::string(dir && *dir ? dir : "/tmp/nvidia-mps") + "/control";
  struct stat st;
  return ::stat(control.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

}  // namespace gicomm::nvshmem_path
