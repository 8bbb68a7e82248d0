// Peer access between two GPUs, both directions (nothing to do for one GPU). Header-only so every
// CUDA user of the softnic (the ceiling measurement, the GPU checks) shares one spelling of it.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace gicomm::softnic {

// False when the two GPUs cannot reach each other's memory; throws on a CUDA failure.
inline bool try_enable_peer_access(int a, int b) {
  if (a == b) return true;
  int saved = 0;
  if (cudaGetDevice(&saved) != cudaSuccess) throw std::runtime_error("cudaGetDevice failed");
  for (auto [from, to] : {std::pair<int, int>{a, b}, std::pair<int, int>{b, a}}) {
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || !can) return false;
    cudaError_t e = cudaSetDevice(from);
    if (e == cudaSuccess) e = cudaDeviceEnablePeerAccess(to, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();
    } else if (e != cudaSuccess) {
      throw std::runtime_error("enable peer access from GPU " + std::to_string(from) + " to GPU " +
                               std::to_string(to) + ": " + cudaGetErrorString(e));
    }
  }
  cudaSetDevice(saved);
  return true;
}

inline void enable_peer_access(int a, int b) {
  if (!try_enable_peer_access(a, b))
    throw std::runtime_error("GPUs " + std::to_string(a) + " and " + std::to_string(b) +
                             " cannot access each other's memory (no P2P)");
}

}  // namespace gicomm::softnic
