// The NVLink dissection's measurement kernels, one set for every path (nvlink/dissect.cuh says
// what a Path is): device helpers, the issue / rate / ping / echo kernels, and the caller kernel
// whose cost to an enclosing kernel is measured.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace gicomm::dissect {

// ---- memory layout of each rank's region (same on both ranks) ------------------------------------
constexpr size_t kSlots = 64;
constexpr size_t kMaxBytes = 64 * 1024;
constexpr size_t kFlagOff = 0;
constexpr size_t kScratchOff = 256;
constexpr size_t kDataOff = 4096;
constexpr size_t kSrcOff = kDataOff + kSlots * kMaxBytes;
constexpr size_t kRegionBytes = kSrcOff + kMaxBytes;
constexpr uint64_t kPattern = 0x5a5a000000000000ull;

enum Op : int { kOpPut = 0, kOpP = 1 };

// Status written by every measurement kernel: 0 ok, 1 wait timed out, 2 payload mismatch.
struct Status {
  unsigned long long code, want, seen, index;
  unsigned long long t_start, t_end, c_start, c_end;
};

// ---- device helpers --------------------------------------------------------------------------------
__device__ __forceinline__ uint64_t gtimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}
__device__ __forceinline__ uint64_t cycles() {
  uint64_t c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return c;
}
__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// One thread copies `bytes` (a multiple of 8) with 8-byte stores.
__device__ __forceinline__ void copy8(uint64_t* dst, const uint64_t* src, size_t bytes) {
  for (size_t k = 0; k < bytes / 8; ++k) dst[k] = src[k];
}

__device__ __forceinline__ void stamp_start(Status* st) {
  st->t_start = gtimer();
  st->c_start = cycles();
}
__device__ __forceinline__ void stamp_end(Status* st) {
  st->c_end = cycles();
  st->t_end = gtimer();
}

// The value of this rank's flag: a path with a flag_value() method (a library whose signal is
// not a plain word, e.g. an NCCL GIN signal) reads it its own way; the others are a word in memory
// read with an acquire load.
template <class Path, class = void>
struct HasFlagValue : std::false_type {};
template <class Path>
struct HasFlagValue<Path, std::void_t<decltype(std::declval<const Path&>().flag_value())>> : std::true_type {};

template <class Path>
__device__ __forceinline__ uint64_t read_flag(const Path& path) {
  if constexpr (HasFlagValue<Path>::value)
    return path.flag_value();
  else
    return ld_acquire_sys(path.my_flag());
}

// Bounded spin: true once the path's flag == want; false (status set) after timeout_ns.
template <class Path>
__device__ __forceinline__ bool wait_flag(const Path& path, uint64_t want, uint64_t timeout_ns, Status* st,
                                          uint64_t index) {
  const uint64_t deadline = gtimer() + timeout_ns;
  for (uint32_t spin = 0;; ++spin) {
    const uint64_t v = read_flag(path);
    if (v == want) return true;
    if ((spin & 63u) == 63u && gtimer() > deadline) {
      st->code = 1;
      st->want = want;
      st->seen = v;
      st->index = index;
      return false;
    }
  }
}

__device__ __forceinline__ bool check_payload(const uint64_t* data, size_t bytes, Status* st) {
  for (size_t k = 0; k < bytes / 8; ++k) {
    if (data[k] != (kPattern | k)) {
      st->code = 2;
      st->want = kPattern | k;
      st->seen = data[k];
      st->index = k;
      return false;
    }
  }
  return true;
}

// ---- measurement kernels (one thread) ------------------------------------------------------------
// out: 4 x iters: issue ns, issue cycles, completion ns, completion cycles.
template <class Path>
__global__ void issue_kernel(Path path, int op, size_t bytes, int warmup, int iters, uint64_t* out, Status* st) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  stamp_start(st);
  for (int i = 0; i < warmup + iters; ++i) {
    const uint32_t slot = static_cast<uint32_t>(i) % kSlots;
    const uint64_t t0 = gtimer();
    const uint64_t c0 = cycles();
    if (op == kOpPut)
      path.put(bytes, slot);
    else
      path.p(kPattern | static_cast<uint64_t>(i), slot);
    const uint64_t c1 = cycles();
    const uint64_t t1 = gtimer();
    path.complete();
    const uint64_t c2 = cycles();
    const uint64_t t2 = gtimer();
    if (i >= warmup) {
      const int j = i - warmup;
      out[j] = t1 - t0;
      out[iters + j] = c1 - c0;
      out[2 * iters + j] = t2 - t0;
      out[3 * iters + j] = c2 - c0;
    }
  }
  stamp_end(st);
}

// out: reps x (ns for `batch` back-to-back ops plus one completion). The first round is warm-up.
template <class Path>
__global__ void rate_kernel(Path path, int op, size_t bytes, int batch, int reps, uint64_t* out, Status* st) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  stamp_start(st);
  for (int r = -1; r < reps; ++r) {
    const uint64_t t0 = gtimer();
    for (int k = 0; k < batch; ++k) {
      const uint32_t slot = static_cast<uint32_t>(k) % kSlots;
      if (op == kOpPut)
        path.put(bytes, slot);
      else
        path.p(kPattern | static_cast<uint64_t>(k), slot);
    }
    path.complete();
    const uint64_t t1 = gtimer();
    if (r >= 0) out[r] = t1 - t0;
  }
  stamp_end(st);
}

// Initiator of the flag round trip: op + signal, then wait for the peer's reply with the same seq.
template <class Path>
__global__ void ping_kernel(Path path, int op, size_t bytes, uint64_t base, int warmup, int iters,
                            uint64_t timeout_ns, uint64_t* out, Status* st) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  stamp_start(st);
  for (int i = 0; i < warmup + iters; ++i) {
    const uint64_t seq = base + static_cast<uint64_t>(i) + 1;
    const uint64_t t0 = gtimer();
    if (op == kOpPut)
      path.put_signal(bytes, seq);
    else
      path.p_signal(seq);
    if (!wait_flag(path, seq, timeout_ns, st, static_cast<uint64_t>(i))) break;
    const uint64_t t1 = gtimer();
    if (i >= warmup) out[i - warmup] = t1 - t0;
  }
  if (st->code == 0 && op == kOpPut) check_payload(path.my_data(), bytes, st);
  stamp_end(st);
}

// Responder: waits for each seq and answers with the same operation.
template <class Path>
__global__ void echo_kernel(Path path, int op, size_t bytes, uint64_t base, int n, uint64_t timeout_ns, Status* st) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  stamp_start(st);
  for (int i = 0; i < n; ++i) {
    const uint64_t seq = base + static_cast<uint64_t>(i) + 1;
    if (!wait_flag(path, seq, timeout_ns, st, static_cast<uint64_t>(i))) break;
    if (op == kOpPut) {
      if (i == n - 1 && !check_payload(path.my_data(), bytes, st)) break;
      path.put_signal(bytes, seq);
    } else {
      path.p_signal(seq);
    }
  }
  stamp_end(st);
}

// ---- cost to the enclosing kernel -----------------------------------------------------------------
// A compute-bound caller with kLive live values per thread. With kComm the path's put+complete is
// compiled in behind a runtime test: trigger -1 never sends (dormant code), -2 makes thread 0 of
// every block send one 8-byte put and wait for its completion after its compute.
constexpr int kLive = 32;
constexpr int kCallerThreads = 256;

template <class Path, bool kComm>
__global__ void caller_kernel(Path path, float* out, int iters, int trigger, Status* st) {
  float v[kLive];
#pragma unroll
  for (int j = 0; j < kLive; ++j) v[j] = static_cast<float>(threadIdx.x + j) * 1e-3f;
  const bool timer = blockIdx.x == 0 && threadIdx.x == 0;
  if (timer) stamp_start(st);
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < kLive; ++j) v[j] = fmaf(v[j], 0.9999f, 1e-4f * static_cast<float>(j));
  }
  if (kComm && threadIdx.x == 0 && (trigger == -2 || static_cast<int>(blockIdx.x) == trigger)) {
    path.put(8, blockIdx.x % kSlots);
    path.complete();
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < kLive; ++j) s += v[j];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (timer) stamp_end(st);
}

}  // namespace gicomm::dissect
