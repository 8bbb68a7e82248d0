// gicomm-bench-gda: what the driver's translation units share (main.cu defines these; the figure
// experiments of figures.cu use them). Host side of the CUDA build only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/harness.h"
#include "gicomm/gda/session.h"
#include "gicomm/order.cuh"

#define CUDA(x)                                                                                  \
  do {                                                                                           \
    cudaError_t e_ = (x);                                                                        \
    if (e_ != cudaSuccess)                                                                       \
      throw gicomm::bench::PointFailure(std::string(#x) + ": " + cudaGetErrorString(e_));        \
  } while (0)

namespace gicomm::bench_gda {

// Device memory, or mapped pinned host memory (the cpu engine's placement).
struct Buffer {
  void* p = nullptr;
  size_t bytes = 0;
  bool pinned = false;
  // GPU buffers are whole 2 MiB pages, so the mlx5 placement can export them as dmabuf.
  Buffer(bool pinned_, size_t n) : bytes(n), pinned(pinned_) {
    cudaError_t e = pinned ? cudaHostAlloc(&p, n, cudaHostAllocMapped | cudaHostAllocPortable)
                           : cudaMalloc(&p, (n + (size_t(2) << 20) - 1) / (size_t(2) << 20) * (size_t(2) << 20));
    if (e != cudaSuccess) throw bench::PointFailure(std::string("allocation: ") + cudaGetErrorString(e));
    if (pinned) {
      std::memset(p, 0, n);
    } else {
      cudaMemset(p, 0, n);
    }
  }
  ~Buffer() {
    if (pinned) {
      cudaFreeHost(p);
    } else {
      cudaFree(p);
    }
  }
};

struct Target {
  uint64_t dst;  // remote buffer (flags / slots)
  uint32_t rkey;
  uint64_t src;  // local source for pointer payloads (and the bytes of inline payloads > 8 B)
  uint32_t lkey;
};

// The driver's one session (engine running, destination and source registered); env_for keeps it
// while consecutive points ask for the same configuration.
struct Env {
  std::unique_ptr<gda::Session> session;
  std::unique_ptr<Buffer> dst, src;
  Target tg{};
  gda::SessionConfig cfg;
};

constexpr size_t kSrcBytes = 4096 * 8;  // the registered source buffer

Env& env_for(const gda::SessionConfig& cfg, size_t dst_bytes);
// Synchronizes; a kernel error or a reported wait failure drops the session and throws.
void check_kernel(Env& env, const char* what);
std::vector<double> to_ns(const std::vector<long long>& cycles, double mhz);
std::vector<double> to_d(const std::vector<long long>& x);
gda::SessionConfig base_config(const bench::Options& o, uint32_t qps);

// Message rates (Mmsg/s) of `reps` launches of `launch()`, each posting `msgs` messages in all,
// timed with CUDA events around the launch (for runs of many milliseconds: events add 5-7 us);
// the kernel is checked after each launch.
template <class Launch>
std::vector<double> timed_rates(Env& env, int reps, double msgs, const char* what, Launch&& launch) {
  cudaEvent_t e0, e1;
  CUDA(cudaEventCreate(&e0));
  CUDA(cudaEventCreate(&e1));
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0);
    launch();
    cudaEventRecord(e1);
    check_kernel(env, what);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    rates.push_back(msgs / (ms * 1e3));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return rates;
}
order::Variant variant_of(const bench::Point& p);

// gda_one_op (main.cu): issue_cycles, issue_ns, completion_ns, floor_issue_cycles,
// floor_issue_ns, issue_over_floor of one 8-byte op.
std::vector<bench::Record> one_op(const bench::Point& p, const bench::Options& o);

// The figure experiments (figures.cu): Fig. 3, 4, 5 and 10.
std::vector<bench::Record> inline_payload(const bench::Point& p, const bench::Options& o);
std::vector<bench::Record> completion_scope(const bench::Point& p, const bench::Options& o);
std::vector<bench::Record> sm_clock(const bench::Point& p, const bench::Options& o);
std::vector<bench::Record> connection_scaling(const bench::Point& p, const bench::Options& o);

}  // namespace gicomm::bench_gda
