// The NVSHMEM path of the dissection kernels (nvlink/dissect.cuh), shared by the P2P (NVLink)
// harness and the NIC (IBGDA / IBRC) harness: the device calls are the same, only the transport
// NVSHMEM selects at init differs. put = nvshmem_putmem_nbi, p = nvshmem_uint64_p,
// completion = nvshmem_quiet, round trip = nvshmem_putmem_signal_nbi / nvshmem_uint64_p on a flag.
#pragma once

#include <nvshmem.h>
#include <nvshmemx.h>

#include "nvlink/dissect.cuh"

namespace gicomm::nvshmem_path {

using namespace gicomm::dissect;

struct NvshmemPath {
  char* sym;  // the symmetric region (same address on every PE)
  int pe;     // the peer

  __device__ __forceinline__ uint64_t* at(size_t off) const { return reinterpret_cast<uint64_t*>(sym + off); }
  __device__ __forceinline__ void put(size_t bytes, uint32_t slot) const {
    nvshmem_putmem_nbi(sym + kDataOff + slot * kMaxBytes, sym + kSrcOff, bytes, pe);
  }
  __device__ __forceinline__ void p(uint64_t v, uint32_t slot) const { nvshmem_uint64_p(at(kScratchOff + slot * 8), v, pe); }
  __device__ __forceinline__ void put_signal(size_t bytes, uint64_t seq) const {
    nvshmem_putmem_signal_nbi(sym + kDataOff, sym + kSrcOff, bytes, at(kFlagOff), seq, NVSHMEM_SIGNAL_SET, pe);
  }
  __device__ __forceinline__ void p_signal(uint64_t seq) const { nvshmem_uint64_p(at(kFlagOff), seq, pe); }
  __device__ __forceinline__ void complete() const { nvshmem_quiet(); }
  __device__ __forceinline__ const uint64_t* my_flag() const { return at(kFlagOff); }
  __device__ __forceinline__ const uint64_t* my_data() const { return at(kDataOff); }
};

// Both harnesses after init: measure this rank's points on the symmetric region `sym` (two PEs,
// `me` and its peer), then free it and finalize NVSHMEM.
inline int measure_and_finalize(gicomm::baselines::RankContext& ctx, char* sym, int me) {
  init_region(sym);
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const int rc = run_rank(ctx, me, NvshmemPath{sym, 1 - me}, sym, stream, [] { nvshmem_barrier_all(); });
  nvshmem_free(sym);
  nvshmem_finalize();
  return rc;
}

}  // namespace gicomm::nvshmem_path
