// The NVSHMEM path of the dissection kernels (nvlink/dissect.cuh), shared by the P2P (NVLink)
// harness and the NIC (IBGDA / IBRC) harness: the device calls are the same, only the transport
// NVSHMEM selects at init differs. put = nvshmem_putmem_nbi, p = nvshmem_uint64_p,
// completion = nvshmem_quiet, round trip = nvshmem_putmem_signal_nbi / nvshmem_uint64_p on a flag.
#pragma once

#include <nvshmem.h>
#include <nvshmemx.h>
#include <sys/stat.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "nvlink/dissect.cuh"

#ifndef GICOMM_NVSHMEM_LIBDIR
#define GICOMM_NVSHMEM_LIBDIR ""
#endif

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

// Before init: a 256 MiB heap and the UID bootstrap plugin next to the library we linked (each
// unless already set in the environment).
inline void default_env() {
  setenv("NVSHMEM_SYMMETRIC_SIZE", "268435456", 0);
  const std::string plugin = std::string(GICOMM_NVSHMEM_LIBDIR) + "/nvshmem_bootstrap_uid.so.3";
  struct stat st;
  if (stat(plugin.c_str(), &st) == 0) setenv("NVSHMEM_BOOTSTRAP_UID_PLUGIN", plugin.c_str(), 0);
}

// Joins the two ranks (rank 0 makes the unique id, the parent passes it on) and initializes
// NVSHMEM on the current device; `init_hint` is added to an init failure. Returns this PE.
inline int init_two_pes(const gicomm::baselines::RankContext& ctx, const std::string& init_hint) {
  nvshmemx_uniqueid_t uid = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (ctx.rank == 0) {
    if (nvshmemx_get_uniqueid(&uid) != 0) throw std::runtime_error("nvshmemx_get_uniqueid failed");
    gicomm::baselines::publish_blob(ctx, "nvshmem_uid", &uid, sizeof(uid));
  } else {
    gicomm::baselines::fetch_blob(ctx, "nvshmem_uid", &uid, sizeof(uid), 60000);
  }
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  if (nvshmemx_set_attr_uniqueid_args(ctx.rank, 2, &uid, &attr) != 0)
    throw std::runtime_error("nvshmemx_set_attr_uniqueid_args failed");
  if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0)
    throw std::runtime_error("nvshmemx_init_attr failed" + init_hint);
  if (nvshmem_n_pes() != 2) throw std::runtime_error("NVSHMEM reports " + std::to_string(nvshmem_n_pes()) + " PEs");
  return nvshmem_my_pe();
}

// Both harnesses after init: measure this rank's points on the symmetric region `sym` (two PEs,
// `me` and its peer), then free it and finalize NVSHMEM. `watch`: see dissect's run_points.
inline int measure_and_finalize(gicomm::baselines::RankContext& ctx, char* sym, int me,
                                gicomm::baselines::PointWatcher* watch = nullptr) {
  init_region(sym);
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const int rc = run_rank(ctx, me, NvshmemPath{sym, 1 - me}, sym, stream, [] { nvshmem_barrier_all(); }, watch);
  nvshmem_free(sym);
  nvshmem_finalize();
  return rc;
}

}  // namespace gicomm::nvshmem_path
