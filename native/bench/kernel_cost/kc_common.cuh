// Shared pieces of the kernel-cost, loaded-RTT and goodput drivers (native/bench/README.md is the
// contract): CUDA error handling that turns into failed points, buffers, the bounded host wait for
// a launch, the in-kernel SM clock stamp, the mini-gda buffer placement per NIC backend, and the
// mini-proxy rig (mapped rings, softnic cpu engine, worker pool).
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
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/ring.h"
#include "gicomm/proxy/softnic_backend.h"
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

// A non-blocking stream, destroyed on every path.
struct Stream {
  Stream() { KC_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t s;
};

// The mini-proxy side of a driver: `nrings` rings of kCapacity descriptors in mapped host memory
// (host views for the workers, device views in `views` for the kernels, per-ring reservation
// counters in `reserve`), and a softnic whose cpu engine executes what a worker pool posts.
// Construct it (rings and softnic), register the payload memory on `nic` (memory that must outlive
// the rig), then start(). Stopped on every path: the pool (if still there), then the engine.
class ProxyRig {
 public:
  static constexpr uint32_t kCapacity = 1024;

  ProxyRig(uint32_t nrings, uint64_t timeout_ns_)
      : slots(size_t(nrings) * kCapacity), counters(nrings), reserve(nrings), views(nrings), host(nrings),
        timeout_ns(timeout_ns_) {
    std::vector<proxy::RingView> dev(nrings);
    for (uint32_t r = 0; r < nrings; ++r) {
      const auto v = proxy::mapped_ring_views(r, kCapacity, slots.p, slots.d, counters.p, counters.d, reserve.p);
      host[r] = v.host;
      dev[r] = v.dev;
    }
    KC_CUDA(cudaMemcpy(views.p, dev.data(), sizeof(proxy::RingView) * nrings, cudaMemcpyHostToDevice));
  }
  ~ProxyRig() {
    if (pool) {
      std::string e;
      pool->stop(nullptr, timeout_ns, &e);
    }
    if (engine) engine->stop();
  }
  ProxyRig(const ProxyRig&) = delete;
  ProxyRig& operator=(const ProxyRig&) = delete;

  // Workers (`workers`, chaining `batch`) post RDMA writes into `remote` (Op::write payloads read
  // from `local`) through the softnic backend; the cpu engine runs `workers` threads.
  void start(const softnic::MemoryRegionHandle& local, const softnic::MemoryRegionHandle& remote, uint32_t workers,
             uint32_t batch) {
    const proxy::SoftnicTarget t = proxy::SoftnicTarget::between(local, remote);
    backend = proxy::make_softnic_backend(nic, t);
    proxy::PoolConfig pc;
    pc.workers = workers;
    pc.batch = batch;
    pc.numa_node = 0;
    pc.stall_timeout_ns = timeout_ns;
    std::string err;
    pool = proxy::WorkerPool::create(pc, host, *backend, nullptr, &err);
    if (!pool) {
      pc.numa_node = -1;  // the pool refuses a NUMA node it cannot see: unpinned workers
      pool = proxy::WorkerPool::create(pc, host, *backend, nullptr, &err);
      if (!pool) throw PointFailure("mini-proxy pool: " + err);
    }
    engine = std::make_unique<softnic::CpuEngine>(nic, static_cast<int>(workers));
    engine->start();
    if (!pool->start(false, &err)) throw PointFailure("mini-proxy pool: " + err);
  }

  // Stops the pool once every ring has drained `expected` tickets (the engine keeps running);
  // false with the reason in `err` otherwise. The pool is gone afterwards either way.
  bool drain(const std::vector<uint64_t>& expected, std::string* err) {
    const bool ok = pool->stop(&expected, timeout_ns, err);
    pool.reset();
    return ok;
  }

  HostBuf<proxy::Desc> slots;
  HostBuf<proxy::RingCounters> counters;
  DevBuf<uint64_t> reserve;
  DevBuf<proxy::RingView> views;
  std::vector<proxy::RingView> host;
  uint64_t timeout_ns;
  softnic::SoftNic nic;
  std::unique_ptr<proxy::Backend> backend;
  std::unique_ptr<proxy::WorkerPool> pool;
  std::unique_ptr<softnic::CpuEngine> engine;
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
