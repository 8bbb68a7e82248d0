// What every GPU experiment shares (host side, CUDA runtime): CUDA error checks that fail the point
// with the call and the error, the GPU count, device and mapped host buffers, a stream, the
// bounded host wait for a launch, the SM clock probe, event-timed launches. Never managed memory.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "harness/errors.h"

// Fails the point: "cudaMalloc(&p, n): out of memory".
#define GICOMM_CUDA(call)                                                                              \
  do {                                                                                                 \
    const cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) throw ::gicomm::bench::PointFailure(std::string(#call) + ": " + cudaGetErrorString(e_)); \
  } while (0)

namespace gicomm::bench {

// GPUs visible to this process (0 when CUDA cannot count them).
int gpu_count();
// Exit 3 (HardwareMissing) with "<what>: needs N GPU(s), found M" when fewer are visible.
void require_gpus(int n, const std::string& what);

// Frees device memory at once; while a persistent engine kernel shares the current GPU
// (softnic-gpu-same), only once that engine stopped: cudaFree synchronizes the whole device, which
// would wait for the engine. The transport factory (GdaRig) turns the deferral on after it starts
// such an engine and releases what was deferred after stopping it.
void free_device(void* p);
void defer_device_frees(bool on);
void release_deferred_frees();

// Plain device memory, zeroed.
template <class T>
struct DeviceBuffer {
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n_) : n(n_) {
    GICOMM_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(1, n) * sizeof(T)));
    GICOMM_CUDA(cudaMemset(p, 0, std::max<size_t>(1, n) * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (p) free_device(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::vector<T> read() const {
    std::vector<T> v(n);
    GICOMM_CUDA(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  T* p = nullptr;
  size_t n = 0;
};

// Mapped, portable pinned host memory, zeroed: what the GPU writes while the host reads (rings,
// error reports). `p` is the host address, `d` the device address of the same memory.
template <class T>
struct MappedBuffer {
  explicit MappedBuffer(size_t n_) : n(n_) {
    GICOMM_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&p), std::max<size_t>(1, n) * sizeof(T),
                              cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(static_cast<void*>(p), 0, std::max<size_t>(1, n) * sizeof(T));
    GICOMM_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d), p, 0));
  }
  ~MappedBuffer() { cudaFreeHost(p); }
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  T* p = nullptr;
  T* d = nullptr;
  size_t n;
};

// A non-blocking stream, destroyed on every path.
struct Stream {
  Stream() { GICOMM_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t s;
};

// Bounded host wait for everything queued on `s`. Every GPU wait inside the kernels is bounded by
// --timeout-ms; this bound only catches a GPU that stopped answering, after which nothing can be
// freed safely, so the process ends (exit 1: the runner records the point as failed). `poll_us`:
// the host's sleep between queries. A kernel error fails the point.
void wait_stream(cudaStream_t s, double limit_s, unsigned poll_us);

// The effective SM clock of the current device over a `ns`-long busy kernel (clock64 cycles over
// %globaltimer ns); fails the point on a CUDA error or an empty window.
double measure_sm_clock_mhz(unsigned long long ns);

// Times `reps` runs of `launch()` with CUDA events around each (for runs of many milliseconds:
// events add 5-7 us) and returns the milliseconds of each; `check()` runs after each launch (it
// synchronizes and throws on a kernel or transport error).
template <class Launch, class Check>
std::vector<float> event_timed_ms(int reps, Launch&& launch, Check&& check) {
  cudaEvent_t e0, e1;
  GICOMM_CUDA(cudaEventCreate(&e0));
  GICOMM_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0);
    launch();
    cudaEventRecord(e1);
    check();
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ms;
}

}  // namespace gicomm::bench
