// Shared pieces of the kernel-cost, loaded-RTT and goodput drivers (native/bench/README.md is the
// contract): CUDA error handling that turns into failed points, buffers, the bounded host wait for
// a launch, the in-kernel SM clock stamp, and the mini-gda buffer placement per NIC backend.
//
// Local to this folder on purpose: mini-gda, mini-proxy and the softnic are owned elsewhere; these
// helpers only use their public APIs.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.h"
#include "gicomm/softnic/softnic.h"

namespace gicomm::kc {

using bench::HardwareMissing;
using bench::Options;
using bench::Point;
using bench::PointFailure;
using bench::Record;

#define KC_CUDA(call)                                                                                \
  do {                                                                                               \
    const cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess)                                                                           \
      throw ::gicomm::bench::PointFailure(std::string(#call) + ": " + cudaGetErrorString(e_));      \
  } while (0)

// Exit 3 (HardwareMissing) when fewer than `n` GPUs are visible.
inline int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}
inline void require_gpus(int n, const std::string& why) {
  const int have = gpu_count();
  if (have < n)
    throw HardwareMissing("needs " + std::to_string(n) + " GPU(s) (" + why + "), found " + std::to_string(have));
}

// The NIC backend of a point: its `nic_backend` parameter, else --nic-backend, else the default.
inline std::string nic_backend_of(const Point& p, const Options& o, const std::string& fallback) {
  return p.params.get_string("nic_backend", o.nic_backend.empty() ? fallback : o.nic_backend);
}

// Plain device memory (no managed memory anywhere: see the device notes).
template <class T>
struct DevBuf {
  DevBuf() = default;
  explicit DevBuf(size_t n_) : n(n_) {
    KC_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(1, n) * sizeof(T)));
    KC_CUDA(cudaMemset(p, 0, std::max<size_t>(1, n) * sizeof(T)));
  }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  std::vector<T> read() const {
    std::vector<T> v(n);
    KC_CUDA(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  T* p = nullptr;
  size_t n = 0;
};

// Mapped, portable pinned host memory (rings, error reports the GPU writes while the host reads).
template <class T>
struct HostBuf {
  explicit HostBuf(size_t n_) : n(n_) {
    KC_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&p), std::max<size_t>(1, n) * sizeof(T),
                          cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(static_cast<void*>(p), 0, std::max<size_t>(1, n) * sizeof(T));
    KC_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d), p, 0));
  }
  ~HostBuf() { cudaFreeHost(p); }
  HostBuf(const HostBuf&) = delete;
  HostBuf& operator=(const HostBuf&) = delete;
  T* p = nullptr;  // host address
  T* d = nullptr;  // device address of the same memory
  size_t n;
};

// A buffer where the softnic engine of `nic` can reach it: GPU memory of `device` for the gpu
// engine (peer access), pinned host memory for the cpu engine (host threads cannot touch GPU
// memory). Released with the softnic's own allocator.
struct NicBuf {
  NicBuf(const std::string& nic, int device, size_t bytes_)
      : place(nic == "softnic-gpu" ? softnic::MemoryPlace::gpu(device) : softnic::MemoryPlace::pinned()),
        bytes(bytes_) {
    p = softnic::allocate(place, bytes);
    softnic::fill_bytes(place, p, 0, bytes);
  }
  ~NicBuf() { softnic::release(place, p); }
  NicBuf(const NicBuf&) = delete;
  NicBuf& operator=(const NicBuf&) = delete;
  softnic::MemoryPlace place;
  size_t bytes;
  void* p = nullptr;
};

// Bounded host wait for a launch. Every GPU wait inside the kernels is bounded by --timeout-ms;
// this bound only catches a GPU that stopped answering, after which nothing can be freed safely,
// so the process ends (the pipeline records the point as failed).
inline void wait_stream(cudaStream_t s, double limit_s, const char* program) {
  cudaEvent_t ev;
  KC_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  KC_CUDA(cudaEventRecord(ev, s));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  cudaError_t q;
  while ((q = cudaEventQuery(ev)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "%s: kernel did not finish within %.0f s; aborting\n", program, limit_s);
      std::exit(1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  cudaEventDestroy(ev);
  if (q != cudaSuccess) throw PointFailure(std::string("kernel failed: ") + cudaGetErrorString(q));
}

// SM clock measured in the kernel: clock64 cycles over %globaltimer ns between two stamps taken by
// the same thread (README: records carry sm_clock_mhz).
struct ClockStamp {
  long long c0, c1;
  unsigned long long t0, t1;
};
inline double mhz_of(const ClockStamp& s) {
  const double ns = double(s.t1 - s.t0);
  return ns > 0 ? double(s.c1 - s.c0) * 1000.0 / ns : 0.0;
}

#if defined(__CUDACC__)
__device__ __forceinline__ unsigned long long kc_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void stamp_begin(ClockStamp* s) {
  s->t0 = kc_globaltimer();
  s->c0 = clock64();
}
__device__ __forceinline__ void stamp_end(ClockStamp* s) {
  s->c1 = clock64();
  s->t1 = kc_globaltimer();
}

// One thread spins for `ns` of %globaltimer (bounded by construction) between two stamps.
__global__ void kc_clock_kernel(ClockStamp* s, unsigned long long ns) {
  ClockStamp l;
  stamp_begin(&l);
  while (kc_globaltimer() - l.t0 < ns) {
  }
  stamp_end(&l);
  *s = l;
}

// The SM clock of the current device over a 2 ms spin (for records whose own kernel did not run).
inline double measure_sm_mhz() {
  ClockStamp* d = nullptr;
  KC_CUDA(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(ClockStamp)));
  kc_clock_kernel<<<1, 1>>>(d, 2000000ull);
  ClockStamp h{};
  const cudaError_t e = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
  cudaFree(d);
  if (e != cudaSuccess) throw PointFailure(std::string("clock kernel: ") + cudaGetErrorString(e));
  const double m = mhz_of(h);
  if (m <= 0) throw PointFailure("SM clock measurement failed (zero elapsed globaltimer)");
  return m;
}
#endif

// A scalar as a record (stats of one sample).
inline Record scalar(const std::string& metric, const std::string& unit, double v) {
  return Record::ok(metric, unit, bench::compute_stats({v}));
}
inline Record failed(const std::string& metric, const std::string& unit, const std::string& why) {
  Record r;
  r.metric = metric;
  r.unit = unit;
  r.status = "failed";
  r.error = why;
  return r;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace gicomm::kc
