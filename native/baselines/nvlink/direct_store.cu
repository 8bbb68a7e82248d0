// gicomm-bench-nvlink: the NVLink dissection driver (experiments nvlink_dissection, nvlink_put_size;
// native/bench/README.md contract).
// Serves transport direct-store itself: one GPU thread stores into the peer GPU's memory through a
// CUDA peer mapping (8-byte stores, then a release store of a flag), completion by a system-scope
// fence, round trip by flag. The library paths run in sibling executables built only where their
// headers were found (gicomm-bench-nvlink-nvshmem, gicomm-bench-nvlink-nccl); where one is missing
// its points are recorded as skipped, "not measurable on this host", with the reason.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "nvlink/dissect.cuh"
#include "support/process.h"

namespace {

using namespace gicomm::dissect;
namespace gb = gicomm::baselines;

struct DirectPath {
  uint64_t* peer;   // the peer's region (through the peer mapping)
  uint64_t* local;  // this GPU's region
  int pad;

  __device__ __forceinline__ uint64_t* at(uint64_t* region, size_t off) const {
    return reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(region) + off);
  }
  __device__ __forceinline__ void put(size_t bytes, uint32_t slot) const {
    copy8(at(peer, kDataOff + slot * kMaxBytes), at(local, kSrcOff), bytes);
  }
  __device__ __forceinline__ void p(uint64_t v, uint32_t slot) const { st_relaxed_sys(at(peer, kScratchOff + slot * 8), v); }
  __device__ __forceinline__ void put_signal(size_t bytes, uint64_t seq) const {
    copy8(at(peer, kDataOff), at(local, kSrcOff), bytes);
    st_release_sys(at(peer, kFlagOff), seq);
  }
  __device__ __forceinline__ void p_signal(uint64_t seq) const { st_relaxed_sys(at(peer, kFlagOff), seq); }
  __device__ __forceinline__ void complete() const { __threadfence_system(); }
  __device__ __forceinline__ const uint64_t* my_flag() const { return at(local, kFlagOff); }
  __device__ __forceinline__ const uint64_t* my_data() const { return at(local, kDataOff); }
};

int direct_body(gb::RankContext& ctx) {
  multicast_off();
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2)
    return gb::hardware_missing(ctx, "direct-store needs 2 GPUs, found " + std::to_string(n));
  int can01 = 0, can10 = 0;
  check(cudaDeviceCanAccessPeer(&can01, 0, 1), "cudaDeviceCanAccessPeer");
  check(cudaDeviceCanAccessPeer(&can10, 1, 0), "cudaDeviceCanAccessPeer");
  if (!can01 || !can10) return gb::hardware_missing(ctx, "GPUs 0 and 1 cannot access each other's memory (no P2P)");
  void* region[2] = {nullptr, nullptr};
  cudaStream_t stream[2];
  for (int d = 0; d < 2; ++d) {
    check(cudaSetDevice(d), "cudaSetDevice");
    const cudaError_t e = cudaDeviceEnablePeerAccess(1 - d, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) check(e, "cudaDeviceEnablePeerAccess");
    cudaGetLastError();
    check(cudaMalloc(&region[d], kRegionBytes), "cudaMalloc(region)");
    init_region(region[d]);
    check(cudaStreamCreateWithFlags(&stream[d], cudaStreamNonBlocking), "cudaStreamCreate");
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  Dissector<DirectPath> d0(stream[0]);
  check(cudaSetDevice(1), "cudaSetDevice");
  Dissector<DirectPath> d1(stream[1]);
  Side<DirectPath> init{&d0, DirectPath{static_cast<uint64_t*>(region[1]), static_cast<uint64_t*>(region[0]), 0}, 0,
                        region[0]};
  Side<DirectPath> echo{&d1, DirectPath{static_cast<uint64_t*>(region[0]), static_cast<uint64_t*>(region[1]), 0}, 1,
                        region[1]};
  const int rc = run_points(ctx, &init, &echo, [] {});
  for (int d = 0; d < 2; ++d) {
    cudaSetDevice(d);
    cudaFree(region[d]);
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const gicomm::bench::DriverInfo info{"gicomm-bench-nvlink", "direct-store", "nvlink"};
  const int rc = gb::run_baseline_driver(argc, argv, info, {"direct-store"}, 1, metric_names(), direct_body);
  if (rc != 0) return rc;

  struct Sibling {
    const char* transport;
    const char* program;
    const char* why_missing;
  };
  const Sibling siblings[] = {
      {"nvshmem-p2p", "gicomm-bench-nvlink-nvshmem",
       "gicomm-bench-nvlink-nvshmem was not built: NVSHMEM headers and libraries were not found when native/ was "
       "configured (pip install nvidia-nvshmem-cu13, or set GICOMM_NVSHMEM_ROOT)"},
      {"nccl-lsa", "gicomm-bench-nvlink-nccl",
       "gicomm-bench-nvlink-nccl was not built: NCCL >= 2.28 with the device API (nccl_device.h) was not found when "
       "native/ was configured (pip install nvidia-nccl-cu13, or set GICOMM_NCCL_ROOT)"},
  };
  gb::RankContext ctx;
  ctx.info = info;
  std::string error;
  gicomm::bench::parse_options(argc, argv, &ctx.options, &error);
  const auto all = gicomm::bench::load_points(ctx.options);
  std::vector<std::string> known = {"direct-store"};
  for (const Sibling& s : siblings) {
    known.push_back(s.transport);
    const auto todo = gb::select_points(all, {s.transport}, ctx.options.out_path);
    if (todo.empty()) continue;
    const std::string path = gb::self_dir() + "/" + s.program;
    std::string why;
    std::string status = "failed";
    if (access(path.c_str(), X_OK) != 0) {
      why = std::string("not measurable on this host: ") + s.why_missing;
      status = "skipped";
    } else {
      // The sibling gets our own arguments.
      std::vector<std::string> args{path};
      for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
      const std::string ended = gb::run_child(args, {}, 180.0 + 60.0 * static_cast<double>(todo.size()));
      why = ended.empty() ? std::string(s.program) + " ended without recording this point"
                          : std::string(s.program) + " " + ended;
    }
    for (const auto& p : gb::select_points(all, {s.transport}, ctx.options.out_path))
      gb::write_point(ctx, p, gb::status_records(metric_names(), status, why));
  }
  // Points of a transport nobody serves.
  for (const auto& p : all) {
    const std::string& t = p.transport;
    if (std::find(known.begin(), known.end(), t) != known.end()) continue;
    if (!gb::select_points({p}, {t}, ctx.options.out_path).empty())
      gb::write_point(ctx, p, gb::status_records(metric_names(), "failed",
                                                 "unknown transport '" + t + "' (direct-store | nvshmem-p2p | nccl-lsa)"));
  }
  return 0;
}
