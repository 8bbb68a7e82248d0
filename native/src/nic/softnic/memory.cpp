// Memory for softnic queues and test buffers: plain aligned host memory always; pinned (mapped,
// portable) host memory and device memory when built with CUDA.
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gicomm/softnic/softnic.h"

#if defined(GICOMM_SOFTNIC_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace gicomm::softnic {

namespace {
#if defined(GICOMM_SOFTNIC_WITH_CUDA)
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("softnic: ") + what + ": " + cudaGetErrorString(e));
}
struct DeviceScope {
  int saved = 0;
  explicit DeviceScope(int dev) {
    check(cudaGetDevice(&saved), "cudaGetDevice");
    check(cudaSetDevice(dev), "cudaSetDevice");
  }
  ~DeviceScope() { cudaSetDevice(saved); }
};
#endif
[[noreturn, maybe_unused]] void no_cuda() { throw std::runtime_error("softnic: pinned/device memory needs a CUDA build"); }
}  // namespace

bool cuda_available() {
#if defined(GICOMM_SOFTNIC_WITH_CUDA)
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

void* allocate(MemoryPlace place, size_t bytes) {
  const size_t rounded = (bytes + 4095) & ~static_cast<size_t>(4095);
  switch (place.kind) {
    case MemoryPlace::Kind::host_aligned: {
      void* p = std::aligned_alloc(4096, rounded);
      if (p == nullptr) throw std::bad_alloc();
      return p;
    }
    case MemoryPlace::Kind::host_pinned: {
#if defined(GICOMM_SOFTNIC_WITH_CUDA)
      void* p = nullptr;
      check(cudaHostAlloc(&p, rounded, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
      return p;
#else
      no_cuda();
#endif
    }
    case MemoryPlace::Kind::device: {
#if defined(GICOMM_SOFTNIC_WITH_CUDA)
      DeviceScope scope(place.device);
      void* p = nullptr;
      check(cudaMalloc(&p, rounded), "cudaMalloc");
      return p;
#else
      no_cuda();
#endif
    }
  }
  return nullptr;
}

void release(MemoryPlace place, void* p) {
  if (p == nullptr) return;
  switch (place.kind) {
    case MemoryPlace::Kind::host_aligned:
      std::free(p);
      return;
    case MemoryPlace::Kind::host_pinned:
#if defined(GICOMM_SOFTNIC_WITH_CUDA)
      cudaFreeHost(p);
#endif
      return;
    case MemoryPlace::Kind::device:
#if defined(GICOMM_SOFTNIC_WITH_CUDA)
    {
      DeviceScope scope(place.device);
      cudaFree(p);
    }
#endif
      return;
  }
}

void fill_bytes(MemoryPlace place, void* p, uint8_t value, size_t bytes) {
  if (place.kind != MemoryPlace::Kind::device) {
    std::memset(p, value, bytes);
    return;
  }
#if defined(GICOMM_SOFTNIC_WITH_CUDA)
  // On the legacy stream, waited for on it: not a device-wide wait, which would wait for a gpu
  // engine running on this GPU.
  DeviceScope scope(place.device);
  check(cudaMemsetAsync(p, value, bytes, cudaStreamLegacy), "cudaMemset");
  check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
#else
  no_cuda();
#endif
}

// A copy between the host and memory in `place` (cudaMemcpy's default direction: the pointers say).
static void copy_with(MemoryPlace place, void* dst, const void* src, size_t bytes) {
  if (place.kind != MemoryPlace::Kind::device) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if defined(GICOMM_SOFTNIC_WITH_CUDA)
  DeviceScope scope(place.device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy");
#else
  no_cuda();
#endif
}

void copy_to(MemoryPlace place, void* dst, const void* src, size_t bytes) { copy_with(place, dst, src, bytes); }
void copy_from(MemoryPlace place, void* dst, const void* src, size_t bytes) { copy_with(place, dst, src, bytes); }

}  // namespace gicomm::softnic
