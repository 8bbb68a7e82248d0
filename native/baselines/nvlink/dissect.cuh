// The NVLink dissection: one set of measurement kernels, instantiated once per path (a minimal
// direct store, NVSHMEM P2P, NCCL LSA), so every library is timed by the same code and only the
// path's own device calls differ.
//
// A Path is a small trivially-copyable struct passed by value to the kernels, with device methods:
//   put(bytes, slot)      move `bytes` from the local source buffer into the peer's data slot
//   p(value, slot)        store one 8-byte value into the peer's scratch slot
//   put_signal(bytes, s)  put into the peer's data slot 0, then set the peer's flag to s (ordered)
//   p_signal(s)           store s into the peer's flag (the value is its own flag)
//   complete()            wait until everything issued so far is visible at the peer
//   my_flag(), my_data()  this rank's flag word and data slot 0 (written by the peer)
//   flag_value()          optional: the current value of this rank's flag, where it is not the
//                         word at my_flag() (an NCCL GIN signal)
// Metrics per point: issue and completion time of one op with at most one outstanding (ns from
// %globaltimer and SM cycles from clock64), flag round trip, message rate of one thread, and the
// cost to an enclosing kernel (registers, occupancy, slowdown with the path's code dormant or sending).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/harness.h"
#include "common/json.h"
#include "support/ranks.h"

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

// ---- host side ---------------------------------------------------------------------------------------
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Spec {
  int op = kOpPut;
  size_t bytes = 8;
  int warmup = 100;
  int iters = 1000;
  uint64_t timeout_ns = 2000000000ull;
  int batch = 1000;
  int reps = 20;
  int caller_reps = 10;
};

// Parses a point; returns "" or why it cannot be measured (the same decision on every rank).
inline std::string spec_of(const gicomm::bench::Point& p, const gicomm::bench::Options& o, Spec* s) {
  const std::string op = p.params.get_string("op", "put");
  if (op == "put")
    s->op = kOpPut;
  else if (op == "p")
    s->op = kOpP;
  else
    return "unknown op '" + op + "' (put | p)";
  const long long size = p.params.get_int("size", 8);
  if (size < 8 || size % 8 != 0 || static_cast<size_t>(size) > kMaxBytes)
    return "size " + std::to_string(size) + " must be a multiple of 8 between 8 and " + std::to_string(kMaxBytes);
  if (s->op == kOpP && size != 8) return "op p moves exactly 8 bytes; size " + std::to_string(size) + " does not apply";
  s->bytes = static_cast<size_t>(size);
  s->warmup = std::max(0, o.warmup);
  s->iters = std::max(1, o.iters);
  s->timeout_ns = static_cast<uint64_t>(std::max(1, o.timeout_ms)) * 1000000ull;
  // One thread's message rate: `batch` back-to-back ops then one completion. Large puts use
  // fewer ops per batch (at least 16) so a point stays short: 1000 up to 512 B, then 512000/size.
  const long long default_batch = std::max(16LL, std::min(1000LL, 512000LL / size));
  s->batch = static_cast<int>(p.params.get_int("batch", default_batch));
  if (s->batch < 1 || s->batch > 1000000) return "batch must be between 1 and 1000000";
  return "";
}

inline const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> m = {
      "issue_ns",        "issue_cycles",          "completion_ns",
      "completion_cycles", "rtt_ns",              "msg_rate",
      "registers",       "registers_base",        "occupancy_blocks",
      "occupancy_blocks_base", "caller_slowdown_dormant_pct", "caller_slowdown_send_pct"};
  return m;
}

inline double clock_mhz(const Status& s) {
  if (s.t_end <= s.t_start) return 0.0;
  return static_cast<double>(s.c_end - s.c_start) * 1e3 / static_cast<double>(s.t_end - s.t_start);
}

inline std::string status_text(const Status& s, const char* kernel) {
  if (s.code == 1)
    return std::string(kernel) + ": flag wait timed out at op " + std::to_string(s.index) + " (expected " +
           std::to_string(s.want) + ", last seen " + std::to_string(s.seen) + ")";
  if (s.code == 2)
    return std::string(kernel) + ": payload mismatch at word " + std::to_string(s.index) + " (expected " +
           std::to_string(s.want) + ", found " + std::to_string(s.seen) + ")";
  return "";
}

using gicomm::bench::compute_stats;
using gicomm::bench::Record;

inline Record stat_record(const std::string& metric, const std::string& unit, const std::vector<double>& v,
                          double mhz) {
  Record r = Record::ok(metric, unit, compute_stats(v));
  if (mhz > 0) r.sm_clock_mhz = mhz;
  return r;
}

// Runs the measurement kernels of one path on the current device.
template <class Path>
class Dissector {
 public:
  explicit Dissector(cudaStream_t stream) : stream_(stream) {
    check(cudaMalloc(&out_, sizeof(uint64_t) * 4 * kMaxIters), "cudaMalloc(out)");
    check(cudaMalloc(&st_, sizeof(Status)), "cudaMalloc(status)");
    check(cudaGetDevice(&device_), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device_), "cudaDeviceGetAttribute");
    check(cudaMalloc(&caller_out_, sizeof(float) * kCallerThreads * caller_blocks()), "cudaMalloc(caller)");
  }
  ~Dissector() {
    cudaFree(out_);
    cudaFree(st_);
    cudaFree(caller_out_);
  }
  Dissector(const Dissector&) = delete;
  Dissector& operator=(const Dissector&) = delete;

  static constexpr int kMaxIters = 1 << 20;
  int caller_blocks() const { return 4 * sms_; }

  // Issue, completion and message rate (local: the peer only receives). Appends records.
  void run_local(const Path& path, const Spec& s, std::vector<Record>* recs) {
    if (s.iters > kMaxIters) throw std::runtime_error("iters above " + std::to_string(kMaxIters));
    Status st{};
    reset();
    issue_kernel<Path><<<1, 32, 0, stream_>>>(path, s.op, s.bytes, s.warmup, s.iters, out_, st_);
    st = finish("issue_kernel");
    std::vector<uint64_t> raw(4 * static_cast<size_t>(s.iters));
    check(cudaMemcpy(raw.data(), out_, sizeof(uint64_t) * raw.size(), cudaMemcpyDeviceToHost), "copy issue");
    const double mhz = clock_mhz(st);
    recs->push_back(stat_record("issue_ns", "ns", slice(raw, 0, s.iters), mhz));
    recs->push_back(stat_record("issue_cycles", "cycles", slice(raw, 1, s.iters), mhz));
    recs->push_back(stat_record("completion_ns", "ns", slice(raw, 2, s.iters), mhz));
    recs->push_back(stat_record("completion_cycles", "cycles", slice(raw, 3, s.iters), mhz));

    reset();
    rate_kernel<Path><<<1, 32, 0, stream_>>>(path, s.op, s.bytes, s.batch, s.reps, out_, st_);
    st = finish("rate_kernel");
    std::vector<uint64_t> ns(static_cast<size_t>(s.reps));
    check(cudaMemcpy(ns.data(), out_, sizeof(uint64_t) * ns.size(), cudaMemcpyDeviceToHost), "copy rate");
    std::vector<double> rate;
    for (uint64_t t : ns) rate.push_back(t ? static_cast<double>(s.batch) * 1e3 / static_cast<double>(t) : 0.0);
    recs->push_back(stat_record("msg_rate", "Mmsg/s", rate, clock_mhz(st)));
  }

  // Cost to an enclosing kernel of this path's device code.
  void run_caller(const Path& path, const Spec& s, std::vector<Record>* recs) {
    cudaFuncAttributes base{}, comm{};
    check(cudaFuncGetAttributes(&base, caller_kernel<Path, false>), "cudaFuncGetAttributes(base)");
    check(cudaFuncGetAttributes(&comm, caller_kernel<Path, true>), "cudaFuncGetAttributes(comm)");
    int occ_base = 0, occ_comm = 0;
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_base, caller_kernel<Path, false>, kCallerThreads, 0),
          "occupancy(base)");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_comm, caller_kernel<Path, true>, kCallerThreads, 0),
          "occupancy(comm)");
    const int iters = 4000;
    std::vector<double> dormant, send;
    double mhz = 0;
    cudaEvent_t e0, e1;
    check(cudaEventCreate(&e0), "cudaEventCreate");
    check(cudaEventCreate(&e1), "cudaEventCreate");
    auto time_one = [&](int variant) {
      reset();
      check(cudaEventRecord(e0, stream_), "cudaEventRecord");
      if (variant == 0)
        caller_kernel<Path, false><<<caller_blocks(), kCallerThreads, 0, stream_>>>(path, caller_out_, iters, -1, st_);
      else
        caller_kernel<Path, true><<<caller_blocks(), kCallerThreads, 0, stream_>>>(path, caller_out_, iters,
                                                                                   variant == 1 ? -1 : -2, st_);
      check(cudaEventRecord(e1, stream_), "cudaEventRecord");
      const Status st = finish("caller_kernel");
      if (variant == 0) mhz = clock_mhz(st);
      float ms = 0;
      check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
      return static_cast<double>(ms);
    };
    for (int w = 0; w < 3; ++w) time_one(w);  // warm-up
    for (int r = 0; r < s.caller_reps; ++r) {
      const double t0 = time_one(0);
      const double t1 = time_one(1);
      const double t2 = time_one(2);
      dormant.push_back((t1 / t0 - 1.0) * 100.0);
      send.push_back((t2 / t0 - 1.0) * 100.0);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    // Registers and occupancy are properties of the compiled caller; their records carry the SM
    // clock the caller ran at in this measurement, like every other record.
    recs->push_back(stat_record("registers", "count", {static_cast<double>(comm.numRegs)}, mhz));
    recs->push_back(stat_record("registers_base", "count", {static_cast<double>(base.numRegs)}, mhz));
    recs->push_back(stat_record("occupancy_blocks", "blocks/SM", {static_cast<double>(occ_comm)}, mhz));
    recs->push_back(stat_record("occupancy_blocks_base", "blocks/SM", {static_cast<double>(occ_base)}, mhz));
    recs->push_back(stat_record("caller_slowdown_dormant_pct", "pct", dormant, mhz));
    recs->push_back(stat_record("caller_slowdown_send_pct", "pct", send, mhz));
  }

  void launch_ping(const Path& path, const Spec& s, uint64_t base) {
    reset();
    ping_kernel<Path><<<1, 32, 0, stream_>>>(path, s.op, s.bytes, base, s.warmup, s.iters, s.timeout_ns, out_, st_);
    check(cudaGetLastError(), "launch ping_kernel");
  }
  void launch_echo(const Path& path, const Spec& s, uint64_t base) {
    reset();
    echo_kernel<Path><<<1, 32, 0, stream_>>>(path, s.op, s.bytes, base, s.warmup + s.iters, s.timeout_ns, st_);
    check(cudaGetLastError(), "launch echo_kernel");
  }
  // Waits for the ping (or echo) kernel; returns "" or what failed. With `recs`, adds rtt_ns.
  std::string finish_round_trip(const Spec& s, const char* name, std::vector<Record>* recs) {
    const Status st = finish(name);
    const std::string err = status_text(st, name);
    if (!err.empty() || recs == nullptr) return err;
    std::vector<uint64_t> raw(static_cast<size_t>(s.iters));
    check(cudaMemcpy(raw.data(), out_, sizeof(uint64_t) * raw.size(), cudaMemcpyDeviceToHost), "copy rtt");
    recs->push_back(stat_record("rtt_ns", "ns", slice(raw, 0, s.iters), clock_mhz(st)));
    return "";
  }

 private:
  void reset() { check(cudaMemsetAsync(st_, 0, sizeof(Status), stream_), "cudaMemsetAsync(status)"); }
  Status finish(const char* name) {
    check(cudaGetLastError(), name);
    check(cudaStreamSynchronize(stream_), name);
    Status st{};
    check(cudaMemcpy(&st, st_, sizeof(Status), cudaMemcpyDeviceToHost), "copy status");
    return st;
  }
  static std::vector<double> slice(const std::vector<uint64_t>& raw, int k, int n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(raw[static_cast<size_t>(k) * n + i]);
    return v;
  }

  cudaStream_t stream_;
  uint64_t* out_ = nullptr;
  Status* st_ = nullptr;
  float* caller_out_ = nullptr;
  int device_ = 0;
  int sms_ = 0;
};

// Fills a region's source buffer with the payload pattern and clears the rest.
inline void init_region(void* region) {
  std::vector<uint64_t> src(kMaxBytes / 8);
  for (size_t k = 0; k < src.size(); ++k) src[k] = kPattern | k;
  check(cudaMemset(region, 0, kSrcOff), "cudaMemset(region)");
  check(cudaMemcpy(static_cast<char*>(region) + kSrcOff, src.data(), kMaxBytes, cudaMemcpyHostToDevice),
        "cudaMemcpy(src)");
}
inline void clear_data(void* region) {
  check(cudaMemset(static_cast<char*>(region) + kDataOff, 0, kSlots * kMaxBytes), "cudaMemset(data)");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

// One side of the measurement: the initiator (issue, completion, rate, caller cost, ping) or the
// responder (echo). A two-process library has one side per rank; the direct store has both in one
// process, on two devices.
template <class Path>
struct Side {
  Dissector<Path>* d = nullptr;
  Path path{};
  int device = 0;
  void* region = nullptr;
};

// The point loop shared by every path. `barrier()` lines the ranks up (a no-op in one process).
// Rank 0 (the side with `init`) writes the records of each point.
template <class Path, class Barrier>
int run_points(gicomm::baselines::RankContext& ctx, Side<Path>* init, Side<Path>* echo, Barrier barrier) {
  using gicomm::baselines::status_records;
  using gicomm::baselines::write_point;
  uint64_t base = 0;
  size_t index = 0;
  for (const gicomm::bench::Point& p : ctx.points) {
    ++index;
    const auto t_start = std::chrono::steady_clock::now();
    Spec s;
    const std::string bad = spec_of(p, ctx.options, &s);
    if (!bad.empty()) {
      if (init) {
        write_point(ctx, p, status_records(metric_names(), "skipped", "not measurable: " + bad));
        gicomm::baselines::log_point(ctx, index, p, "skipped: " + bad, 0.0);
      }
      continue;
    }
    std::vector<Record> recs;
    std::string local_error;
    barrier();
    if (init) {
      check(cudaSetDevice(init->device), "cudaSetDevice");
      try {
        init->d->run_local(init->path, s, &recs);
        init->d->run_caller(init->path, s, &recs);
      } catch (const std::exception& e) {
        local_error = e.what();
      }
      clear_data(init->region);
    }
    if (echo) {
      check(cudaSetDevice(echo->device), "cudaSetDevice");
      clear_data(echo->region);
    }
    barrier();
    if (echo) {
      check(cudaSetDevice(echo->device), "cudaSetDevice");
      echo->d->launch_echo(echo->path, s, base);
    }
    std::string rtt_error;
    if (init) {
      check(cudaSetDevice(init->device), "cudaSetDevice");
      init->d->launch_ping(init->path, s, base);
      rtt_error = init->d->finish_round_trip(s, "ping_kernel", &recs);
    }
    if (echo) {
      check(cudaSetDevice(echo->device), "cudaSetDevice");
      const std::string e = echo->d->finish_round_trip(s, "echo_kernel", nullptr);
      if (!e.empty()) std::fprintf(stderr, "[gicomm] rank %d: %s\n", ctx.rank, e.c_str());
      if (!e.empty() && rtt_error.empty() && init) rtt_error = e;
    }
    barrier();
    base += static_cast<uint64_t>(s.warmup + s.iters);
    if (!init) continue;
    if (!local_error.empty()) {
      for (auto& r : status_records({"issue_ns", "completion_ns", "msg_rate", "registers"}, "failed", local_error))
        recs.push_back(r);
    }
    if (!rtt_error.empty()) {
      for (auto& r : status_records({"rtt_ns"}, "failed", rtt_error)) recs.push_back(r);
    }
    write_point(ctx, p, recs);
    std::string summary;
    for (const Record& r : recs)
      if (r.stats && (r.metric == "issue_ns" || r.metric == "completion_ns" || r.metric == "rtt_ns" ||
                      r.metric == "msg_rate" || r.metric == "registers"))
        summary += r.metric + "=" + gicomm::bench::json_number(r.stats->p50) + " ";
    if (!local_error.empty()) summary += "LOCAL FAILED: " + local_error + " ";
    if (!rtt_error.empty()) summary += "RTT FAILED: " + rtt_error;
    gicomm::baselines::log_point(ctx, index, p, summary,
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
  }
  return 0;
}

// Variables that keep NVLink multicast off everywhere (shared machines: see DESIGN.md).
inline void multicast_off() {
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
}

// The rank of a two-process library: rank `me` 0 is the initiator, 1 the responder, on the current
// device, with its region `local` and kernels on `stream`; a last barrier keeps either rank from
// tearing down while the other still measures.
template <class Path, class Barrier>
int run_rank(gicomm::baselines::RankContext& ctx, int me, const Path& path, void* local, cudaStream_t stream,
             Barrier barrier) {
  int rc = 0;
  {
    Dissector<Path> d(stream);
    Side<Path> side{&d, path, ctx.rank, local};
    rc = run_points(ctx, me == 0 ? &side : nullptr, me == 1 ? &side : nullptr, barrier);
  }
  barrier();
  return rc;
}

}  // namespace gicomm::dissect
