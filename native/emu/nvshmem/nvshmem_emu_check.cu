// gicomm-emu-nvshmem: NVSHMEM's device API over its NIC transports (IBGDA, or IBRC through its CPU
// proxy), two PEs in two processes, with payload checks, then the latencies of the paper's Table 3
// (issue, put+completion, round trip). Only NVSHMEM's public API is used. Meant to run over
// gicomm's emulated rdma-core (see docs/nvshmem-on-emulated-nic.md), where every number is an
// emulated number and says so (rdma_provider: emulated); on a ConnectX node the same binary runs
// on the system's rdma-core and the records say that instead.
//
//   gicomm-emu-nvshmem --transport ibgda|ibrc [--gpus 1|2] [--out FILE] [--iters N] [--warmup N]
//                      [--sizes 8,4096,65536] [--timeout-s S] [--skip-metrics] [--param KEY=VALUE]...
//                      [--campaign C] [--host H] [--platform P] [--run-index I] [--provenance-id ID]
// (--param adds a string parameter to every record, e.g. mps=on.)
//
// The process forks into the two PEs before CUDA or NVSHMEM start (rank 0 makes NVSHMEM's unique
// id and hands it to rank 1 through a pipe). With --gpus 1 both PEs share GPU 0 (NVSHMEM's
// "limited MPG"; concurrent kernels of the two processes then need MPS or are time-sliced), with 2
// each has its own. NVSHMEM_DISABLE_P2P=1 keeps the PEs off NVLink and host memory sharing, so
// every operation goes through the NIC transport; the program checks that the peer's heap is not
// mapped. Environment it sets when not set: NVSHMEM_DISABLE_P2P=1, NVSHMEM_IB_ENABLE_IBGDA,
// NVSHMEM_REMOTE_TRANSPORT (none for ibgda, ibrc for ibrc), NVSHMEM_BOOTSTRAP_UID_PLUGIN, a 256 MiB
// heap, NVLink multicast off.
//
// Output: one "CHECK <name> PASS|FAIL <detail>" line per check on stdout, "METRIC" lines, and with
// --out the records (JSON lines, the project's record shape, schema_version 2). Exit 0 when every
// check passed, 1 when one failed, 2 for bad arguments, 3 when NVSHMEM did not initialize, 4 on a
// timeout (a PE that does not finish in --timeout-s is killed).
#include <nvshmem.h>
#include <nvshmemx.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

#include "gicomm/mlx5dev/devx.h"

#ifndef GICOMM_NVSHMEM_LIBDIR
#define GICOMM_NVSHMEM_LIBDIR ""
#endif

namespace {

// ---- layout of each PE's symmetric region ----------------------------------------------------------
constexpr size_t kMaxBytes = 1 << 20;
constexpr size_t kFlagOff = 0;            // round-trip flag (8 B)
constexpr size_t kSigOff = 64;            // signal word of put-with-signal (8 B)
constexpr size_t kWordsOff = 256;         // p/g and atomics targets, each at its own offset below
constexpr size_t kDstOff = 4096;          // puts land here
constexpr size_t kSrcOff = kDstOff + kMaxBytes;   // what puts send (the pattern)
constexpr size_t kGetOff = kSrcOff + kMaxBytes;   // gets land here
constexpr size_t kRegion = kGetOff + kMaxBytes;
constexpr uint64_t kTimeoutNs = 10ull * 1000 * 1000 * 1000;  // any single wait in a kernel

__host__ __device__ inline uint8_t pattern_byte(size_t i, uint32_t salt) {
  return static_cast<uint8_t>((i * 131u + salt * 7u + (i >> 8)) & 0xff);
}

__device__ inline uint64_t gtimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}
__device__ inline uint64_t cycles() {
  uint64_t c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return c;
}
__device__ inline uint64_t ld_acquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// A bounded wait for `*p == want` on this PE's own symmetric memory (NVSHMEM's wait_until has no
// timeout). False on timeout.
__device__ inline bool wait_eq(const uint64_t* p, uint64_t want) {
  const uint64_t deadline = gtimer() + kTimeoutNs;
  for (uint32_t spin = 0;; ++spin) {
    if (ld_acquire(p) == want) return true;
    if ((spin & 255u) == 255u && gtimer() > deadline) return false;
  }
}
// The same for a value that only grows: true once `*p >= want`.
__device__ inline bool wait_ge(const uint64_t* p, uint64_t want) {
  const uint64_t deadline = gtimer() + kTimeoutNs;
  for (uint32_t spin = 0;; ++spin) {
    if (ld_acquire(p) >= want) return true;
    if ((spin & 255u) == 255u && gtimer() > deadline) return false;
  }
}

struct Dev {
  char* sym;  // the symmetric region
  int peer;
  __device__ uint64_t* u64(size_t off) const { return reinterpret_cast<uint64_t*>(sym + off); }
  __device__ uint32_t* u32(size_t off) const { return reinterpret_cast<uint32_t*>(sym + off); }
};

// ---- correctness kernels (one thread) ----------------------------------------------------------------
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
  uint64_t* w = d.u64(kWordsOff);       // starts at 100 (set by the peer)
  uint32_t* v = d.u32(kWordsOff + 256);  // starts at 0x0f0f0f0f
  int k = 0;
  out[k++] = nvshmem_uint64_atomic_fetch_add(w, 5, d.peer);           // 100 -> 105
  nvshmem_uint64_atomic_add(w, 10, d.peer);                           // 115
  out[k++] = nvshmem_uint64_atomic_fetch_inc(w, d.peer);               // 115 -> 116
  nvshmem_uint64_atomic_inc(w, d.peer);                               // 117
  out[k++] = nvshmem_uint64_atomic_compare_swap(w, 117, 500, d.peer);  // hit: 500
  out[k++] = nvshmem_uint64_atomic_compare_swap(w, 1, 7, d.peer);      // miss: stays 500
  out[k++] = nvshmem_uint64_atomic_swap(w, 0xf0f0, d.peer);            // 0xf0f0
  out[k++] = nvshmem_uint64_atomic_fetch_and(w, 0xff00, d.peer);       // 0xf000
  out[k++] = nvshmem_uint64_atomic_fetch_or(w, 0x000f, d.peer);        // 0xf00f
  out[k++] = nvshmem_uint64_atomic_fetch_xor(w, 0x0ff0, d.peer);       // 0xffff
  nvshmem_uint64_atomic_set(w, 0x1234, d.peer);                       // 0x1234
  out[k++] = nvshmem_uint64_atomic_fetch(w, d.peer);                   // 0x1234
  out[k++] = nvshmem_uint32_atomic_fetch_add(v, 0x10, d.peer);         // 0x0f0f0f1f
  out[k++] = nvshmem_uint32_atomic_fetch_xor(v, 0xffff, d.peer);       // 0x0f0ff0e0
  out[k++] = nvshmem_uint32_atomic_fetch_and(v, 0xff00ff00u, d.peer);  // 0x0f00f000
  out[k++] = nvshmem_uint32_atomic_fetch_or(v, 0x3, d.peer);           // 0x0f00f003
  out[k++] = nvshmem_uint32_atomic_compare_swap(v, 0x0f00f003u, 42, d.peer);  // hit: 42
  out[k++] = nvshmem_uint32_atomic_swap(v, 77, d.peer);                // 77
  out[k++] = nvshmem_uint32_atomic_fetch_inc(v, d.peer);               // 78
  out[k++] = nvshmem_uint32_atomic_fetch(v, d.peer);                   // 78
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
  if (!wait_eq(d.u64(kFlagOff), 1)) {
    out[0] = 1;
    return;
  }
  const uint8_t* data = reinterpret_cast<const uint8_t*>(d.sym + kDstOff);
  for (size_t i = 0; i < bytes; ++i)
    if (reinterpret_cast<const volatile uint8_t*>(data)[i] != pattern_byte(i, salt)) {
      out[0] = 2;
      out[1] = i;
      return;
    }
  if (!wait_ge(d.u64(kSigOff), 7)) {  // 7 after the set, 10 once the add came too
    out[0] = 3;
    return;
  }
  data = reinterpret_cast<const uint8_t*>(d.sym + kDstOff + kMaxBytes / 2);
  for (size_t i = 0; i < bytes; ++i)
    if (reinterpret_cast<const volatile uint8_t*>(data)[i] != pattern_byte(i, salt)) {
      out[0] = 4;
      out[1] = i;
      return;
    }
  if (!wait_eq(d.u64(kSigOff), 10)) out[0] = 5;
}

// ---- measurement kernels (one thread; Table 3) ------------------------------------------------------
constexpr int kOpPut = 0, kOpP = 1;

// out: 3 x iters: issue ns, completion ns (put + quiet), issue cycles.
__global__ void issue_kernel(Dev d, int op, size_t bytes, int warmup, int iters, uint64_t* out) {
  for (int i = 0; i < warmup + iters; ++i) {
    const uint64_t t0 = gtimer();
    const uint64_t c0 = cycles();
    if (op == kOpPut)
      nvshmem_putmem_nbi(d.sym + kDstOff, d.sym + kSrcOff, bytes, d.peer);
    else
      nvshmem_uint64_p(d.u64(kWordsOff + 304), static_cast<uint64_t>(i), d.peer);
    const uint64_t c1 = cycles();
    const uint64_t t1 = gtimer();
    nvshmem_quiet();
    const uint64_t t2 = gtimer();
    if (i >= warmup) {
      out[i - warmup] = t1 - t0;
      out[iters + i - warmup] = t2 - t0;
      out[2 * iters + i - warmup] = c1 - c0;
    }
  }
}

// Round trip: put (or p) carrying a sequence number to the peer's flag, wait for the echo.
// out: iters round-trip ns; out[iters] = 0 ok, else the iteration that timed out + 1.
__global__ void ping_kernel(Dev d, int op, size_t bytes, uint64_t base, int warmup, int iters, uint64_t* out) {
  out[iters] = 0;
  for (int i = 0; i < warmup + iters; ++i) {
    const uint64_t seq = base + static_cast<uint64_t>(i) + 1;
    const uint64_t t0 = gtimer();
    if (op == kOpPut)
      nvshmem_putmem_signal_nbi(d.sym + kDstOff, d.sym + kSrcOff, bytes, d.u64(kFlagOff), seq, NVSHMEM_SIGNAL_SET, d.peer);
    else
      nvshmem_uint64_p(d.u64(kFlagOff), seq, d.peer);
    if (!wait_eq(d.u64(kFlagOff), seq)) {
      out[iters] = static_cast<uint64_t>(i) + 1;
      return;
    }
    if (i >= warmup) out[i - warmup] = gtimer() - t0;
  }
}

__global__ void echo_kernel(Dev d, int op, size_t bytes, uint64_t base, int n, uint64_t* out) {
  out[0] = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t seq = base + static_cast<uint64_t>(i) + 1;
    if (!wait_eq(d.u64(kFlagOff), seq)) {
      out[0] = static_cast<uint64_t>(i) + 1;
      return;
    }
    if (op == kOpPut)
      nvshmem_putmem_signal_nbi(d.sym + kDstOff, d.sym + kSrcOff, bytes, d.u64(kFlagOff), seq, NVSHMEM_SIGNAL_SET, d.peer);
    else
      nvshmem_uint64_p(d.u64(kFlagOff), seq, d.peer);
  }
  nvshmem_quiet();
}

// ---- host side -----------------------------------------------------------------------------------------
void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Options {
  std::string transport = "ibgda";
  int gpus = 1;
  std::string out;
  int iters = 200, warmup = 20;
  std::vector<size_t> sizes = {8, 4096, 65536};
  int timeout_s = 240;
  bool metrics = true;
  std::string campaign = "emulated-nic", host, platform = "unknown", provenance_id;
  int run_index = 0;
  std::vector<std::pair<std::string, std::string>> params;  // --param KEY=VALUE
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gicomm-emu-nvshmem: %s\nusage: gicomm-emu-nvshmem --transport ibgda|ibrc [--gpus 1|2] [--out FILE] "
               "[--iters N] [--warmup N] [--sizes 8,4096] [--timeout-s S] [--skip-metrics] [--param KEY=VALUE] [--campaign C] "
               "[--host H] [--platform P] [--run-index I] [--provenance-id ID]\n",
               why.c_str());
  std::exit(2);
}

long parse_int(const std::string& key, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi)
    usage(key + " '" + v + "' is not an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  return x;
}

Options parse(int argc, char** argv) {
  Options o;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  o.host = name;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--skip-metrics") {
      o.metrics = false;
      continue;
    }
    if (i + 1 >= argc) usage(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--transport") {
      if (v != "ibgda" && v != "ibrc") usage("--transport '" + v + "' (allowed: ibgda, ibrc)");
      o.transport = v;
    } else if (k == "--gpus") {
      o.gpus = static_cast<int>(parse_int(k, v, 1, 2));
    } else if (k == "--out") {
      o.out = v;
    } else if (k == "--iters") {
      o.iters = static_cast<int>(parse_int(k, v, 1, 100000));
    } else if (k == "--warmup") {
      o.warmup = static_cast<int>(parse_int(k, v, 0, 100000));
    } else if (k == "--timeout-s") {
      o.timeout_s = static_cast<int>(parse_int(k, v, 5, 3600));
    } else if (k == "--sizes") {
      o.sizes.clear();
      size_t pos = 0;
      while (pos <= v.size()) {
        const size_t comma = v.find(',', pos);
        const std::string item = v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        o.sizes.push_back(static_cast<size_t>(parse_int("--sizes entry", item, 8, kMaxBytes / 2)));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else if (k == "--campaign") {
      o.campaign = v;
    } else if (k == "--host") {
      o.host = v;
    } else if (k == "--platform") {
      o.platform = v;
    } else if (k == "--run-index") {
      o.run_index = static_cast<int>(parse_int(k, v, 0, 1000000));
    } else if (k == "--provenance-id") {
      o.provenance_id = v;
    } else if (k == "--param") {
      const size_t eq = v.find('=');
      bool ok = eq != std::string::npos && eq > 0;
      for (size_t j = 0; ok && j < eq; ++j) ok = (v[j] >= 'a' && v[j] <= 'z') || (v[j] >= '0' && v[j] <= '9') || v[j] == '_';
      if (!ok) usage("--param '" + v + "' is not KEY=VALUE with KEY of [a-z0-9_]");
      o.params.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else {
      usage("unknown option " + k);
    }
  }
  if (o.provenance_id.empty()) o.provenance_id = o.host;
  return o;
}

// ---- checks and records ---------------------------------------------------------------------------
int g_failures = 0;
int g_rank = 0;

void report(bool ok, const std::string& name, const std::string& detail) {
  std::printf("CHECK %s %s rank %d%s%s\n", name.c_str(), ok ? "PASS" : "FAIL", g_rank, detail.empty() ? "" : ": ",
              detail.c_str());
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
      continue;
    }
    o += c;
  }
  return o + "\"";
}

// A JSON number; null for a value that is not finite (JSON has no NaN or infinity).
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

struct Writer {
  const Options& o;
  std::string rdma_provider, handler;
  FILE* f = nullptr;
  explicit Writer(const Options& opts) : o(opts) {
    if (!o.out.empty()) {
      f = std::fopen(o.out.c_str(), "a");
      if (!f) throw std::runtime_error("cannot open --out " + o.out);
    }
  }
  ~Writer() {
    if (f) std::fclose(f);
  }
  // One record: `stats` empty for a failed one (then `error` says why).
  void record(const std::string& op, size_t size, const std::string& metric, const std::string& unit,
              std::vector<double> v, double mhz, const std::string& error) {
    std::string params = "{\"op\": " + json_str(op) + ", \"size\": " + std::to_string(size) + ", \"pes\": 2, \"gpus\": " +
                         std::to_string(o.gpus) + (handler.empty() ? "" : ", \"nic_handler\": " + json_str(handler));
    for (const auto& [k, val] : o.params) params += ", " + json_str(k) + ": " + json_str(val);
    params += "}";
    char ts[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::string line = "{\"schema_version\": 2, \"campaign\": " + json_str(o.campaign) + ", \"host\": " + json_str(o.host) +
                       ", \"platform\": " + json_str(o.platform) + ", \"experiment\": \"library_baselines\", \"transport\": " +
                       json_str("nvshmem-" + o.transport) + ", \"nic_backend\": \"mlx5\", \"rdma_provider\": " +
                       json_str(rdma_provider) + ", \"topology\": \"two-rank\", \"params\": " + params +
                       ", \"metric\": " + json_str(metric) + ", \"unit\": " + json_str(unit);
    if (error.empty() && !v.empty()) {
      std::sort(v.begin(), v.end());
      double sum = 0;
      for (double x : v) sum += x;
      const double mean = sum / static_cast<double>(v.size());
      double var = 0;
      for (double x : v) var += (x - mean) * (x - mean);
      auto pct = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))]; };
      line += ", \"stats\": {\"n\": " + std::to_string(v.size()) + ", \"p50\": " + num(pct(0.5)) + ", \"p90\": " + num(pct(0.9)) +
              ", \"p99\": " + num(pct(0.99)) + ", \"min\": " + num(v.front()) + ", \"max\": " + num(v.back()) +
              ", \"mean\": " + num(mean) + ", \"stddev\": " + num(std::sqrt(var / static_cast<double>(v.size()))) + "}";
      line += ", \"sm_clock_mhz\": " + (mhz > 0 ? num(mhz) : std::string("null")) + ", \"status\": \"ok\"";
      std::printf("METRIC nvshmem-%s %s size %zu %s p50 %s %s (n %zu, rdma_provider %s)\n", o.transport.c_str(), op.c_str(),
                  size, metric.c_str(), num(pct(0.5)).c_str(), unit.c_str(), v.size(), rdma_provider.c_str());
    } else {
      line += ", \"status\": \"failed\", \"error\": " + json_str(error.empty() ? "no samples" : error);
      std::printf("METRIC nvshmem-%s %s size %zu %s FAILED: %s\n", o.transport.c_str(), op.c_str(), size, metric.c_str(),
                  error.c_str());
    }
    line += ", \"run_index\": " + std::to_string(o.run_index) + ", \"provenance_id\": " + json_str(o.provenance_id) +
            ", \"timestamp\": " + json_str(ts) + "}";
    if (f) {
      std::fprintf(f, "%s\n", line.c_str());
      std::fflush(f);
    }
  }
};

// Rank 0 is the initiator; rank 1 checks what arrived. Both call every barrier.
void run_checks(char* sym, int me, const Options& o) {
  const int peer = 1 - me;
  const Dev d{sym, peer};
  const uint32_t salt = 0x5a;
  std::vector<uint8_t> pat(kMaxBytes);
  for (size_t i = 0; i < pat.size(); ++i) pat[i] = pattern_byte(i, salt);
  check_cuda(cudaMemset(sym, 0, kRegion), "cudaMemset(region)");
  check_cuda(cudaMemcpy(sym + kSrcOff, pat.data(), kMaxBytes, cudaMemcpyHostToDevice), "cudaMemcpy(src)");
  const uint64_t w0 = 100;
  const uint32_t v0 = 0x0f0f0f0f;
  const uint64_t g0 = 0xfedcba9876543210ull;
  check_cuda(cudaMemcpy(sym + kWordsOff, &w0, 8, cudaMemcpyHostToDevice), "cudaMemcpy(w)");
  check_cuda(cudaMemcpy(sym + kWordsOff + 256, &v0, 4, cudaMemcpyHostToDevice), "cudaMemcpy(v)");
  check_cuda(cudaMemcpy(sym + kWordsOff + 216, &g0, 8, cudaMemcpyHostToDevice), "cudaMemcpy(g)");
  uint64_t* dout = nullptr;
  size_t* dsizes = nullptr;
  check_cuda(cudaMalloc(&dout, 64 * sizeof(uint64_t)), "cudaMalloc(out)");
  check_cuda(cudaMalloc(&dsizes, 8 * sizeof(size_t)), "cudaMalloc(sizes)");
  check_cuda(cudaMemset(dout, 0, 64 * sizeof(uint64_t)), "cudaMemset(out)");
  check_cuda(cudaDeviceSynchronize(), "init");
  nvshmem_barrier_all();

  // put: 8 B .. 1/8 MiB each into its own slot of the peer.
  const std::vector<size_t> put_sizes = {8, 64, 1000, 4096, 65536, 131072};
  const size_t stride = 131072;
  if (me == 0) {
    check_cuda(cudaMemcpy(dsizes, put_sizes.data(), put_sizes.size() * sizeof(size_t), cudaMemcpyHostToDevice), "sizes");
    put_kernel<<<1, 1>>>(d, dsizes, static_cast<int>(put_sizes.size()), stride);
    check_cuda(cudaDeviceSynchronize(), "put_kernel");
  }
  nvshmem_barrier_all();
  if (me == 1) {
    std::vector<uint8_t> got(put_sizes.size() * stride);
    check_cuda(cudaMemcpy(got.data(), sym + kDstOff, got.size(), cudaMemcpyDeviceToHost), "read dst");
    for (size_t i = 0; i < put_sizes.size(); ++i) {
      size_t bad = SIZE_MAX;
      for (size_t b = 0; b < put_sizes[i] && bad == SIZE_MAX; ++b)
        if (got[i * stride + b] != pat[b]) bad = b;
      const bool beyond_clean = put_sizes[i] == stride || got[i * stride + put_sizes[i]] == 0;
      report(bad == SIZE_MAX && beyond_clean, "putmem_" + std::to_string(put_sizes[i]),
             bad == SIZE_MAX ? (beyond_clean ? "" : "a byte past the end was written") : "first bad byte " + std::to_string(bad));
    }
  }
  nvshmem_barrier_all();

  // get: 64 KiB of the peer's source into our get buffer.
  if (me == 0) {
    get_kernel<<<1, 1>>>(d, 65536);
    check_cuda(cudaDeviceSynchronize(), "get_kernel");
    std::vector<uint8_t> got(65536);
    check_cuda(cudaMemcpy(got.data(), sym + kGetOff, got.size(), cudaMemcpyDeviceToHost), "read get");
    report(std::equal(got.begin(), got.end(), pat.begin()), "getmem_65536", "");
  }
  nvshmem_barrier_all();

  // p (8 and 4 bytes) and g.
  if (me == 0) {
    pg_kernel<<<1, 1>>>(d, dout);
    check_cuda(cudaDeviceSynchronize(), "pg_kernel");
    uint64_t g = 0;
    check_cuda(cudaMemcpy(&g, dout, 8, cudaMemcpyDeviceToHost), "read g");
    report(g == g0, "uint64_g", g == g0 ? "" : "got " + std::to_string(g) + ", expected " + std::to_string(g0));
  }
  nvshmem_barrier_all();
  if (me == 1) {
    uint64_t p8 = 0;
    uint32_t p4 = 0;
    check_cuda(cudaMemcpy(&p8, sym + kWordsOff + 200, 8, cudaMemcpyDeviceToHost), "read p8");
    check_cuda(cudaMemcpy(&p4, sym + kWordsOff + 208, 4, cudaMemcpyDeviceToHost), "read p4");
    report(p8 == 0x0123456789abcdefull, "uint64_p", "");
    report(p4 == 0x13572468u, "int_p", "");
  }
  nvshmem_barrier_all();

  // atomics
  const bool ibrc = o.transport == "ibrc";
  if (me == 0 && ibrc) {
    atomics_kernel_ibrc<<<1, 1>>>(d, dout);
    check_cuda(cudaDeviceSynchronize(), "atomics_kernel_ibrc");
  } else if (me == 0) {
    atomics_kernel<<<1, 1>>>(d, dout);
    check_cuda(cudaDeviceSynchronize(), "atomics_kernel");
    uint64_t out[64] = {};
    check_cuda(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost), "read atomics");
    struct Want {
      const char* name;
      uint64_t value;
    };
    const Want want[] = {{"uint64_atomic_fetch_add", 100},   {"uint64_atomic_fetch_inc", 115},
                         {"uint64_atomic_compare_swap_hit", 117}, {"uint64_atomic_compare_swap_miss", 500},
                         {"uint64_atomic_swap", 500},          {"uint64_atomic_fetch_and", 0xf0f0},
                         {"uint64_atomic_fetch_or", 0xf000},   {"uint64_atomic_fetch_xor", 0xf00f},
                         {"uint64_atomic_fetch", 0x1234},      {"uint32_atomic_fetch_add", 0x0f0f0f0f},
                         {"uint32_atomic_fetch_xor", 0x0f0f0f1f}, {"uint32_atomic_fetch_and", 0x0f0ff0e0},
                         {"uint32_atomic_fetch_or", 0x0f00f000}, {"uint32_atomic_compare_swap_hit", 0x0f00f003},
                         {"uint32_atomic_swap", 42},           {"uint32_atomic_fetch_inc", 77},
                         {"uint32_atomic_fetch", 78}};
    report(out[63] == sizeof want / sizeof want[0], "atomics_count", std::to_string(out[63]) + " fetched values");
    for (size_t i = 0; i < sizeof want / sizeof want[0]; ++i) {
      char detail[96];
      std::snprintf(detail, sizeof detail, "fetched 0x%" PRIx64 ", expected 0x%" PRIx64, out[i], want[i].value);
      report(out[i] == want[i].value, want[i].name, out[i] == want[i].value ? "" : detail);
    }
  }
  nvshmem_barrier_all();
  if (me == 1) {
    uint64_t w = 0;
    uint32_t v = 0;
    check_cuda(cudaMemcpy(&w, sym + kWordsOff, 8, cudaMemcpyDeviceToHost), "read w");
    check_cuda(cudaMemcpy(&v, sym + kWordsOff + 256, 4, cudaMemcpyDeviceToHost), "read v");
    const uint64_t want_w = ibrc ? 115 : 0x1234;
    const uint32_t want_v = ibrc ? v0 : 78;
    report(w == want_w, ibrc ? "uint64_atomic_add_final" : "atomics_final_uint64",
           w == want_w ? "" : "found " + std::to_string(w) + ", expected " + std::to_string(want_w));
    report(v == want_v, ibrc ? "uint32_untouched" : "atomics_final_uint32",
           v == want_v ? "" : "found " + std::to_string(v) + ", expected " + std::to_string(want_v));
  }
  nvshmem_barrier_all();

  // fence and put-with-signal: both PEs' kernels run at the same time.
  check_cuda(cudaMemset(sym + kDstOff, 0, kMaxBytes), "clear dst");
  check_cuda(cudaMemset(sym, 0, 256), "clear flags");
  check_cuda(cudaDeviceSynchronize(), "clear");
  nvshmem_barrier_all();
  const size_t fence_bytes = 32768;
  if (me == 1) {
    fence_receiver<<<1, 1>>>(d, fence_bytes, salt, dout);
  } else {
    fence_sender<<<1, 1>>>(d, fence_bytes);
  }
  check_cuda(cudaDeviceSynchronize(), me == 1 ? "fence_receiver" : "fence_sender");
  if (me == 1) {
    uint64_t out[2] = {};
    check_cuda(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost), "read fence");
    static const char* what[] = {"", "the flag never came", "data wrong when the flag came (fence broken)",
                                 "the signal never came", "data wrong when the signal came", "the signal add never came"};
    report(out[0] == 0, "fence_then_flag_and_putmem_signal",
           out[0] == 0 ? "" : std::string(what[std::min<uint64_t>(out[0], 5)]) + " (byte " + std::to_string(out[1]) + ")");
  }
  nvshmem_barrier_all();
  cudaFree(dout);
  cudaFree(dsizes);
}

__global__ void peer_word_kernel(Dev d, size_t off, uint64_t* out) { *out = nvshmem_uint64_g(d.u64(off), d.peer); }

// Both PEs learn the sum of their failed checks (so both measure, or neither does).
int failures_of_both(char* sym, int me, int mine) {
  const size_t off = kWordsOff + 400;
  const uint64_t v = static_cast<uint64_t>(mine);
  uint64_t* dout = nullptr;
  check_cuda(cudaMalloc(&dout, 8), "cudaMalloc");
  check_cuda(cudaMemcpy(sym + off, &v, 8, cudaMemcpyHostToDevice), "write failures");
  nvshmem_barrier_all();
  peer_word_kernel<<<1, 1>>>(Dev{sym, 1 - me}, off, dout);
  check_cuda(cudaDeviceSynchronize(), "peer_word_kernel");
  uint64_t theirs = 0;
  check_cuda(cudaMemcpy(&theirs, dout, 8, cudaMemcpyDeviceToHost), "read failures");
  cudaFree(dout);
  nvshmem_barrier_all();
  return mine + static_cast<int>(theirs);
}

double clock_mhz(const std::vector<uint64_t>& raw, int iters) {
  double ns = 0, cyc = 0;
  for (int i = 0; i < iters; ++i) {
    ns += static_cast<double>(raw[i]);
    cyc += static_cast<double>(raw[2 * iters + i]);
  }
  return ns > 0 ? cyc * 1e3 / ns : 0;
}

void run_metrics(char* sym, int me, const Options& o, Writer& w) {
  const Dev d{sym, 1 - me};
  uint64_t* dout = nullptr;
  const int n = o.warmup + o.iters;
  check_cuda(cudaMalloc(&dout, sizeof(uint64_t) * (3 * o.iters + 1)), "cudaMalloc(out)");
  struct Point {
    int op;
    size_t size;
  };
  std::vector<Point> points = {{kOpP, 8}};
  for (size_t s : o.sizes) points.push_back({kOpPut, s});
  uint64_t base = 0;
  for (const Point& p : points) {
    const std::string op = p.op == kOpPut ? "put" : "p";
    // issue and completion (rank 0 alone; the peer only receives)
    if (me == 0) {
      std::string err;
      issue_kernel<<<1, 1>>>(d, p.op, p.size, o.warmup, o.iters, dout);
      const cudaError_t e = cudaDeviceSynchronize();
      std::vector<uint64_t> raw(3 * static_cast<size_t>(o.iters));
      if (e == cudaSuccess) check_cuda(cudaMemcpy(raw.data(), dout, raw.size() * 8, cudaMemcpyDeviceToHost), "read issue");
      if (e != cudaSuccess) err = std::string("issue_kernel: ") + cudaGetErrorString(e);
      const double mhz = err.empty() ? clock_mhz(raw, o.iters) : 0;
      std::vector<double> issue, completion, issue_cycles;
      for (int i = 0; err.empty() && i < o.iters; ++i) {
        issue.push_back(static_cast<double>(raw[i]));
        completion.push_back(static_cast<double>(raw[o.iters + i]));
        issue_cycles.push_back(static_cast<double>(raw[2 * o.iters + i]));
      }
      w.record(op, p.size, "issue_ns", "ns", issue, mhz, err);
      w.record(op, p.size, "issue_cycles", "cycles", issue_cycles, mhz, err);
      w.record(op, p.size, "completion_ns", "ns", completion, mhz, err);
    }
    check_cuda(cudaMemset(sym, 0, 256), "clear flag");
    check_cuda(cudaDeviceSynchronize(), "clear flag");
    nvshmem_barrier_all();
    // round trip: both ranks
    if (me == 0)
      ping_kernel<<<1, 1>>>(d, p.op, p.size, base, o.warmup, o.iters, dout);
    else
      echo_kernel<<<1, 1>>>(d, p.op, p.size, base, n, dout);
    const cudaError_t e = cudaDeviceSynchronize();
    std::vector<uint64_t> raw(static_cast<size_t>(o.iters) + 1);
    if (e == cudaSuccess) check_cuda(cudaMemcpy(raw.data(), dout, raw.size() * 8, cudaMemcpyDeviceToHost), "read rtt");
    if (me == 0) {
      std::string err = e != cudaSuccess ? std::string("ping_kernel: ") + cudaGetErrorString(e)
                        : raw[o.iters] != 0 ? "the echo of round trip " + std::to_string(raw[o.iters] - 1) + " did not come within 10 s"
                                            : "";
      std::vector<double> rtt;
      for (int i = 0; err.empty() && i < o.iters; ++i) rtt.push_back(static_cast<double>(raw[i]));
      w.record(op, p.size, "rtt_ns", "ns", rtt, 0, err);
    } else if (e != cudaSuccess || raw[0] != 0) {
      std::fprintf(stderr, "gicomm-emu-nvshmem: rank 1 echo %s size %zu: %s\n", op.c_str(), p.size,
                   e != cudaSuccess ? cudaGetErrorString(e) : "a round trip did not come within 10 s");
    }
    base += static_cast<uint64_t>(n);
    nvshmem_barrier_all();
  }
  cudaFree(dout);
}

int rank_main(int rank, int uid_fd, const Options& o) {
  g_rank = rank;
  alarm(static_cast<unsigned>(o.timeout_s));  // a hung PE dies (SIGALRM) rather than hang the run
  check_cuda(cudaSetDevice(o.gpus == 2 ? rank : 0), "cudaSetDevice");
  nvshmemx_uniqueid_t uid = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (rank == 0) {
    if (nvshmemx_get_uniqueid(&uid) != 0) throw std::runtime_error("nvshmemx_get_uniqueid failed");
    if (write(uid_fd, &uid, sizeof uid) != static_cast<ssize_t>(sizeof uid)) throw std::runtime_error("cannot pass the unique id");
  } else {
    size_t got = 0;
    while (got < sizeof uid) {
      const ssize_t r = read(uid_fd, reinterpret_cast<char*>(&uid) + got, sizeof uid - got);
      if (r <= 0) throw std::runtime_error("rank 0 did not pass the unique id");
      got += static_cast<size_t>(r);
    }
  }
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  if (nvshmemx_set_attr_uniqueid_args(rank, 2, &uid, &attr) != 0) throw std::runtime_error("nvshmemx_set_attr_uniqueid_args failed");
  if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) {
    std::fprintf(stderr, "gicomm-emu-nvshmem: rank %d: nvshmemx_init_attr failed (NVSHMEM_DEBUG=INFO says why)\n", rank);
    return 3;
  }
  const int me = nvshmem_my_pe();
  report(nvshmem_n_pes() == 2 && me == rank, "init", "PE " + std::to_string(me) + " of " + std::to_string(nvshmem_n_pes()));
  Writer w(o);
  w.rdma_provider = gicomm::mlx5dev::rdma_provider();
  if (o.transport == "ibgda") {
    const char* h = std::getenv("NVSHMEM_IBGDA_NIC_HANDLER");
    w.handler = h ? h : "auto";
  }
  std::printf("rank %d: NVSHMEM %d.%d, transport nvshmem-%s, rdma-core: %s\n", rank, NVSHMEM_MAJOR_VERSION,
              NVSHMEM_MINOR_VERSION, o.transport.c_str(), w.rdma_provider.c_str());
  if (rank == 0)
    for (const char* k : {"NVSHMEM_DISABLE_P2P", "NVSHMEM_IB_ENABLE_IBGDA", "NVSHMEM_REMOTE_TRANSPORT", "NVSHMEM_IBGDA_NIC_HANDLER",
                          "NVSHMEM_IBGDA_FORCE_NIC_BUF_MEMTYPE", "NVSHMEM_IBGDA_NUM_RC_PER_PE", "CUDA_MPS_PIPE_DIRECTORY"})
      std::printf("rank 0: %s=%s\n", k, std::getenv(k) ? std::getenv(k) : "(unset)");
  char* sym = static_cast<char*>(nvshmem_malloc(kRegion));
  if (sym == nullptr) throw std::runtime_error("nvshmem_malloc failed");
  report(nvshmem_ptr(sym, 1 - me) == nullptr, "peer_heap_not_mapped",
         nvshmem_ptr(sym, 1 - me) == nullptr ? "" : "NVSHMEM mapped the peer's heap: operations would bypass the NIC");
  run_checks(sym, me, o);
  const int both = failures_of_both(sym, me, g_failures);
  if (o.metrics && both == 0) run_metrics(sym, me, o, w);
  if (o.metrics && both != 0 && me == 0)
    for (const char* m : {"issue_ns", "completion_ns", "rtt_ns"})
      w.record("put", 8, m, "ns", {}, 0, "not measured: " + std::to_string(both) + " correctness checks failed");
  nvshmem_barrier_all();
  nvshmem_free(sym);
  nvshmem_finalize();
  std::printf("rank %d: %s (%d failed checks)\n", rank, g_failures ? "FAILED" : "all checks passed", g_failures);
  return g_failures ? 1 : 0;
}

void set_default_env(const Options& o) {
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
  setenv("NVSHMEM_DISABLE_P2P", "1", 0);
  setenv("NVSHMEM_IB_ENABLE_IBGDA", o.transport == "ibgda" ? "1" : "0", 0);
  setenv("NVSHMEM_REMOTE_TRANSPORT", o.transport == "ibgda" ? "none" : "ibrc", 0);
  setenv("NVSHMEM_SYMMETRIC_SIZE", "268435456", 0);
  const std::string plugin = std::string(GICOMM_NVSHMEM_LIBDIR) + "/nvshmem_bootstrap_uid.so.3";
  struct stat st;
  if (stat(plugin.c_str(), &st) == 0) setenv("NVSHMEM_BOOTSTRAP_UID_PLUGIN", plugin.c_str(), 0);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  set_default_env(o);
  int fds[2];
  if (pipe(fds) != 0) return 2;
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return 2;
  const int rank = child == 0 ? 1 : 0;
  close(fds[rank == 0 ? 0 : 1]);
  int rc = 0;
  try {
    rc = rank_main(rank, fds[rank == 0 ? 1 : 0], o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gicomm-emu-nvshmem: rank %d: %s\n", rank, e.what());
    rc = 1;
  }
  std::fflush(stdout);
  if (rank == 1) std::_Exit(rc);
  // Rank 0 waits for rank 1, bounded: a PE still running after the timeout is killed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "gicomm-emu-nvshmem: rank 1 did not finish within 30 s of rank 0; killing it\n");
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return 4;
    }
    usleep(100000);
  }
  const int child_rc = WIFEXITED(status) ? WEXITSTATUS(status) : (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? 4 : 1);
  if (child_rc != 0) std::fprintf(stderr, "gicomm-emu-nvshmem: rank 1 exited with %d\n", child_rc);
  return rc != 0 ? rc : child_rc;
}
