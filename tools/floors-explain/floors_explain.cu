// floors-explain: two measurements that explain gaps between gicomm's transport numbers and the
// physical floors under them (docs/mini-proxy.md and docs/nvlink.md say what they settle).
//
// store: the floor under mini-proxy's tuned enqueue. One GPU thread stores one 16-byte descriptor
//   (st.relaxed.sys.v2.b64, as the tuned enqueue does) into a ring in mapped pinned host memory,
//   the two clock reads around the store alone, operands ready before the first read; one store
//   every `gap_ns`, as the issue benchmark has one outstanding request at a time. Variants: bare,
//   and after an acquire poll of a host word (the enqueue benchmark's previous completion wait,
//   which ends with ld.acquire.sys: LDG.STRONG.SYS + CCTL.IVALL).
// flag: a flag ping-pong between two blocks of one GPU (or, with --peer, between GPU 0 and GPU 1
//   through a peer mapping, as the NVLink direct store does). Variants: p (relaxed system-scope
//   flag store), put_release_sys (8-byte payload, then st.release.sys flag: the direct store's
//   put, a MEMBAR.ALL.SYS before the flag), put_release_gpu (the same with st.release.gpu, enough
//   only within one GPU), ll16 (payload and flag in one 16-byte store, no fence: the receiver reads
//   both in one 16-byte load; it relies on the aligned 16-byte access being seen whole, and a torn
//   one fails the case as a payload mismatch). Every wait is bounded (--timeout-ms); output is one
//   JSON line a case.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nvlink/dissect_kernels.cuh"  // the NVLink dissection's timer and ordered loads/stores

namespace {

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                  \
    }                                                                                \
  } while (0)

using gicomm::dissect::gtimer;
using gicomm::dissect::ld_acquire_sys;

__device__ __forceinline__ void st16_sys(uint64_t* p, uint64_t lo, uint64_t hi) {
  asm volatile("st.relaxed.sys.global.v2.b64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
}
__device__ __forceinline__ void ld16_sys(const uint64_t* p, uint64_t* lo, uint64_t* hi) {
  asm volatile("ld.relaxed.sys.global.v2.b64 {%0, %1}, [%2];" : "=l"(*lo), "=l"(*hi) : "l"(p) : "memory");
}

struct Fail {
  unsigned long long code, index;  // code 1: timed out
};

// ---- store floor ---------------------------------------------------------------------------------
// `salt` makes the descriptor a run-time value: a constant would be materialized (moved into its
// register) between the clock reads.
__global__ void store_kernel(uint64_t* ring, const uint64_t* word, int after_poll, int iters, uint64_t gap_ns,
                             uint64_t salt, uint32_t* cycles, uint64_t* clock_probe) {
  const uint64_t t_start = gtimer();
  const long long c_start = clock64();
  uint64_t sink = 0;
  for (int i = 0; i < iters; ++i) {
    uint64_t* slot = ring + 2 * (i & 1023);
    // (threadIdx.x, 0 here, keeps the values in per-thread registers: uniform ones would be
    // copied into the store's registers between the clock reads.)
    const uint64_t k = static_cast<uint64_t>(i) + threadIdx.x;
    const uint64_t lo = salt ^ k;
    const uint64_t hi = ((k + 1) << 32) | ((salt + threadIdx.x) & 0xffu);
    if (after_poll) sink += ld_acquire_sys(word);
    asm volatile("" ::"l"(slot), "l"(lo), "l"(hi) : "memory");
    const long long c0 = clock64();
    st16_sys(slot, lo, hi);
    const long long c1 = clock64();
    if (c1 == c0) cycles[0] = static_cast<uint32_t>(lo ^ hi ^ reinterpret_cast<uintptr_t>(slot));  // keeps operands live
    cycles[i] = static_cast<uint32_t>(c1 - c0);
    const uint64_t until = gtimer() + gap_ns;
    while (gtimer() < until) {
    }
  }
  clock_probe[0] = gtimer() - t_start;
  clock_probe[1] = static_cast<uint64_t>(clock64() - c_start);
  clock_probe[2] = sink;
}

// ---- flag ping-pong ------------------------------------------------------------------------------
enum Variant : int { kP = 0, kPutSys = 1, kPutGpu = 2, kLL16 = 3 };
const char* const kVariantName[] = {"p", "put_release_sys", "put_release_gpu", "ll16"};

// Region layout (uint64 words): [0] flag, [8..9] ll16 line, [16] payload. `mine` is polled, `peer`
// is written.
__device__ __forceinline__ void send(int v, uint64_t* peer, uint64_t seq) {
  switch (v) {
    case kP:
      gicomm::dissect::st_relaxed_sys(peer, seq);
      break;
    case kPutSys:
      peer[16] = seq ^ 0x5a5aull;
      gicomm::dissect::st_release_sys(peer, seq);
      break;
    case kPutGpu:
      peer[16] = seq ^ 0x5a5aull;
      asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(peer), "l"(seq) : "memory");
      break;
    default:
      st16_sys(peer + 8, seq ^ 0x5a5aull, seq);
  }
}

// true once the flag for `seq` arrived (and its payload is the one sent with it).
__device__ __forceinline__ bool wait(int v, const uint64_t* mine, uint64_t seq, uint64_t deadline, Fail* f,
                                     uint64_t index) {
  for (uint32_t spin = 0;; ++spin) {
    if (v == kLL16) {
      uint64_t lo, hi;
      ld16_sys(mine + 8, &lo, &hi);
      if (hi == seq) return lo == (seq ^ 0x5a5aull) || (f->code = 3, false);
    } else if (ld_acquire_sys(mine) == seq) {
      if (v == kP || mine[16] == (seq ^ 0x5a5aull)) return true;
      f->code = 3;
      return false;
    }
    if ((spin & 63u) == 63u && gtimer() > deadline) {
      f->code = 1;
      f->index = index;
      return false;
    }
  }
}

// Block (or kernel) `role` 0 pings and times, 1 echoes.
__device__ void pingpong(int role, int v, uint64_t* mine, uint64_t* peer, int warmup, int iters, uint64_t timeout_ns,
                         uint64_t* rtt_ns, Fail* f) {
  const uint64_t deadline = gtimer() + timeout_ns;
  for (int i = 0; i < warmup + iters; ++i) {
    const uint64_t seq = static_cast<uint64_t>(i) + 1;
    if (role == 0) {
      const uint64_t t0 = gtimer();
      send(v, peer, seq);
      if (!wait(v, mine, seq, deadline, f, i)) return;
      const uint64_t t1 = gtimer();
      if (i >= warmup) rtt_ns[i - warmup] = t1 - t0;
    } else {
      if (!wait(v, mine, seq, deadline, f, i)) return;
      send(v, peer, seq);
    }
  }
}

__global__ void pingpong_blocks(int v, uint64_t* a, uint64_t* b, int warmup, int iters, uint64_t timeout_ns,
                                uint64_t* rtt_ns, Fail* f) {
  if (threadIdx.x != 0) return;
  const int role = blockIdx.x;
  pingpong(role, v, role == 0 ? a : b, role == 0 ? b : a, warmup, iters, timeout_ns, rtt_ns, f + role);
}

__global__ void pingpong_one(int role, int v, uint64_t* mine, uint64_t* peer, int warmup, int iters,
                             uint64_t timeout_ns, uint64_t* rtt_ns, Fail* f) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  pingpong(role, v, mine, peer, warmup, iters, timeout_ns, rtt_ns, f);
}

// ---- host ----------------------------------------------------------------------------------------
template <class T>
double pct(std::vector<T> v, double q) {
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[static_cast<size_t>(q * (v.size() - 1))]);
}

int run_store(int iters, uint64_t timeout_ns) {
  uint64_t *ring = nullptr, *word = nullptr, *ring_d = nullptr, *word_d = nullptr;
  CHECK(cudaHostAlloc(&ring, 16 * 1024, cudaHostAllocMapped));
  CHECK(cudaHostAlloc(&word, 64, cudaHostAllocMapped));
  std::memset(ring, 0, 16 * 1024);
  std::memset(word, 0, 64);
  CHECK(cudaHostGetDevicePointer(&ring_d, ring, 0));
  CHECK(cudaHostGetDevicePointer(&word_d, word, 0));
  uint32_t* cyc = nullptr;
  uint64_t* probe = nullptr;
  CHECK(cudaMalloc(&cyc, iters * sizeof(uint32_t)));
  CHECK(cudaMalloc(&probe, 3 * sizeof(uint64_t)));
  for (int after_poll = 0; after_poll < 2; ++after_poll) {
    store_kernel<<<1, 1>>>(ring_d, word_d, after_poll, iters, 2500, 0x5a5a000000000007ull, cyc, probe);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<uint32_t> c(iters);
    uint64_t pr[3];
    CHECK(cudaMemcpy(c.data(), cyc, iters * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(pr, probe, sizeof(pr), cudaMemcpyDeviceToHost));
    const double mhz = pr[0] ? double(pr[1]) * 1000.0 / double(pr[0]) : 0.0;
    std::vector<double> ns;
    for (uint32_t x : c) ns.push_back(mhz > 0 ? x * 1000.0 / mhz : 0.0);
    std::printf(
        "{\"case\": \"store16_host\", \"variant\": \"%s\", \"n\": %d, \"sm_clock_mhz\": %.1f, \"p10_ns\": %.1f, "
        "\"p50_ns\": %.1f, \"p90_ns\": %.1f, \"p50_cycles\": %.0f}\n",
        after_poll ? "after_acquire_poll" : "bare", iters, mhz, pct(ns, 0.1), pct(ns, 0.5), pct(ns, 0.9),
        pct(c, 0.5));
  }
  (void)timeout_ns;
  cudaFree(cyc);
  cudaFree(probe);
  cudaFreeHost(ring);
  cudaFreeHost(word);
  return 0;
}

int run_flags(bool peer, int warmup, int iters, uint64_t timeout_ns) {
  int rc = 0;
  const size_t bytes = 4096;
  uint64_t *a = nullptr, *b = nullptr, *rtt = nullptr;
  Fail* f = nullptr;
  CHECK(cudaSetDevice(0));
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&rtt, iters * sizeof(uint64_t)));
  Fail* f_d = nullptr;  // mapped host memory: both GPUs write it, the host reads it after they end
  CHECK(cudaHostAlloc(&f, 2 * sizeof(Fail), cudaHostAllocMapped | cudaHostAllocPortable));
  CHECK(cudaHostGetDevicePointer(&f_d, f, 0));
  cudaStream_t s0, s1;
  CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  if (peer) {
    CHECK(cudaSetDevice(1));
    const cudaError_t e = cudaDeviceEnablePeerAccess(0, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CHECK(e);
    cudaGetLastError();
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaSetDevice(0));
    const cudaError_t e0 = cudaDeviceEnablePeerAccess(1, 0);
    if (e0 != cudaSuccess && e0 != cudaErrorPeerAccessAlreadyEnabled) CHECK(e0);
    cudaGetLastError();
  } else {
    CHECK(cudaMalloc(&b, bytes));
  }
  for (int v = kP; v <= kLL16; ++v) {
    if (peer && v == kPutGpu) continue;  // gpu scope does not order a peer's view: not a valid protocol
    CHECK(cudaSetDevice(0));
    CHECK(cudaMemset(a, 0, bytes));
    if (peer) CHECK(cudaSetDevice(1));
    CHECK(cudaMemset(b, 0, bytes));
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceSynchronize());
    std::memset(f, 0, 2 * sizeof(Fail));
    if (peer) {
      CHECK(cudaSetDevice(1));
      pingpong_one<<<1, 32, 0, s1>>>(1, v, b, a, warmup, iters, timeout_ns, nullptr, f_d + 1);
      CHECK(cudaGetLastError());
      CHECK(cudaSetDevice(0));
      pingpong_one<<<1, 32, 0, s0>>>(0, v, a, b, warmup, iters, timeout_ns, rtt, f_d);
      CHECK(cudaGetLastError());
      CHECK(cudaStreamSynchronize(s0));
      CHECK(cudaSetDevice(1));
      CHECK(cudaStreamSynchronize(s1));
      CHECK(cudaSetDevice(0));
    } else {
      pingpong_blocks<<<2, 32, 0, s0>>>(v, a, b, warmup, iters, timeout_ns, rtt, f_d);
      CHECK(cudaGetLastError());
      CHECK(cudaStreamSynchronize(s0));
    }
    const char* where = peer ? "gpu0-gpu1" : "two blocks of gpu0";
    if (f[0].code || f[1].code) {
      std::printf("{\"case\": \"flag_pingpong\", \"where\": \"%s\", \"variant\": \"%s\", \"failed\": %llu, "
                  "\"at\": %llu}\n",
                  where, kVariantName[v], f[0].code ? f[0].code : f[1].code, f[0].code ? f[0].index : f[1].index);
      rc = 1;
      continue;
    }
    std::vector<uint64_t> r(iters);
    CHECK(cudaMemcpy(r.data(), rtt, iters * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    std::printf(
        "{\"case\": \"flag_pingpong\", \"where\": \"%s\", \"variant\": \"%s\", \"n\": %d, \"p10_ns\": %.0f, "
        "\"p50_ns\": %.0f, \"p90_ns\": %.0f, \"p99_ns\": %.0f}\n",
        where, kVariantName[v], iters, pct(r, 0.1), pct(r, 0.5), pct(r, 0.9), pct(r, 0.99));
  }
  cudaFree(a);
  if (peer) CHECK(cudaSetDevice(1));
  cudaFree(b);
  CHECK(cudaSetDevice(0));
  cudaFree(rtt);
  cudaFreeHost(f);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 2000, warmup = 200;
  uint64_t timeout_ns = 2'000'000'000ull;
  bool peer = false;
  std::string what = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--peer") peer = true;
    else if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--timeout-ms" && i + 1 < argc) timeout_ns = std::strtoull(argv[++i], nullptr, 10) * 1'000'000ull;
    else if (a == "--only" && i + 1 < argc) what = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--only store|flag] [--peer] [--iters N] [--timeout-ms T]\n", argv[0]);
      return 2;
    }
  }
  if (what != "all" && what != "store" && what != "flag") {
    std::fprintf(stderr, "--only %s: store or flag\n", what.c_str());
    return 2;
  }
  if (iters < 10) {
    std::fprintf(stderr, "--iters %d: at least 10\n", iters);
    return 2;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    std::fprintf(stderr, "no CUDA device\n");
    return 3;
  }
  if (peer) {
    int can = 0;
    if (n < 2 || cudaDeviceCanAccessPeer(&can, 0, 1) != cudaSuccess || !can) {
      std::printf("{\"case\": \"flag_pingpong\", \"where\": \"gpu0-gpu1\", \"skipped\": \"%d GPU(s), no peer access\"}\n", n);
      return 0;
    }
  }
  int rc = 0;
  if (what == "all" || what == "store") rc |= run_store(iters, timeout_ns);
  if (what == "all" || what == "flag") rc |= run_flags(peer, warmup, iters, timeout_ns);
  return rc;
}
