// gicomm-bench-nvlink-nvshmem: NVSHMEM's P2P (NVLink) transport through the same dissection
// kernels as the direct store (nvlink/dissect.cuh). Two PEs, one per GPU, as forked processes
// joined by the unique-id bootstrap; put = nvshmem_putmem_nbi, p = nvshmem_uint64_p,
// completion = nvshmem_quiet, round trip = nvshmem_putmem_signal_nbi / nvshmem_uint64_p on a flag.
// Built with -rdc=true against libnvshmem_device.a (the library's separate-compilation mode).
#include <nvshmem.h>
#include <nvshmemx.h>
#include <sys/stat.h>

#include <string>

#include "nvlink/dissect.cuh"
#include "nvshmem/path.cuh"

#ifndef GICOMM_NVSHMEM_LIBDIR
#define GICOMM_NVSHMEM_LIBDIR ""
#endif

namespace {

using namespace gicomm::dissect;
using gicomm::nvshmem_path::measure_and_finalize;
namespace gb = gicomm::baselines;

bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

int nvshmem_body(gb::RankContext& ctx) {
  multicast_off();
  // P2P only, a small heap, and the bootstrap plugin next to the library we linked (unless set).
  setenv("NVSHMEM_REMOTE_TRANSPORT", "none", 0);
  setenv("NVSHMEM_SYMMETRIC_SIZE", "268435456", 0);
  const std::string plugin = std::string(GICOMM_NVSHMEM_LIBDIR) + "/nvshmem_bootstrap_uid.so.3";
  if (file_exists(plugin)) setenv("NVSHMEM_BOOTSTRAP_UID_PLUGIN", plugin.c_str(), 0);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2)
    return gb::hardware_missing(ctx, "nvshmem-p2p needs 2 GPUs, found " + std::to_string(n));
  int can = 0;
  check(cudaDeviceCanAccessPeer(&can, ctx.rank, 1 - ctx.rank), "cudaDeviceCanAccessPeer");
  if (!can) return gb::hardware_missing(ctx, "GPUs 0 and 1 cannot access each other's memory (no P2P)");
  check(cudaSetDevice(ctx.rank), "cudaSetDevice");

  nvshmemx_uniqueid_t uid = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (ctx.rank == 0) {
    if (nvshmemx_get_uniqueid(&uid) != 0) throw std::runtime_error("nvshmemx_get_uniqueid failed");
    gb::publish_blob(ctx, "nvshmem_uid", &uid, sizeof(uid));
  } else {
    gb::fetch_blob(ctx, "nvshmem_uid", &uid, sizeof(uid), 60000);
  }
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  if (nvshmemx_set_attr_uniqueid_args(ctx.rank, 2, &uid, &attr) != 0)
    throw std::runtime_error("nvshmemx_set_attr_uniqueid_args failed");
  if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) throw std::runtime_error("nvshmemx_init_attr failed");
  if (nvshmem_n_pes() != 2) throw std::runtime_error("NVSHMEM reports " + std::to_string(nvshmem_n_pes()) + " PEs");
  const int me = nvshmem_my_pe();
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
