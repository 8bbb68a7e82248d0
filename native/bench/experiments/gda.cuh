// What the mini-gda experiments of gicomm-bench-gda share: the memory they register, the put they
// build, the conversions of their samples, and the one-op and round-trip measurements that
// one_op and sm_clock report too.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gicomm/common/clock.cuh"
#include "gicomm/gda/gda.cuh"
#include "gicomm/order.cuh"
#include "harness/cuda.h"
#include "harness/gda_rig.h"
#include "harness/harness.h"

namespace gicomm::bench {

constexpr size_t kSrcBytes = 4096 * 8;  // the registered source buffer

// Destination `dst_bytes` and the source, in the producer GPU's memory (pinned host memory for
// the cpu engine).
inline GdaMemory gda_memory(size_t dst_bytes) {
  GdaMemory m;
  m.dst_bytes = dst_bytes;
  m.src_bytes = kSrcBytes;
  return m;
}

#if defined(__CUDACC__)
// One RDMA write of `size` bytes to `raddr`: inline (the value, or the bytes at `laddr` when larger
// than 8) or read by the NIC from `laddr`.
__device__ __forceinline__ gda::PutOp put_op(const GdaTarget& t, uint64_t raddr, uint64_t laddr, uint32_t size,
                                             bool inl, uint64_t value) {
  gda::PutOp op{};
  op.raddr = raddr;
  op.rkey = t.rkey;
  op.laddr = laddr;
  op.lkey = t.lkey;
  op.length = size;
  op.inline_data = inl;
  op.value = value;
  return op;
}
#endif

inline std::vector<double> to_ns(const std::vector<long long>& cycles, double mhz) {
  std::vector<double> v(cycles.size());
  for (size_t i = 0; i < cycles.size(); ++i) v[i] = static_cast<double>(cycles[i]) * 1e3 / mhz;
  return v;
}
inline std::vector<double> to_d(const std::vector<long long>& x) { return std::vector<double>(x.begin(), x.end()); }

// Message rates (Mmsg/s) of launches that each posted `msgs` messages, from their event times.
inline std::vector<double> rates_of(const std::vector<float>& ms, double msgs) {
  std::vector<double> rates;
  for (float t : ms) rates.push_back(msgs / (t * 1e3));
  return rates;
}

inline Record timed_record(const char* metric, const char* unit, const std::vector<double>& v, double mhz) {
  Record r = Record::ok(metric, unit, compute_stats(v));
  r.sm_clock_mhz = mhz;
  return r;
}

// Per-op issue and put+completion cycles a one-op kernel writes, and its clock window.
struct TimedOut {
  long long* issue;
  long long* complete;
  ClockSample start, end;
};
struct Timed {
  std::vector<long long> issue, complete;
  double mhz = 0;
};
// Runs `launch(d_out)` (one kernel filling issue/complete for `iters` ops), checks it, and returns
// the samples in cycles with the kernel's SM clock.
template <class Launch>
Timed run_timed(GdaRig& rig, int iters, const char* what, Launch&& launch) {
  DeviceBuffer<long long> issue(iters), complete(iters);
  DeviceBuffer<TimedOut> d_out(1);
  TimedOut h{issue.p, complete.p, {}, {}};
  GICOMM_CUDA(cudaMemcpy(d_out.p, &h, sizeof h, cudaMemcpyHostToDevice));
  launch(d_out.p);
  rig.check(what);
  Timed t;
  t.issue = issue.read();
  t.complete = complete.read();
  GICOMM_CUDA(cudaMemcpy(&h, d_out.p, sizeof h, cudaMemcpyDeviceToHost));
  t.mhz = sm_clock_mhz(h.start, h.end);
  if (!(t.mhz > 100)) throw PointFailure("implausible SM clock " + std::to_string(t.mhz) + " MHz");
  return t;
}

// The point's ordering variant (parameter `variant`).
inline order::Variant variant_of(const Run& run) {
  order::Variant v;
  const std::string name = run.param<std::string>("variant");
  if (!order::variant_from_name(name.c_str(), &v)) throw PointFailure("unknown ordering variant " + name);
  return v;
}

#if defined(__CUDACC__)
// One op, timed in SM cycles: the put with its doorbell (`issue`) and through its completion
// (`complete`, from the same start); false when a bounded wait failed (the error report says why).
template <class Order>
__device__ __forceinline__ bool timed_put_quiet(gda::ThreadQp& tq, const gda::Context& ctx, const gda::PutOp& op,
                                                long long* issue, long long* complete) {
  const long long t0 = clock64();
  if (!tq.put<Order>(ctx, op, true)) return false;
  const long long t1 = clock64();
  if (!tq.quiet(ctx)) return false;
  *issue = t1 - t0;
  *complete = clock64() - t0;
  return true;
}

// The bare sequence under one op: the 48-byte WQE store + Order's fence + the 8-byte doorbell store
// into `wqe` (slot i of a 64-WQEBB ring: bare_wqe_slot) and `db`. The floors experiment also posts
// it back to back (the rate a GPU thread can post at with no NIC consuming).
__device__ __forceinline__ uint4* bare_wqe_slot(uint8_t* sq, int i) {
  return reinterpret_cast<uint4*>(sq + 64 * (i & 63));
}
template <class Order>
__device__ __forceinline__ void bare_sequence(uint4* wqe, uint64_t* db, int i) {
  wqe[0] = make_uint4(i, 1, 2, 3);
  wqe[1] = make_uint4(4, 5, 6, 7);
  wqe[2] = make_uint4(8, 9, 10, 11);
  Order::before_doorbell();
  Order::store_doorbell(db, static_cast<uint64_t>(i));
}

// The floor under one op, in SM cycles: the bare sequence, preceded by a pause that lets earlier
// stores drain. gda_one_op times it beside each op; the floors experiment into each kind of memory.
template <class Order>
__device__ __forceinline__ long long timed_bare_sequence(uint8_t* sq, uint64_t* db, int i) {
  spin_cycles(4000);
  uint4* wqe = bare_wqe_slot(sq, i);
  const long long t0 = clock64();
  bare_sequence<Order>(wqe, db, i);
  return clock64() - t0;
}
#endif

// gda_one_op's measurement (gda_one_op.cu): issue_cycles, issue_ns, completion_ns,
// floor_issue_cycles, floor_issue_ns, issue_over_floor of one 8-byte op.
std::vector<Record> measure_one_op(Run& run);
// gda_rtt's measurement (gda_rtt.cu): rtt_ns of an 8-byte ping-pong through the engine.
std::vector<Record> measure_rtt(Run& run);

}  // namespace gicomm::bench
