// The NVLink dissection's host side for one path: what a point asks (Spec, checked against the
// experiment's declarations), the metrics, and the Dissector that runs the measurement kernels of
// nvlink/dissect_kernels.cuh on the current device and turns what they wrote into records.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/harness.h"
#include "nvlink/dissect_kernels.cuh"

namespace gicomm::dissect {

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
// The point's values are checked against the experiment's declared parameters first (its YAML),
// so the reads below meet only declared types; what is left are the checks across parameters.
inline std::string spec_of(const gicomm::bench::Point& p, const gicomm::bench::Options& o, Spec* s) try {
  if (const gicomm::bench::ExperimentSpec* e = gicomm::bench::find_experiment_spec(o.experiment)) {
    std::string bad;
    for (const std::string& why : gicomm::bench::point_problems(*e, p.params, p.transport))
      bad += (bad.empty() ? "" : "; ") + why;
    if (!bad.empty()) return bad;
  }
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
} catch (const std::exception& e) {
  return e.what();
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

}  // namespace gicomm::dissect
