// Where registered memory lives and how the engine reaches it.
//
// Host memory: plain loads and stores (the engine runs in the process that owns it). CUDA device
// memory: the CPU of our GPU machines cannot load or store it (no BAR mapping, no GDRCopy), so every
// access is a copy through the CUDA driver API on a non-blocking stream of the owning device, with
// a pinned staging buffer; such copies proceed while the application's kernels spin on the same
// GPU. libcuda.so.1 is opened with RTLD_NOLOAD: a process that has not loaded CUDA has no device
// memory, and a build or a host without CUDA needs nothing of it.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "emu.h"

namespace gicomm::emu {

namespace {

// The few driver API entry points used, declared here so the emulation builds without CUDA.
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUstream = void*;
using CUdeviceptr = unsigned long long;
constexpr int kAttrMemoryType = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttrDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryTypeDevice = 2;  // CU_MEMORYTYPE_DEVICE
constexpr unsigned kStreamNonBlocking = 1; // CU_STREAM_NON_BLOCKING
constexpr unsigned kHostAllocPortable = 1; // CU_MEMHOSTALLOC_PORTABLE

struct Driver {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*pointer_get_attribute)(void*, int, CUdeviceptr) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_synchronize)(CUstream) = nullptr;
  CUresult (*memcpy_htod_async)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*memcpy_dtoh_async)(void*, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*mem_host_alloc)(void**, size_t, unsigned) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  bool ok = false;
};

// Loaded on first use, only if the process already has libcuda.so.1.
const Driver* driver() {
  static std::mutex mu;
  static Driver d;
  std::lock_guard<std::mutex> lock(mu);
  if (d.ok) return &d;
  // Asked again on every classification until found: the application may load CUDA later.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return nullptr;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    return fn != nullptr;
  };
  d.ok = sym(d.init, "cuInit") && sym(d.pointer_get_attribute, "cuPointerGetAttribute") &&
         sym(d.device_get, "cuDeviceGet") && sym(d.primary_ctx_retain, "cuDevicePrimaryCtxRetain") &&
         sym(d.ctx_set_current, "cuCtxSetCurrent") && sym(d.stream_create, "cuStreamCreate") &&
         sym(d.stream_synchronize, "cuStreamSynchronize") && sym(d.memcpy_htod_async, "cuMemcpyHtoDAsync_v2") &&
         sym(d.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2") && sym(d.memcpy_dtod_async, "cuMemcpyDtoDAsync_v2") &&
         sym(d.mem_host_alloc, "cuMemHostAlloc") && sym(d.get_error_string, "cuGetErrorString");
  if (d.ok) d.init(0);
  return d.ok ? &d : nullptr;
}

// Per CUDA device: its primary context, a non-blocking stream and a pinned staging buffer.
struct DeviceChannel {
  bool ready = false;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  uint8_t* staging = nullptr;
};
constexpr size_t kStaging = 4u << 20;

std::mutex g_dev_mu;  // serializes device accesses (and their atomics' read-modify-write)
DeviceChannel g_channels[64];
std::string g_last_error;

bool check(CUresult r, const char* what) {
  if (r == 0) return true;
  const char* s = nullptr;
  if (const Driver* d = driver()) d->get_error_string(r, &s);
  g_last_error = std::string(what) + ": CUresult " + std::to_string(r) + (s ? std::string(" (") + s + ")" : "");
  fail(EIO, "engine", "CUDA copy", g_last_error);
  return false;
}

DeviceChannel* channel(int device) {
  const Driver* d = driver();
  if (d == nullptr || device < 0 || device >= 64) {
    g_last_error = "device memory access without the CUDA driver (device " + std::to_string(device) + ")";
    return nullptr;
  }
  DeviceChannel& c = g_channels[device];
  if (!c.ready) {
    EngineActivity a("creating the CUDA copy channel (context, stream, staging)");
    CUdevice dev = 0;
    if (!check(d->device_get(&dev, device), "cuDeviceGet") || !check(d->primary_ctx_retain(&c.ctx, dev), "cuDevicePrimaryCtxRetain") ||
        !check(d->ctx_set_current(c.ctx), "cuCtxSetCurrent") ||
        !check(d->stream_create(&c.stream, kStreamNonBlocking), "cuStreamCreate"))
      return nullptr;
    void* p = nullptr;
    if (!check(d->mem_host_alloc(&p, kStaging, kHostAllocPortable), "cuMemHostAlloc")) return nullptr;
    c.staging = static_cast<uint8_t*>(p);
    c.ready = true;
  }
  d->ctx_set_current(c.ctx);
  return &c;
}

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// Device -> host, in staging-sized chunks; synchronous with respect to the caller.
void dev_read(void* dst, const void* src, size_t n, int device) {
  EngineActivity a("copying from GPU memory (cuMemcpyDtoHAsync, cuStreamSynchronize)");
  DeviceChannel* c = channel(device);
  if (c == nullptr) {
    std::memset(dst, 0xff, n);
    return;
  }
  const Driver* d = driver();
  for (size_t off = 0; off < n; off += kStaging) {
    const size_t len = std::min(kStaging, n - off);
    if (!check(d->memcpy_dtoh_async(c->staging, dptr(static_cast<const uint8_t*>(src) + off), len, c->stream), "cuMemcpyDtoHAsync") ||
        !check(d->stream_synchronize(c->stream), "cuStreamSynchronize"))
      return;
    std::memcpy(static_cast<uint8_t*>(dst) + off, c->staging, len);
  }
}

// Host -> device, ordered after every earlier copy of this device's stream (a CQE written after
// its payload lands after it).
void dev_write(void* dst, const void* src, size_t n, int device) {
  EngineActivity a("copying to GPU memory (cuMemcpyHtoDAsync, cuStreamSynchronize)");
  DeviceChannel* c = channel(device);
  if (c == nullptr) return;
  const Driver* d = driver();
  for (size_t off = 0; off < n; off += kStaging) {
    const size_t len = std::min(kStaging, n - off);
    std::memcpy(c->staging, static_cast<const uint8_t*>(src) + off, len);
    if (!check(d->memcpy_htod_async(dptr(static_cast<uint8_t*>(dst) + off), c->staging, len, c->stream), "cuMemcpyHtoDAsync") ||
        !check(d->stream_synchronize(c->stream), "cuStreamSynchronize"))
      return;
  }
}

// The lock every CUDA copy of the process takes (one staging buffer per device); an engine
// waiting for it says so.
std::unique_lock<std::mutex> lock_copies() {
  std::unique_lock<std::mutex> lock(g_dev_mu, std::defer_lock);
  EngineActivity waiting("waiting for the GPU copy lock (another thread is copying)");
  lock.lock();
  return lock;
}

}  // namespace

bool classify(const void* p, size_t n, Loc* out, std::string* why) {
  if (p == nullptr) {
    *why = "null address";
    return false;
  }
  if (const Driver* d = driver()) {
    unsigned type = 0;
    if (d->pointer_get_attribute(&type, kAttrMemoryType, dptr(p)) == 0 && type == kMemoryTypeDevice) {
      int ordinal = -1, last_ordinal = -1;
      unsigned last_type = 0;
      const void* last = static_cast<const uint8_t*>(p) + (n ? n - 1 : 0);
      d->pointer_get_attribute(&ordinal, kAttrDeviceOrdinal, dptr(p));
      if (d->pointer_get_attribute(&last_type, kAttrMemoryType, dptr(last)) != 0 || last_type != kMemoryTypeDevice ||
          d->pointer_get_attribute(&last_ordinal, kAttrDeviceOrdinal, dptr(last)) != 0 || last_ordinal != ordinal) {
        *why = "the range starts in device memory of GPU " + std::to_string(ordinal) + " but does not end there";
        return false;
      }
      out->place = Place::device;
      out->device = ordinal;
      // Set up the device's stream and staging buffer now, in the registering thread, rather than
      // in the engine while the application's kernels run.
      std::lock_guard<std::mutex> lock(g_dev_mu);
      if (channel(ordinal) == nullptr) {
        *why = "GPU " + std::to_string(ordinal) + " memory, but no copy channel to it: " + g_last_error;
        return false;
      }
      return true;
    }
  }
  // Host memory: every page of the range must be mapped (msync fails with ENOMEM otherwise).
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n + page - 1) & ~(page - 1);
  if (msync(reinterpret_cast<void*>(start), end - start, MS_ASYNC) != 0) {
    *why = "the range is not mapped in this process (and is not CUDA device memory)";
    return false;
  }
  out->place = Place::host;
  out->device = -1;
  return true;
}

void mem_read(void* dst_host, const void* src, size_t n, Loc src_loc) {
  if (n == 0) return;
  if (!src_loc.is_device()) {
    std::memcpy(dst_host, src, n);
    return;
  }
  auto lock = lock_copies();
  dev_read(dst_host, src, n, src_loc.device);
}

void mem_write(void* dst, const void* src_host, size_t n, Loc dst_loc) {
  if (n == 0) return;
  if (!dst_loc.is_device()) {
    std::memcpy(dst, src_host, n);
    return;
  }
  auto lock = lock_copies();
  dev_write(dst, src_host, n, dst_loc.device);
}

void mem_copy(void* dst, Loc dst_loc, const void* src, Loc src_loc, size_t n) {
  if (n == 0) return;
  if (!dst_loc.is_device() && !src_loc.is_device()) {
    std::memmove(dst, src, n);
    return;
  }
  if (!dst_loc.is_device()) return mem_read(dst, src, n, src_loc);
  if (!src_loc.is_device()) return mem_write(dst, src, n, dst_loc);
  auto lock = lock_copies();
  if (dst_loc.device == src_loc.device) {
    DeviceChannel* c = channel(dst_loc.device);
    if (c == nullptr) return;
    const Driver* d = driver();
    check(d->memcpy_dtod_async(dptr(dst), dptr(src), n, c->stream), "cuMemcpyDtoDAsync") &&
        check(d->stream_synchronize(c->stream), "cuStreamSynchronize");
    return;
  }
  // Between two GPUs: through the host (the engine is not a peer of either).
  std::vector<uint8_t> tmp(std::min(n, kStaging));
  for (size_t off = 0; off < n; off += tmp.size()) {
    const size_t len = std::min(tmp.size(), n - off);
    dev_read(tmp.data(), static_cast<const uint8_t*>(src) + off, len, src_loc.device);
    dev_write(static_cast<uint8_t*>(dst) + off, tmp.data(), len, dst_loc.device);
  }
}

uint64_t mem_atomic(void* p, Loc loc, const softnic::AtomicOp& op) {
  if (!loc.is_device()) {
    // Host memory: plain fetch-add and compare-swap map onto the CPU's atomics; masked forms are a
    // compare-exchange loop (atomic with respect to CPU atomics as well).
    if (op.bytes == 8) {
      auto* w = static_cast<uint64_t*>(p);
      if (!op.compare_swap && op.boundary == 0) return __atomic_fetch_add(w, op.swap_add, __ATOMIC_SEQ_CST);
      uint64_t old = __atomic_load_n(w, __ATOMIC_SEQ_CST);
      while (!__atomic_compare_exchange_n(w, &old, softnic::atomic_result(op, old), false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST)) {
      }
      return old;
    }
    auto* w = static_cast<uint32_t*>(p);
    uint32_t old = __atomic_load_n(w, __ATOMIC_SEQ_CST);
    while (!__atomic_compare_exchange_n(w, &old, static_cast<uint32_t>(softnic::atomic_result(op, old)), false,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return old;
  }
  // Device memory: a read-modify-write under the device lock. NIC atomics are atomic with respect to
  // other NIC atomics only (as on a real HCA); the engine serializes them.
  auto lock = lock_copies();
  uint64_t old = 0;
  dev_read(&old, p, op.bytes, loc.device);
  const uint64_t now = softnic::atomic_result(op, old);
  if (now != old) dev_write(p, &now, op.bytes, loc.device);
  return old;
}

void copy_spans(const std::vector<Span>& dst, const std::vector<Span>& src) {
  size_t di = 0, si = 0;
  uint64_t doff = 0, soff = 0;
  while (di < dst.size() && si < src.size()) {
    const uint64_t n = std::min(dst[di].len - doff, src[si].len - soff);
    if (n > 0) mem_copy(dst[di].ptr + doff, dst[di].loc, src[si].ptr + soff, src[si].loc, n);
    doff += n;
    soff += n;
    if (doff == dst[di].len) ++di, doff = 0;
    if (soff == src[si].len) ++si, soff = 0;
  }
}

uint32_t mem_load32(const uint32_t* p, Loc loc) {
  if (!loc.is_device()) return __atomic_load_n(p, __ATOMIC_ACQUIRE);
  uint32_t v = 0;
  mem_read(&v, p, 4, loc);
  return v;
}

uint64_t mem_load64(const uint64_t* p, Loc loc) {
  if (!loc.is_device()) return __atomic_load_n(p, __ATOMIC_ACQUIRE);
  uint64_t v = 0;
  mem_read(&v, p, 8, loc);
  return v;
}

std::string mem_last_error() {
  auto lock = lock_copies();
  return g_last_error;
}

}  // namespace gicomm::emu
