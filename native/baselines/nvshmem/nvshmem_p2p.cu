// gicomm-bench-nvlink-nvshmem: NVSHMEM's P2P (NVLink) transport through the same dissection
// kernels as the direct store (nvlink/dissect.cuh). Two PEs, one per GPU, as forked processes
// joined by the unique-id bootstrap; put = nvshmem_putmem_nbi, p = nvshmem_uint64_p,
// completion = nvshmem_quiet, round trip = nvshmem_putmem_signal_nbi / nvshmem_uint64_p on a flag.
// Built with -rdc=true against libnvshmem_device.a (the library's separate-compilation mode).
#include <nvshmem.h>
#include <nvshmemx.h>

#include <string>

#include "nvlink/dissect.cuh"
#include "nvshmem/path.cuh"

namespace {

using namespace gicomm::dissect;
using namespace gicomm::nvshmem_path;
namespace gb = gicomm::baselines;

int nvshmem_body(gb::RankContext& ctx) {
  multicast_off();
  // P2P only, a small heap, and the bootstrap plugin next to the library we linked (unless set).
  setenv("NVSHMEM_REMOTE_TRANSPORT", "none", 0);
  default_env();
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2)
    return gb::hardware_missing(ctx, "nvshmem-p2p needs 2 GPUs, found " + std::to_string(n));
  int can = 0;
  check(cudaDeviceCanAccessPeer(&can, ctx.rank, 1 - ctx.rank), "cudaDeviceCanAccessPeer");
  if (!can) return gb::hardware_missing(ctx, "GPUs 0 and 1 cannot access each other's memory (no P2P)");
  check(cudaSetDevice(ctx.rank), "cudaSetDevice");

  const int me = init_two_pes(ctx, "");
  const int peer = 1 - me;
  char* sym = static_cast<char*>(nvshmem_malloc(kRegionBytes));
  if (!sym) throw std::runtime_error("nvshmem_malloc failed");
  if (!nvshmem_ptr(sym, peer)) {
    nvshmem_finalize();
    return gb::hardware_missing(ctx, "NVSHMEM has no P2P (NVLink) mapping to the peer PE");
  }
  return measure_and_finalize(ctx, sym, me);
}

}  // namespace

int main(int argc, char** argv) {
  const gicomm::bench::DriverInfo info{"gicomm-bench-nvlink-nvshmem", "nvshmem-p2p", "nvlink"};
  return gb::run_baseline_driver(argc, argv, info, {"nvshmem-p2p"}, 2, metric_names(), nvshmem_body);
}
