// gicomm-bench-baselines-nccl-gin: NCCL's device API GIN (GPU-initiated networking) through the
// same dissection kernels as the NVLink paths (nvlink/dissect.cuh). Transports:
//   nccl-gin-gdaki  NCCL_GIN_TYPE=3 (GDAKI: the GPU posts to the NIC through DOCA GPUNetIO)
//   nccl-gin-proxy  NCCL_GIN_TYPE=2 (PROXY: the GPU queues requests, a CPU thread posts verbs)
// (NCCL 2.28.9: ncclNetDeviceType NCCL_NET_DEVICE_GIN_PROXY = 2, NCCL_NET_DEVICE_GIN_GDAKI = 3,
// read from the environment variable NCCL_GIN_TYPE; the backend NCCL actually chose is read back
// from the device communicator's ginTypes[0] and must match.)
// Two ranks, one per GPU, as forked processes joined by ncclGetUniqueId/ncclCommInitRank; the
// buffer is a symmetric window (ncclMemAlloc + ncclCommWindowRegister); one GIN context, one
// signal. put = ncclGin::put (window to window), p = ncclGin::putValue (8 bytes), completion =
// ncclGin::flush (the source may be reused; what GIN offers a kernel), round trip = put with a
// SignalAdd remote action (p: a signal alone), waited for by reading the local signal
// (ncclGin::readSignal, acquire). The signal carries the sequence number: each rank adds the
// difference to the last number it sent (kept in a device word), so the peer's signal equals it.
#include <nccl.h>
#include <nccl_device.h>

#include <string>

#include "nccl/comm.cuh"
#include "nvlink/dissect.cuh"

#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 28, 7)
#error "the NCCL device API GIN needs NCCL >= 2.28.7"
#endif

namespace {

using namespace gicomm::dissect;
using namespace gicomm::nccl_harness;
namespace gb = gicomm::baselines;

constexpr ncclGinSignal_t kSignal = 0;

struct GinPath {
  ncclDevComm comm;  // by value: the kernel's copy (ncclGin keeps a reference to it)
  ncclWindow_t win;
  int peer;        // world rank of the peer
  uint64_t* sent;  // this rank's device word: the last sequence number it signalled

  __device__ __forceinline__ uint64_t* local(size_t off) const {
    return static_cast<uint64_t*>(ncclGetLocalPointer(win, off));
  }
  __device__ __forceinline__ uint64_t delta_to(uint64_t seq) const {
    const uint64_t d = seq - *sent;
    *sent = seq;
    return d;
  }
  __device__ __forceinline__ void put(size_t bytes, uint32_t slot) const {
    ncclGin gin(comm, 0);
    gin.put(ncclTeamWorld(comm), peer, win, kDataOff + slot * kMaxBytes, win, kSrcOff, bytes);
  }
  __device__ __forceinline__ void p(uint64_t v, uint32_t slot) const {
    ncclGin gin(comm, 0);
    gin.putValue(ncclTeamWorld(comm), peer, win, kScratchOff + slot * 8, v);
  }
  __device__ __forceinline__ void put_signal(size_t bytes, uint64_t seq) const {
    ncclGin gin(comm, 0);
    gin.put(ncclTeamWorld(comm), peer, win, kDataOff, win, kSrcOff, bytes, ncclGin_SignalAdd{kSignal, delta_to(seq)});
  }
  __device__ __forceinline__ void p_signal(uint64_t seq) const {
    ncclGin gin(comm, 0);
    gin.signal(ncclTeamWorld(comm), peer, ncclGin_SignalAdd{kSignal, delta_to(seq)});
  }
  __device__ __forceinline__ void complete() const {
    ncclGin gin(comm, 0);
    gin.flush(ncclCoopThread{});
  }
  __device__ __forceinline__ uint64_t flag_value() const {
    ncclGin gin(comm, 0);
    return gin.readSignal(kSignal);
  }
  __device__ __forceinline__ const uint64_t* my_data() const { return local(kDataOff); }
};

int gin_body(gb::RankContext& ctx, bool gdaki) {
  multicast_off();
  const char* name = gdaki ? "nccl-gin-gdaki" : "nccl-gin-proxy";
  const int want_type = gdaki ? NCCL_NET_DEVICE_GIN_GDAKI : NCCL_NET_DEVICE_GIN_PROXY;
  setenv("NCCL_GIN_ENABLE", "1", 1);
  setenv("NCCL_GIN_TYPE", std::to_string(want_type).c_str(), 1);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2)
    return gb::hardware_missing(ctx, std::string(name) + " needs 2 GPUs (one rank per GPU), found " + std::to_string(n));
  check(cudaSetDevice(ctx.rank), "cudaSetDevice");

  ncclComm_t comm = init_two_ranks(ctx);
  SymmetricWindow w(comm, kRegionBytes);
  ncclDevCommRequirements reqs = {};
  reqs.ginForceEnable = true;  // the two ranks share a node: without this NCCL would use LSA only
  reqs.ginContextCount = 1;
  reqs.ginSignalCount = 1;
  ncclDevComm devComm;
  nccl_check(ncclDevCommCreate(comm, &reqs, &devComm),
             (std::string("ncclDevCommCreate (GIN, NCCL_GIN_TYPE=") + std::to_string(want_type) + ")").c_str(), comm);
  if (devComm.ginContextCount < 1 || devComm.ginTypes[0] != want_type)
    throw std::runtime_error(std::string(name) + ": NCCL created " + std::to_string(devComm.ginContextCount) +
                             " GIN context(s), the first of type " + std::to_string(devComm.ginTypes[0]) +
                             "; wanted type " + std::to_string(want_type) + " (NCCL_GIN_TYPE)");
  init_region(w.buf);
  uint64_t* sent = nullptr;
  check(cudaMalloc(&sent, sizeof(uint64_t)), "cudaMalloc(sent)");
  check(cudaMemset(sent, 0, sizeof(uint64_t)), "cudaMemset(sent)");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  AllReduceBarrier barrier(comm, stream);
  const int rc = run_rank(ctx, ctx.rank, GinPath{devComm, w.win, 1 - ctx.rank, sent}, w.buf, stream, barrier);
  barrier.release();
  cudaFree(sent);
  ncclDevCommDestroy(comm, &devComm);
  w.release_with_comm();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string transport = gb::first_point_transport(argc, argv, {"nccl-gin-gdaki", "nccl-gin-proxy"});
  const bool gdaki = transport == "nccl-gin-gdaki";
  const gicomm::bench::DriverInfo info{"gicomm-bench-baselines-nccl-gin", transport, "mlx5"};
  return gb::run_baseline_driver(argc, argv, info, {transport}, 2, metric_names(),
                                 [gdaki](gb::RankContext& ctx) { return gin_body(ctx, gdaki); });
}
