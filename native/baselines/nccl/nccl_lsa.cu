// gicomm-bench-nvlink-nccl: NCCL's device API, LSA (load/store over NVLink), through the same
// dissection kernels as the direct store (nvlink/dissect.cuh). Two ranks, one per GPU, as forked
// processes joined by ncclGetUniqueId/ncclCommInitRank. The buffer is a symmetric window
// (ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)); every op asks the device API
// for the peer's address (ncclGetLsaPointer) and stores through it; completion is a system-scope
// fence (LSA has no quiet of its own); round trip by a release store of a flag.
#include <nccl.h>
#include <nccl_device.h>

#include <string>

#include "nccl/comm.cuh"
#include "nvlink/dissect.cuh"

#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 28, 0)
#error "the NCCL device API (LSA) needs NCCL >= 2.28"
#endif

namespace {

using namespace gicomm::dissect;
using namespace gicomm::nccl_harness;
namespace gb = gicomm::baselines;

struct LsaPath {
  ncclWindow_t win;
  int peer;  // the peer's rank in the LSA team

  __device__ __forceinline__ uint64_t* remote(size_t off) const {
    return static_cast<uint64_t*>(ncclGetLsaPointer(win, off, peer));
  }
  __device__ __forceinline__ uint64_t* local(size_t off) const {
    return static_cast<uint64_t*>(ncclGetLocalPointer(win, off));
  }
  __device__ __forceinline__ void put(size_t bytes, uint32_t slot) const {
    copy8(remote(kDataOff + slot * kMaxBytes), local(kSrcOff), bytes);
  }
  __device__ __forceinline__ void p(uint64_t v, uint32_t slot) const { st_relaxed_sys(remote(kScratchOff + slot * 8), v); }
  __device__ __forceinline__ void put_signal(size_t bytes, uint64_t seq) const {
    copy8(remote(kDataOff), local(kSrcOff), bytes);
    st_release_sys(remote(kFlagOff), seq);
  }
  __device__ __forceinline__ void p_signal(uint64_t seq) const { st_relaxed_sys(remote(kFlagOff), seq); }
  __device__ __forceinline__ void complete() const { __threadfence_system(); }
  __device__ __forceinline__ const uint64_t* my_flag() const { return local(kFlagOff); }
  __device__ __forceinline__ const uint64_t* my_data() const { return local(kDataOff); }
};

int nccl_body(gb::RankContext& ctx) {
  multicast_off();
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2)
    return gb::hardware_missing(ctx, "nccl-lsa needs 2 GPUs, found " + std::to_string(n));
  int can = 0;
  check(cudaDeviceCanAccessPeer(&can, ctx.rank, 1 - ctx.rank), "cudaDeviceCanAccessPeer");
  if (!can) return gb::hardware_missing(ctx, "GPUs 0 and 1 cannot access each other's memory (no P2P)");
  check(cudaSetDevice(ctx.rank), "cudaSetDevice");

  ncclComm_t comm = init_two_ranks(ctx);
  const ncclTeam_t lsa = ncclTeamLsa(comm);
  if (lsa.nRanks != 2) {
    ncclCommDestroy(comm);
    return gb::hardware_missing(ctx, "NCCL's LSA team has " + std::to_string(lsa.nRanks) +
                                         " rank(s): the two GPUs are not load/store-connected");
  }
  SymmetricWindow w(comm, kRegionBytes);
  ncclDevCommRequirements reqs = {};
  reqs.lsaBarrierCount = 1;
  ncclDevComm devComm;
  // The device communicator is what an LSA kernel normally gets (teams, LSA barriers); the stores
  // measured here need only the window, so a failure is reported and the run goes on.
  const ncclResult_t dev_rc = ncclDevCommCreate(comm, &reqs, &devComm);
  if (dev_rc != ncclSuccess)
    std::fprintf(stderr, "[gicomm] rank %d: ncclDevCommCreate: %s (continuing: LSA stores need only the window)\n",
                 ctx.rank, ncclGetErrorString(dev_rc));
  init_region(w.buf);
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  AllReduceBarrier barrier(comm, stream);
  const int rc = run_rank(ctx, ctx.rank, LsaPath{w.win, 1 - lsa.rank}, w.buf, stream, barrier);
  barrier.release();
  if (dev_rc == ncclSuccess) ncclDevCommDestroy(comm, &devComm);
  w.release_with_comm();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const gicomm::bench::DriverInfo info{"gicomm-bench-nvlink-nccl", "nccl-lsa", "nvlink"};
  return gb::run_baseline_driver(argc, argv, info, {"nccl-lsa"}, 2, metric_names(), nccl_body);
}
