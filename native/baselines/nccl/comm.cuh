// What the NCCL harnesses (LSA over NVLink, GIN over a NIC) share on the host: errors with NCCL's
// own last message, the two-rank communicator joined through the parent's blob exchange, and a
// barrier of the two ranks by a one-float all-reduce.
#pragma once

#include <nccl.h>

#include <stdexcept>
#include <string>

#include "nvlink/dissect.cuh"

namespace gicomm::nccl_harness {

inline void nccl_check(ncclResult_t r, const char* what, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return;
  std::string text = std::string(what) + ": " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last && *last) text += " (" + std::string(last) + ")";
  throw std::runtime_error(text);
}

// Rank 0 makes the unique id and publishes it; rank 1 fetches it (60 s at most).
inline ncclComm_t init_two_ranks(const gicomm::baselines::RankContext& ctx) {
  ncclUniqueId id;
  if (ctx.rank == 0) {
    nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    gicomm::baselines::publish_blob(ctx, "nccl_uid", &id, sizeof(id));
  } else {
    gicomm::baselines::fetch_blob(ctx, "nccl_uid", &id, sizeof(id), 60000);
  }
  ncclComm_t comm;
  nccl_check(ncclCommInitRank(&comm, 2, id, ctx.rank), "ncclCommInitRank");
  return comm;
}

// A symmetric window of `bytes` on `comm` (ncclMemAlloc + ncclCommWindowRegister).
struct SymmetricWindow {
  ncclComm_t comm;
  void* buf = nullptr;
  ncclWindow_t win{};
  SymmetricWindow(ncclComm_t c, size_t bytes) : comm(c) {
    nccl_check(ncclMemAlloc(&buf, bytes), "ncclMemAlloc", comm);
    nccl_check(ncclCommWindowRegister(comm, buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC), "ncclCommWindowRegister",
               comm);
  }
  // The window, its memory and then the communicator itself (every kernel on them has ended).
  void release_with_comm() {
    ncclCommWindowDeregister(comm, win);
    ncclMemFree(buf);
    ncclCommDestroy(comm);
  }
};

// Both ranks call it between points; waits on `stream`. release() frees its token.
struct AllReduceBarrier {
  ncclComm_t comm;
  cudaStream_t stream;
  float* token = nullptr;
  AllReduceBarrier(ncclComm_t c, cudaStream_t s) : comm(c), stream(s) {
    gicomm::dissect::check(cudaMalloc(&token, sizeof(float)), "cudaMalloc(token)");
  }
  void operator()() const {
    nccl_check(ncclAllReduce(token, token, 1, ncclFloat, ncclSum, comm, stream), "ncclAllReduce(barrier)", comm);
    gicomm::dissect::check(cudaStreamSynchronize(stream), "barrier");
  }
  void release() {
    cudaFree(token);
    token = nullptr;
  }
};

}  // namespace gicomm::nccl_harness
