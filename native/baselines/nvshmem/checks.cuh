// NVSHMEM's device API checked over whatever transport NVSHMEM picked, before anything is timed: put
// (8 B .. 128 KiB, every byte and nothing past the end), get, p and g, the atomics, and the fence /
// put-with-signal ordering, between two PEs. Shared by the NIC baseline harness
// (nvshmem/nvshmem_nic.cu: a failed check fails every point with its reason) and the emulation's
// check program (native/emu/nvshmem). Only NVSHMEM's public API; both PEs call run_checks (it is
// collective: it allocates and frees its own symmetric region).
#pragma once

#include <nvshmem.h>
#include <nvshmemx.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "nvlink/dissect_kernels.cuh"

namespace gicomm::nvshmem_checks {

using gicomm::dissect::gtimer;
using gicomm::dissect::ld_acquire_sys;

// ---- layout of the checks' own symmetric region -----------------------------------------------------
constexpr size_t kMaxBytes = 1 << 20;
constexpr size_t kFlagOff = 0;                   // the fence check's flag (8 B)
constexpr size_t kSigOff = 64;                   // signal word of put-with-signal (8 B)
constexpr size_t kWordsOff = 256;                // p/g and atomics targets, each at its own offset below
constexpr size_t kDstOff = 4096;                 // puts land here
constexpr size_t kSrcOff = kDstOff + kMaxBytes;  // what puts send (the pattern)
constexpr size_t kGetOff = kSrcOff + kMaxBytes;  // gets land here
constexpr size_t kRegion = kGetOff + kMaxBytes;
constexpr uint64_t kWaitNs = 10ull * 1000 * 1000 * 1000;  // any single wait in a kernel

__host__ __device__ inline uint8_t pattern_byte(size_t i, uint32_t salt) {
  return static_cast<uint8_t>((i * 131u + salt * 7u + (i >> 8)) & 0xff);
}

// A bounded wait on this PE's own symmetric memory (NVSHMEM's wait_until has no timeout): true once
// `*p == want` (or `*p >= want` with at_least), false after kWaitNs.
__device__ inline bool wait_word(const uint64_t* p, uint64_t want, bool at_least) {
  const uint64_t deadline = gtimer() + kWaitNs;
  for (uint32_t spin = 0;; ++spin) {
    const uint64_t v = ld_acquire_sys(p);
    if (v == want || (at_least && v >= want)) return true;
    if ((spin & 255u) == 255u && gtimer() > deadline) return false;
  }
}

struct Dev {
  char* sym;  // the symmetric region
  int peer;
  __device__ uint64_t* u64(size_t off) const { return reinterpret_cast<uint64_t*>(sym + off); }
  __device__ uint32_t* u32(size_t off) const { return reinterpret_cast<uint32_t*>(sym + off); }
};

// ---- kernels (one thread) ------------------------------------------------------------------------------
__global__ void put_kernel(Dev d, const size_t* sizes, int n, size_t stride) {
  for (int i = 0; i < n; ++i) nvshmem_putmem(d.sym + kDstOff + i * stride, d.sym + kSrcOff, sizes[i], d.peer);
  nvshmem_quiet();
}

__global__ void get_kernel(Dev d, size_t bytes) {
  nvshmem_getmem(d.sym + kGetOff, d.sym + kSrcOff, bytes, d.peer);
  nvshmem_quiet();
}

// p and g: 8- and 4-byte stores into the peer, an 8-byte load from it.
__global__ void pg_kernel(Dev d, uint64_t* g_out) {
  nvshmem_uint64_p(d.u64(kWordsOff + 200), 0x0123456789abcdefull, d.peer);
  nvshmem_int_p(reinterpret_cast<int*>(d.u32(kWordsOff + 208)), 0x13572468, d.peer);
  nvshmem_quiet();
  *g_out = nvshmem_uint64_g(d.u64(kWordsOff + 216), d.peer);
}

// The atomics NVSHMEM offers, 64- and 32-bit, on the peer's words; every fetched value in out[].
__global__ void atomics_kernel(Dev d, uint64_t* out) {
  uint64_t* w = d.u64(kWordsOff);        // starts at 100 (set by the peer)
  uint32_t* v = d.u32(kWordsOff + 256);  // starts at 0x0f0f0f0f
  int k = 0;
  out[k++] = nvshmem_uint64_atomic_fetch_add(w, 5, d.peer);  // 100 -> 105
  nvshmem_uint64_atomic_add(w, 10, d.peer);                  // 115
  out[k++] = nvshmem_uint64_atomic_fetch_inc(w, d.peer);     // 115 -> 116
  nvshmem_uint64_atomic_inc(w, d.peer);                      // 117
  out[k++] = nvshmem_uint64_atomic_compare_swap(w, 117, 500, d.peer);  // hit: 500
  out[k++] = nvshmem_uint64_atomic_compare_swap(w, 1, 7, d.peer);      // miss: stays 500
  out[k++] = nvshmem_uint64_atomic_swap(w, 0xf0f0, d.peer);            // 0xf0f0
  out[k++] = nvshmem_uint64_atomic_fetch_and(w, 0xff00, d.peer);       // 0xf000
  out[k++] = nvshmem_uint64_atomic_fetch_or(w, 0x000f, d.peer);        // 0xf00f
  out[k++] = nvshmem_uint64_atomic_fetch_xor(w, 0x0ff0, d.peer);       // 0xffff
  nvshmem_uint64_atomic_set(w, 0x1234, d.peer);                        // 0x1234
  out[k++] = nvshmem_uint64_atomic_fetch(w, d.peer);                   // 0x1234
  out[k++] = nvshmem_uint32_atomic_fetch_add(v, 0x10, d.peer);         // 0x0f0f0f1f
  out[k++] = nvshmem_uint32_atomic_fetch_xor(v, 0xffff, d.peer);       // 0x0f0ff0e0
  out[k++] = nvshmem_uint32_atomic_fetch_and(v, 0xff00ff00u, d.peer);  // 0x0f00f000
  out[k++] = nvshmem_uint32_atomic_fetch_or(v, 0x3, d.peer);           // 0x0f00f003
  out[k++] = nvshmem_uint32_atomic_compare_swap(v, 0x0f00f003u, 42, d.peer);  // hit: 42
  out[k++] = nvshmem_uint32_atomic_swap(v, 77, d.peer);                       // 77
  out[k++] = nvshmem_uint32_atomic_fetch_inc(v, d.peer);                      // 78
  out[k++] = nvshmem_uint32_atomic_fetch(v, d.peer);                          // 78
  nvshmem_quiet();
  out[63] = static_cast<uint64_t>(k);
}

// IBRC without GDRCopy (our GPU machines have none) offers only the 64-bit add and the signal
// operations as NIC atomics; NVSHMEM exits on the others ("RMA/AMO verb not implemented").
__global__ void atomics_kernel_ibrc(Dev d, uint64_t* out) {
  nvshmem_uint64_atomic_add(d.u64(kWordsOff), 5, d.peer);   // 100 -> 105
  nvshmem_uint64_atomic_add(d.u64(kWordsOff), 10, d.peer);  // 115
  nvshmem_quiet();
  out[63] = 0;
}

// Ordering: data, fence, flag; then put-with-signal. The peer checks both in order.
__global__ void fence_sender(Dev d, size_t bytes) {
  nvshmem_putmem(d.sym + kDstOff, d.sym + kSrcOff, bytes, d.peer);
  nvshmem_fence();
  nvshmem_uint64_p(d.u64(kFlagOff), 1, d.peer);
  nvshmem_putmem_signal(d.sym + kDstOff + kMaxBytes / 2, d.sym + kSrcOff, bytes, d.u64(kSigOff), 7, NVSHMEM_SIGNAL_SET,
                        d.peer);
  nvshmem_putmem_signal(d.sym + kDstOff + kMaxBytes / 2, d.sym + kSrcOff, 8, d.u64(kSigOff), 3, NVSHMEM_SIGNAL_ADD,
                        d.peer);
  nvshmem_quiet();
}

// out: [0] 0 ok / 1 flag timeout / 2 data before flag wrong / 3 signal timeout / 4 data before
// signal wrong / 5 signal-add timeout; [1] index of the first bad byte.
__global__ void fence_receiver(Dev d, size_t bytes, uint32_t salt, uint64_t* out) {
  out[0] = 0;
  if (!wait_word(d.u64(kFlagOff), 1, false)) {
    out[0] = 1;
    return;
  }
  const volatile uint8_t* data = reinterpret_cast<const volatile uint8_t*>(d.sym + kDstOff);
  for (size_t i = 0; i < bytes; ++i)
    if (data[i] != pattern_byte(i, salt)) {
      out[0] = 2;
      out[1] = i;
      return;
    }
  if (!wait_word(d.u64(kSigOff), 7, true)) {  // 7 after the set, 10 once the add came too
    out[0] = 3;
    return;
  }
  data = reinterpret_cast<const volatile uint8_t*>(d.sym + kDstOff + kMaxBytes / 2);
  for (size_t i = 0; i < bytes; ++i)
    if (data[i] != pattern_byte(i, salt)) {
      out[0] = 4;
      out[1] = i;
      return;
    }
  if (!wait_word(d.u64(kSigOff), 10, false)) out[0] = 5;
}

__global__ void peer_word_kernel(Dev d, size_t off, uint64_t* out) { *out = nvshmem_uint64_g(d.u64(off), d.peer); }

// ---- host side -------------------------------------------------------------------------------------------
struct Check {
  std::string name;
  bool ok;
  std::string detail;  // why it failed ("" when ok)
};

inline void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

inline int failed_count(const std::vector<Check>& checks) {
  return static_cast<int>(std::count_if(checks.begin(), checks.end(), [](const Check& c) { return !c.ok; }));
}

// "name: detail; name: detail" of the failed checks.
inline std::string failures_text(const std::vector<Check>& checks) {
  std::string out;
  for (const Check& c : checks)
    if (!c.ok) out += (out.empty() ? "" : "; ") + c.name + (c.detail.empty() ? "" : ": " + c.detail);
  return out;
}

// Runs every check between this PE (`me`, 0 initiates, 1 checks what arrived) and its peer, on the
// current device, and returns this PE's checks. `ibrc`: only the atomics NVSHMEM's IBRC offers
// without GDRCopy. Collective: both PEs call it; it calls nvshmem_barrier_all.
inline std::vector<Check> run_checks(int me, bool ibrc) {
  std::vector<Check> checks;
  auto report = [&](bool ok, const std::string& name, const std::string& detail) {
    checks.push_back({name, ok, ok ? "" : detail});
  };
  char* sym = static_cast<char*>(nvshmem_malloc(kRegion));
  if (sym == nullptr) throw std::runtime_error("nvshmem_malloc of the checks' region failed");
  report(nvshmem_ptr(sym, 1 - me) == nullptr, "peer_heap_not_mapped",
         "NVSHMEM mapped the peer's heap: operations would bypass the NIC");
  const Dev d{sym, 1 - me};
  const uint32_t salt = 0x5a;
  std::vector<uint8_t> pat(kMaxBytes);
  for (size_t i = 0; i < pat.size(); ++i) pat[i] = pattern_byte(i, salt);
  cuda_ok(cudaMemset(sym, 0, kRegion), "cudaMemset(region)");
  cuda_ok(cudaMemcpy(sym + kSrcOff, pat.data(), kMaxBytes, cudaMemcpyHostToDevice), "cudaMemcpy(src)");
  const uint64_t w0 = 100;
  const uint32_t v0 = 0x0f0f0f0f;
  const uint64_t g0 = 0xfedcba9876543210ull;
  cuda_ok(cudaMemcpy(sym + kWordsOff, &w0, 8, cudaMemcpyHostToDevice), "cudaMemcpy(w)");
  cuda_ok(cudaMemcpy(sym + kWordsOff + 256, &v0, 4, cudaMemcpyHostToDevice), "cudaMemcpy(v)");
  cuda_ok(cudaMemcpy(sym + kWordsOff + 216, &g0, 8, cudaMemcpyHostToDevice), "cudaMemcpy(g)");
  uint64_t* dout = nullptr;
  size_t* dsizes = nullptr;
  cuda_ok(cudaMalloc(&dout, 64 * sizeof(uint64_t)), "cudaMalloc(out)");
  cuda_ok(cudaMalloc(&dsizes, 8 * sizeof(size_t)), "cudaMalloc(sizes)");
  cuda_ok(cudaMemset(dout, 0, 64 * sizeof(uint64_t)), "cudaMemset(out)");
  cuda_ok(cudaDeviceSynchronize(), "init");
  nvshmem_barrier_all();

  // put: 8 B .. 1/8 MiB each into its own slot of the peer.
  const std::vector<size_t> put_sizes = {8, 64, 1000, 4096, 65536, 131072};
  const size_t stride = 131072;
  if (me == 0) {
    cuda_ok(cudaMemcpy(dsizes, put_sizes.data(), put_sizes.size() * sizeof(size_t), cudaMemcpyHostToDevice), "sizes");
    put_kernel<<<1, 1>>>(d, dsizes, static_cast<int>(put_sizes.size()), stride);
    cuda_ok(cudaDeviceSynchronize(), "put_kernel");
  }
  nvshmem_barrier_all();
  if (me == 1) {
    std::vector<uint8_t> got(put_sizes.size() * stride);
    cuda_ok(cudaMemcpy(got.data(), sym + kDstOff, got.size(), cudaMemcpyDeviceToHost), "read dst");
    for (size_t i = 0; i < put_sizes.size(); ++i) {
      size_t bad = SIZE_MAX;
      for (size_t b = 0; b < put_sizes[i] && bad == SIZE_MAX; ++b)
        if (got[i * stride + b] != pat[b]) bad = b;
      const bool beyond_clean = put_sizes[i] == stride || got[i * stride + put_sizes[i]] == 0;
      report(bad == SIZE_MAX && beyond_clean, "putmem_" + std::to_string(put_sizes[i]),
             bad == SIZE_MAX ? "a byte past the end was written" : "first bad byte " + std::to_string(bad));
    }
  }
  nvshmem_barrier_all();

  // get: 64 KiB of the peer's source into our get buffer.
  if (me == 0) {
    get_kernel<<<1, 1>>>(d, 65536);
    cuda_ok(cudaDeviceSynchronize(), "get_kernel");
    std::vector<uint8_t> got(65536);
    cuda_ok(cudaMemcpy(got.data(), sym + kGetOff, got.size(), cudaMemcpyDeviceToHost), "read get");
    const auto bad = std::mismatch(got.begin(), got.end(), pat.begin()).first;
    report(bad == got.end(), "getmem_65536", "first bad byte " + std::to_string(bad - got.begin()));
  }
  nvshmem_barrier_all();

  // p (8 and 4 bytes) and g.
  if (me == 0) {
    pg_kernel<<<1, 1>>>(d, dout);
    cuda_ok(cudaDeviceSynchronize(), "pg_kernel");
    uint64_t g = 0;
    cuda_ok(cudaMemcpy(&g, dout, 8, cudaMemcpyDeviceToHost), "read g");
    report(g == g0, "uint64_g", "got " + std::to_string(g) + ", expected " + std::to_string(g0));
  }
  nvshmem_barrier_all();
  if (me == 1) {
    uint64_t p8 = 0;
    uint32_t p4 = 0;
    cuda_ok(cudaMemcpy(&p8, sym + kWordsOff + 200, 8, cudaMemcpyDeviceToHost), "read p8");
    cuda_ok(cudaMemcpy(&p4, sym + kWordsOff + 208, 4, cudaMemcpyDeviceToHost), "read p4");
    report(p8 == 0x0123456789abcdefull, "uint64_p", "found " + std::to_string(p8));
    report(p4 == 0x13572468u, "int_p", "found " + std::to_string(p4));
  }
  nvshmem_barrier_all();

  // atomics
  if (me == 0 && ibrc) {
    atomics_kernel_ibrc<<<1, 1>>>(d, dout);
    cuda_ok(cudaDeviceSynchronize(), "atomics_kernel_ibrc");
  } else if (me == 0) {
    atomics_kernel<<<1, 1>>>(d, dout);
    cuda_ok(cudaDeviceSynchronize(), "atomics_kernel");
    uint64_t out[64] = {};
    cuda_ok(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost), "read atomics");
    struct Want {
      const char* name;
      uint64_t value;
    };
    const Want want[] = {{"uint64_atomic_fetch_add", 100},         {"uint64_atomic_fetch_inc", 115},
                         {"uint64_atomic_compare_swap_hit", 117},  {"uint64_atomic_compare_swap_miss", 500},
                         {"uint64_atomic_swap", 500},              {"uint64_atomic_fetch_and", 0xf0f0},
                         {"uint64_atomic_fetch_or", 0xf000},       {"uint64_atomic_fetch_xor", 0xf00f},
                         {"uint64_atomic_fetch", 0x1234},          {"uint32_atomic_fetch_add", 0x0f0f0f0f},
                         {"uint32_atomic_fetch_xor", 0x0f0f0f1f},  {"uint32_atomic_fetch_and", 0x0f0ff0e0},
                         {"uint32_atomic_fetch_or", 0x0f00f000},   {"uint32_atomic_compare_swap_hit", 0x0f00f003},
                         {"uint32_atomic_swap", 42},               {"uint32_atomic_fetch_inc", 77},
                         {"uint32_atomic_fetch", 78}};
    const size_t n = sizeof want / sizeof want[0];
    report(out[63] == n, "atomics_count", std::to_string(out[63]) + " fetched values, expected " + std::to_string(n));
    for (size_t i = 0; i < n; ++i) {
      char detail[96];
      std::snprintf(detail, sizeof detail, "fetched 0x%" PRIx64 ", expected 0x%" PRIx64, out[i], want[i].value);
      report(out[i] == want[i].value, want[i].name, detail);
    }
  }
  nvshmem_barrier_all();
  if (me == 1) {
    uint64_t w = 0;
    uint32_t v = 0;
    cuda_ok(cudaMemcpy(&w, sym + kWordsOff, 8, cudaMemcpyDeviceToHost), "read w");
    cuda_ok(cudaMemcpy(&v, sym + kWordsOff + 256, 4, cudaMemcpyDeviceToHost), "read v");
    const uint64_t want_w = ibrc ? 115 : 0x1234;
    const uint32_t want_v = ibrc ? v0 : 78;
    report(w == want_w, ibrc ? "uint64_atomic_add_final" : "atomics_final_uint64",
           "found " + std::to_string(w) + ", expected " + std::to_string(want_w));
    report(v == want_v, ibrc ? "uint32_untouched" : "atomics_final_uint32",
           "found " + std::to_string(v) + ", expected " + std::to_string(want_v));
  }
  nvshmem_barrier_all();

  // fence and put-with-signal: both PEs' kernels run at the same time.
  cuda_ok(cudaMemset(sym + kDstOff, 0, kMaxBytes), "clear dst");
  cuda_ok(cudaMemset(sym, 0, 256), "clear flags");
  cuda_ok(cudaDeviceSynchronize(), "clear");
  nvshmem_barrier_all();
  const size_t fence_bytes = 32768;
  if (me == 1)
    fence_receiver<<<1, 1>>>(d, fence_bytes, salt, dout);
  else
    fence_sender<<<1, 1>>>(d, fence_bytes);
  cuda_ok(cudaDeviceSynchronize(), me == 1 ? "fence_receiver" : "fence_sender");
  if (me == 1) {
    uint64_t out[2] = {};
    cuda_ok(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost), "read fence");
    static const char* what[] = {"", "the flag never came", "data wrong when the flag came (fence broken)",
                                 "the signal never came", "data wrong when the signal came", "the signal add never came"};
    report(out[0] == 0, "fence_then_flag_and_putmem_signal",
           std::string(what[std::min<uint64_t>(out[0], 5)]) + " (byte " + std::to_string(out[1]) + ")");
  }
  nvshmem_barrier_all();
  cudaFree(dout);
  cudaFree(dsizes);
  nvshmem_free(sym);
  return checks;
}

// Both PEs learn the sum of their failed checks (so both measure, or neither does): each writes
// its count into a symmetric word and reads the peer's with nvshmem_uint64_g. Collective.
inline int failures_of_both(int me, int mine) {
  uint64_t* word = static_cast<uint64_t*>(nvshmem_malloc(sizeof(uint64_t)));
  if (word == nullptr) throw std::runtime_error("nvshmem_malloc of the failure count failed");
  const uint64_t v = static_cast<uint64_t>(mine);
  uint64_t* dout = nullptr;
  cuda_ok(cudaMalloc(&dout, 8), "cudaMalloc");
  cuda_ok(cudaMemcpy(word, &v, 8, cudaMemcpyHostToDevice), "write failures");
  nvshmem_barrier_all();
  peer_word_kernel<<<1, 1>>>(Dev{reinterpret_cast<char*>(word), 1 - me}, 0, dout);
  cuda_ok(cudaDeviceSynchronize(), "peer_word_kernel");
  uint64_t theirs = 0;
  cuda_ok(cudaMemcpy(&theirs, dout, 8, cudaMemcpyDeviceToHost), "read failures");
  cudaFree(dout);
  nvshmem_barrier_all();
  nvshmem_free(word);
  return mine + static_cast<int>(theirs);
}

}  // namespace gicomm::nvshmem_checks
