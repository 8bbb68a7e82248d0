// gicomm-bench-gda: the experiments behind the paper's Fig. 3, 4, 5 and 10 (issue 5, items 3-5
// and 11). Point params and records:
//
//   inline_payload    payload (inline|pointer), size (bytes; inline 1..kMaxInlineRc = 220, pointer
//                     1..256), optional qps (16), batch (16), wqes (1,600,000 in all)
//                     -> issue_cycles, issue_ns, completion_ns: one op of `size` bytes on QP 0, one
//                        thread, at most one outstanding (as gda_one_op);
//                        msg_rate (Mmsg/s): `qps` CTAs of one thread, each owning its QP, `batch`
//                        WQEs per doorbell (gda_msg_rate's thread mode, blocks = qps = 16).
//                     8 B inline carries the value in the WQE from a register (as NVSHMEM's p); larger
//                     inline payloads are copied from the source buffer into the WQE by the thread.
//   completion_scope  qps_per_peer (1..64), scope (all|used), optional post (round_robin|first)
//                     -> completion_ns (and issue_ns): one thread posts one 8-byte inline write, on
//                        QP i mod qps_per_peer for op i (round_robin, the default) or always on QP 0
//                        (first), then waits with quiet_qp on that QP (used) or quiet_all over every
//                        QP of the context (all). Both scopes run the same code up to the wait.
//   sm_clock          clock (observed), payload (inline|pointer), optional variant
//                     -> issue_cycles, issue_ns, completion_ns of gda_one_op's one op, each with the
//                        sm_clock_mhz measured in the kernel. The driver never changes clocks:
//                        `observed` (the clock the GPU runs at) is the only value; a fit of
//                        T = C/f + B needs several clocks, i.e. a platform that permits locking them
//                        and a driver mode that does it, neither of which exists here.
//   connection_scaling  active_qps (1..), writes_per_visit (1..), direction (send_recv), optional
//                     size (8: inline; 16..4096: pointer), producers (64)
//                     -> msg_rate (Mmsg/s), goodput_gbps (GB/s): min(producers, active_qps) threads,
//                        each owning the QPs q = its index + k * producers, visit their QPs
//                        round-robin and post `writes_per_visit` writes of `size` bytes per visit (a
//                        doorbell every 16 WQEs and at the visit's end), as the paper's Fig. 10
//                        all-active pattern. The
//                        writes land in this host's own registered memory, so on a NIC every write
//                        is both a send and a receive of the same NIC (loopback RC QPs: direction
//                        send_recv; send-only needs a second node and is refused). What the
//                        experiment studies is the NIC's connection-context cache: on the softnic it
//                        measures only the model NIC's polling of many doorbells, so the experiment's
//                        config asks for an RDMA NIC and the pipeline runs it on the mlx5 backend only.
// All use the GPU-scope fence ordering (order::GpuFence) for the rate and scope kernels.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "driver.h"
#include "gicomm/common/clock.cuh"
#include "gicomm/gda/gda.cuh"
#include "gicomm/mlx5/cqe.h"
#include "gicomm/mlx5/wqe.h"

using namespace gicomm;
using namespace gicomm::gda;
using gicomm::bench::PointFailure;
using gicomm::bench::Record;

namespace gicomm::bench_gda {
namespace {

constexpr uint32_t kSlot = 256;  // destination and source stride of sized payloads
using Fence = order::GpuFence;

// WQEBBs of one put of `size` bytes (pointer: ds 3; 8 B inline: ds 3; larger inline: ds 2 + inline).
uint32_t wqebbs_of_put(uint32_t size, bool inl) {
  if (!inl || size == 8) return 1;
  return mlx5::wqebbs_of_ds(2 + mlx5::inline_seg_ds(size));
}

__device__ __forceinline__ PutOp sized_op(const Target& t, uint64_t raddr, uint64_t laddr, uint32_t size, bool inl,
                                          uint64_t value) {
  PutOp op{};
  op.raddr = raddr;
  op.rkey = t.rkey;
  op.laddr = laddr;
  op.lkey = t.lkey;
  op.length = size;
  op.inline_data = inl;
  op.value = value;
  return op;
}

struct TimedOut {
  long long* issue;
  long long* complete;
  ClockSample start, end;
};

// ---- Fig. 3: one op of `size` bytes ------------------------------------------------------------------
template <bool kInline>
__global__ void sized_one_op_kernel(Context ctx, Target tg, uint32_t size, int warmup, int iters,
                                    TimedOut* out) {
  ThreadQp tq(&ctx.qps[0]);
  const ClockSample s0 = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    const uint64_t value = 0x1000 + static_cast<uint64_t>(i + warmup);
    uint8_t* src = reinterpret_cast<uint8_t*>(tg.src) + kSlot * (i & 63);
    // The payload's first 8 bytes change every op (pointer payloads are read by the NIC, inline
    // payloads > 8 B are copied into the WQE by write_put); written before the op, as gda_one_op.
    if (!kInline || size > 8) *reinterpret_cast<uint64_t*>(src) = value;
    const PutOp op = sized_op(tg, tg.dst + kSlot * (i & 255), reinterpret_cast<uint64_t>(src), size, kInline, value);
    const long long t0 = clock64();
    if (!tq.put<Fence>(ctx, op, true)) break;
    const long long t1 = clock64();
    if (!tq.quiet(ctx)) break;
    const long long t2 = clock64();
    if (i >= 0) {
      out->issue[i] = t1 - t0;
      out->complete[i] = t2 - t0;
    }
  }
  tq.flush();
  out->start = s0;
  out->end = clock_sample();
}

// ---- Fig. 3: message rate, one thread per QP, `batch` WQEs per doorbell ---------------------------------
template <bool kInline>
__global__ void sized_rate_kernel(Context ctx, Target tg, uint32_t size, uint32_t ops,
                                  uint32_t batch, uint32_t slots) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  ThreadQp tq(&ctx.qps[t]);
  for (uint32_t j = 0; j < ops; ++j) {
    const uint64_t slot = (uint64_t(t) * 7919u + j) % slots;
    const PutOp op = sized_op(tg, tg.dst + kSlot * slot, tg.src + kSlot * (slot & 127), size, kInline, slot);
    if (!tq.put<Fence>(ctx, op, (j % batch) == batch - 1 || j + 1 == ops)) return;
  }
  if (tq.quiet(ctx)) tq.flush();
}

// ---- Fig. 4: one op, then a used-QP or an all-QP quiet ----------------------------------------------------
template <bool kAll>
__global__ void scope_kernel(Context ctx, Target tg, bool round_robin, int warmup, int iters, TimedOut* out) {
  const ClockSample s0 = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    const uint32_t q = round_robin ? static_cast<uint32_t>(i + warmup) % ctx.num_qps : 0u;
    DeviceQp* qp = &ctx.qps[q];
    ThreadQp tq(qp);
    // The heads as the last quiet left them (quiet_qp publishes cons_head with atomicMax).
    tq.pi = *reinterpret_cast<volatile unsigned long long*>(&qp->resv_head);
    tq.cons = *reinterpret_cast<volatile unsigned long long*>(&qp->cons_head);
    const uint64_t value = 0x1000 + static_cast<uint64_t>(i + warmup);
    const PutOp op = sized_op(tg, tg.dst + 8 * (i & 255), tg.src, 8, true, value);
    const long long t0 = clock64();
    if (!tq.put<Fence>(ctx, op, true)) break;
    const long long t1 = clock64();
    tq.flush();  // the QP's heads to memory, where quiet_qp / quiet_all read them
    const bool ok = kAll ? quiet_all(ctx) : quiet_qp(ctx, *qp);
    const long long t2 = clock64();
    if (!ok) break;
    if (i >= 0) {
      out->issue[i] = t1 - t0;
      out->complete[i] = t2 - t0;
    }
  }
  out->start = s0;
  out->end = clock_sample();
}

// ---- Fig. 10: many active connections, visited round-robin --------------------------------------------
__global__ void connections_kernel(Context ctx, Target tg, uint32_t producers, uint32_t visits, uint32_t writes,
                                   uint32_t size, uint32_t slots) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= producers) return;
  const uint32_t owned = (ctx.num_qps - t + producers - 1) / producers;  // QPs t, t+P, t+2P, ...
  for (uint32_t v = 0; v < visits; ++v) {
    const uint32_t q = t + (v % owned) * producers;
    ThreadQp tq(&ctx.qps[q]);
    for (uint32_t i = 0; i < writes; ++i) {
      const uint64_t slot = (uint64_t(q) * 131u + i) % slots;
      PutOp op{};
      op.raddr = tg.dst + uint64_t(size) * slot;
      op.rkey = tg.rkey;
      op.laddr = tg.src;
      op.lkey = tg.lkey;
      op.length = size;
      op.inline_data = size == 8;
      op.value = (uint64_t(q) << 32) | v;
      if (!tq.put<Fence>(ctx, op, (i % 16) == 15 || i + 1 == writes)) return;
    }
    tq.flush();
  }
  for (uint32_t q = t; q < ctx.num_qps; q += producers)
    if (!quiet_qp(ctx, ctx.qps[q])) return;
}

// Runs `launch(d_out)` (one kernel filling issue/complete for `iters` ops) and returns the samples
// in cycles and the kernel's SM clock.
struct Timed {
  std::vector<long long> issue, complete;
  double mhz = 0;
};
template <class F>
Timed run_timed(Env& env, int iters, const char* what, F&& launch) {
  long long *d_issue, *d_complete;
  TimedOut* d_out;
  CUDA(cudaMalloc(&d_issue, sizeof(long long) * iters));
  CUDA(cudaMalloc(&d_complete, sizeof(long long) * iters));
  CUDA(cudaMalloc(&d_out, sizeof(TimedOut)));
  CUDA(cudaMemset(d_issue, 0, sizeof(long long) * iters));
  CUDA(cudaMemset(d_complete, 0, sizeof(long long) * iters));
  TimedOut h{d_issue, d_complete, {}, {}};
  CUDA(cudaMemcpy(d_out, &h, sizeof h, cudaMemcpyHostToDevice));
  launch(d_out);
  Timed t;
  t.issue.resize(iters);
  t.complete.resize(iters);
  try {
    check_kernel(env, what);
    CUDA(cudaMemcpy(t.issue.data(), d_issue, sizeof(long long) * iters, cudaMemcpyDeviceToHost));
    CUDA(cudaMemcpy(t.complete.data(), d_complete, sizeof(long long) * iters, cudaMemcpyDeviceToHost));
    CUDA(cudaMemcpy(&h, d_out, sizeof h, cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(d_issue);
    cudaFree(d_complete);
    cudaFree(d_out);
    throw;
  }
  cudaFree(d_issue);
  cudaFree(d_complete);
  cudaFree(d_out);
  t.mhz = sm_clock_mhz(h.start, h.end);
  if (!(t.mhz > 100)) throw PointFailure("implausible SM clock " + std::to_string(t.mhz) + " MHz");
  return t;
}

Record timed_record(const char* metric, const char* unit, const std::vector<double>& v, double mhz) {
  Record r = Record::ok(metric, unit, bench::compute_stats(v));
  r.sm_clock_mhz = mhz;
  return r;
}

void copy_from(const Buffer& b, size_t offset, void* dst, size_t n) {
  CUDA(cudaMemcpy(dst, static_cast<const uint8_t*>(b.p) + offset, n, cudaMemcpyDefault));
}

}  // namespace

std::vector<Record> inline_payload(const bench::Point& p, const bench::Options& o) {
  const std::string payload = p.params.get_string("payload", "inline");
  if (payload != "inline" && payload != "pointer") throw PointFailure("payload must be inline or pointer");
  const bool inl = payload == "inline";
  const long long size = p.params.get_int("size", 8);
  const long long max_size = inl ? mlx5::kMaxInlineRc : kSlot;
  if (size < 1 || size > max_size)
    throw PointFailure("size " + std::to_string(size) + " B: a" + (inl ? "n inline" : " pointer") +
                       " payload here is 1.." + std::to_string(max_size) + " B" +
                       (inl ? " (mlx5::kMaxInlineRc, 4 WQEBBs)" : ""));
  const uint32_t qps = static_cast<uint32_t>(p.params.get_int("qps", 16));
  const uint32_t batch = static_cast<uint32_t>(p.params.get_int("batch", 16));
  const uint64_t wqes = static_cast<uint64_t>(p.params.get_int("wqes", 1600000));
  if (qps < 1 || qps > 528) throw PointFailure("qps must be 1..528");
  if (batch < 1 || batch > 256) throw PointFailure("batch must be 1..256");
  if (order::Variant v = variant_of(p); v != order::Variant::gpu_fence)
    throw PointFailure("inline_payload is built for variant gpu_fence only");
  SessionConfig cfg = base_config(o, qps);
  cfg.sq_wqebbs = 1024;
  const size_t dst_bytes = 8u << 20;
  Env& env = env_for(cfg, dst_bytes);
  const Context ctx = env.session->context();
  const uint32_t sz = static_cast<uint32_t>(size);
  const uint32_t nbb = wqebbs_of_put(sz, inl);

  // One op on QP 0.
  const int iters = o.iters;
  const Timed t = run_timed(env, iters, "inline_payload one-op kernel", [&](TimedOut* d_out) {
    if (inl) {
      sized_one_op_kernel<true><<<1, 1>>>(ctx, env.tg, sz, o.warmup, iters, d_out);
    } else {
      sized_one_op_kernel<false><<<1, 1>>>(ctx, env.tg, sz, o.warmup, iters, d_out);
    }
  });
  // Check the last op's payload landed whole: destination slot == source slot (or the 8-byte value).
  {
    const int last = iters - 1;
    std::vector<uint8_t> got(sz), want(sz);
    copy_from(*env.dst, size_t(kSlot) * (last & 255), got.data(), sz);
    if (inl && sz == 8) {
      const uint64_t value = 0x1000 + static_cast<uint64_t>(last + o.warmup);
      std::memcpy(want.data(), &value, 8);
    } else {
      copy_from(*env.src, size_t(kSlot) * (last & 63), want.data(), sz);
    }
    if (got != want) throw PointFailure("one-op payload check: the last " + std::to_string(sz) + "-byte write differs");
  }
  std::vector<Record> out;
  out.push_back(timed_record("issue_cycles", "cycles", to_d(t.issue), t.mhz));
  out.push_back(timed_record("issue_ns", "ns", to_ns(t.issue, t.mhz), t.mhz));
  out.push_back(timed_record("completion_ns", "ns", to_ns(t.complete, t.mhz), t.mhz));

  // Message rate: qps CTAs of one thread, each on its own QP.
  const uint32_t slots = static_cast<uint32_t>(dst_bytes / kSlot);
  const uint32_t ops = static_cast<uint32_t>(std::max<uint64_t>(1, wqes / qps));
  auto launch = [&](uint32_t n) {
    if (inl) {
      sized_rate_kernel<true><<<qps, 1>>>(ctx, env.tg, sz, n, batch, slots);
    } else {
      sized_rate_kernel<false><<<qps, 1>>>(ctx, env.tg, sz, n, batch, slots);
    }
  };
  launch(std::max<uint32_t>(1, ops / 10));  // warm-up
  check_kernel(env, "inline_payload rate warm-up");
  const std::vector<double> rates = timed_rates(env, std::max(1, std::min(o.iters, 3)), double(ops) * qps,
                                                "inline_payload rate kernel", [&] { launch(ops); });
  // Every QP's collapsed CQE names its last WQE (multi-WQEBB WQEs: the index of the last one's first WQEBB).
  const auto now = env.session->read_qps();
  for (uint32_t i = 0; i < qps; ++i) {
    mlx5::Cqe64 cqe;
    CUDA(cudaMemcpy(&cqe, now[i].cqe, sizeof cqe, cudaMemcpyDefault));
    const mlx5::CqeFields f = mlx5::decode_cqe(cqe);
    const uint16_t want = static_cast<uint16_t>(now[i].resv_head - nbb);
    if (f.opcode != mlx5::kCqeReq || f.wqe_counter != want)
      throw PointFailure("rate check: QP " + std::to_string(i) + " last CQE counter " + std::to_string(f.wqe_counter) +
                         ", expected " + std::to_string(want));
    // quiet's frontier reached the producer index exactly (a WQE of nbb WQEBBs is complete as a whole).
    if (now[i].cons_head != now[i].resv_head)
      throw PointFailure("rate check: QP " + std::to_string(i) + " quiet ended at WQEBB " +
                         std::to_string(now[i].cons_head) + ", producer at " + std::to_string(now[i].resv_head));
  }
  Record r = Record::ok("msg_rate", "Mmsg/s", bench::compute_stats(rates));
  r.sm_clock_mhz = probe_sm_clock_mhz();
  out.push_back(r);
  return out;
}

std::vector<Record> completion_scope(const bench::Point& p, const bench::Options& o) {
  const long long qpp = p.params.get_int("qps_per_peer", 1);
  if (qpp < 1 || qpp > 64) throw PointFailure("qps_per_peer must be 1..64");
  const std::string scope = p.params.get_string("scope", "used");
  if (scope != "all" && scope != "used") throw PointFailure("scope must be all or used");
  const std::string post = p.params.get_string("post", "round_robin");
  if (post != "round_robin" && post != "first") throw PointFailure("post must be round_robin or first");
  if (p.params.get_int("size", 8) != 8) throw PointFailure("completion_scope measures 8-byte writes only");
  if (p.params.get_string("payload", "inline") != "inline") throw PointFailure("completion_scope posts inline payloads only");
  SessionConfig cfg = base_config(o, static_cast<uint32_t>(qpp));
  Env& env = env_for(cfg, 1 << 20);
  const Context ctx = env.session->context();
  const bool rr = post == "round_robin";
  const Timed t = run_timed(env, o.iters, "completion_scope kernel", [&](TimedOut* d_out) {
    if (scope == "all") {
      scope_kernel<true><<<1, 1>>>(ctx, env.tg, rr, o.warmup, o.iters, d_out);
    } else {
      scope_kernel<false><<<1, 1>>>(ctx, env.tg, rr, o.warmup, o.iters, d_out);
    }
  });
  // Every op of the run completed: each QP's heads agree and its CQE names its last WQE.
  const auto now = env.session->read_qps();
  for (uint32_t i = 0; i < ctx.num_qps; ++i) {
    if (now[i].resv_head == 0) continue;
    mlx5::Cqe64 cqe;
    CUDA(cudaMemcpy(&cqe, now[i].cqe, sizeof cqe, cudaMemcpyDefault));
    const mlx5::CqeFields f = mlx5::decode_cqe(cqe);
    if (f.opcode != mlx5::kCqeReq || f.wqe_counter != uint16_t(now[i].resv_head - 1))
      throw PointFailure("scope check: QP " + std::to_string(i) + " last CQE counter " + std::to_string(f.wqe_counter) +
                         ", expected " + std::to_string(uint16_t(now[i].resv_head - 1)));
  }
  return {timed_record("issue_ns", "ns", to_ns(t.issue, t.mhz), t.mhz),
          timed_record("completion_ns", "ns", to_ns(t.complete, t.mhz), t.mhz)};
}

std::vector<Record> sm_clock(const bench::Point& p, const bench::Options& o) {
  const std::string clock = p.params.get_string("clock", "observed");
  if (clock != "observed")
    throw PointFailure("clock=" + clock +
                       ": gicomm-bench-gda does not lock SM clocks; it measures the clock the GPU runs at "
                       "(clock=observed). Locking needs a platform that permits it and is not implemented.");
  std::vector<Record> out;
  for (Record& r : one_op(p, o))
    if (r.metric == "issue_cycles" || r.metric == "issue_ns" || r.metric == "completion_ns") out.push_back(r);
  return out;
}

std::vector<Record> connection_scaling(const bench::Point& p, const bench::Options& o) {
  const long long connections = p.params.get_int("active_qps", 64);
  const std::string direction = p.params.get_string("direction", "send_recv");
  if (direction != "send_recv")
    throw PointFailure("direction " + direction +
                       ": only send_recv (loopback QPs of one NIC) is implemented; send-only needs a second node");
  const long long size = p.params.get_int("size", 8);
  if (size != 8 && (size < 16 || size > 4096))
    throw PointFailure("size must be 8 (inline) or 16..4096 (pointer), not " + std::to_string(size));
  const long long writes = p.params.get_int("writes_per_visit", 32);
  const long long producers_param = p.params.get_int("producers", 64);
  if (connections < 1) throw PointFailure("active_qps must be at least 1, not " + std::to_string(connections));
  if (writes < 1 || writes > 1000000)
    throw PointFailure("writes_per_visit must be 1..1000000, not " + std::to_string(writes));
  if (producers_param < 1 || producers_param > 4096)
    throw PointFailure("producers must be 1..4096, not " + std::to_string(producers_param));
  SessionConfig cfg = base_config(o, 1);
  if (cfg.engine != "mlx5" && connections > softnic::SoftNic::kMaxQps)
    throw PointFailure("active_qps " + std::to_string(connections) + ": the softnic serves at most " +
                       std::to_string(softnic::SoftNic::kMaxQps) + " QPs");
  cfg.num_qps = static_cast<uint32_t>(connections);
  cfg.sq_wqebbs = 64;  // 16-WQE doorbells; thousands of queues
  const uint32_t producers = static_cast<uint32_t>(std::min(producers_param, connections));
  const size_t dst_bytes = 64u << 20;
  Env& env = env_for(cfg, dst_bytes);
  const Context ctx = env.session->context();
  const uint32_t slots = static_cast<uint32_t>(dst_bytes / size);
  // Every QP is visited the same number of times: visits per producer = (its QPs) x rounds; enough
  // writes in all (>= 2 M, >= 4 rounds over every connection) that the start and end are noise.
  const uint64_t per_round = static_cast<uint64_t>(connections) * static_cast<uint64_t>(writes);
  const uint32_t rounds = static_cast<uint32_t>(std::max<uint64_t>(4, (2000000 + per_round - 1) / per_round));
  const uint32_t owned_max = static_cast<uint32_t>((connections + producers - 1) / producers);
  const uint32_t visits = owned_max * rounds;
  const uint32_t block = std::min<uint32_t>(producers, 64);
  const uint32_t grid = (producers + block - 1) / block;
  auto launch = [&](uint32_t v) {
    connections_kernel<<<grid, block>>>(ctx, env.tg, producers, v, static_cast<uint32_t>(writes),
                                        static_cast<uint32_t>(size), slots);
  };
  launch(owned_max);  // warm-up: every connection visited once
  check_kernel(env, "connection_scaling warm-up");
  // A producer owning fewer QPs (connections not a multiple of producers) makes as many visits
  // over fewer QPs: every producer posts visits x writes.
  const uint64_t total = uint64_t(producers) * visits * static_cast<uint64_t>(writes);
  const std::vector<double> rates = timed_rates(env, std::max(1, std::min(o.iters, 3)), double(total),
                                                "connection_scaling kernel", [&] { launch(visits); });
  // Every write completed: each QP's quiet reached its producer index.
  const auto now = env.session->read_qps();
  for (uint32_t i = 0; i < ctx.num_qps; ++i)
    if (now[i].cons_head != now[i].resv_head)
      throw PointFailure("connection check: QP " + std::to_string(i) + " complete to WQEBB " +
                         std::to_string(now[i].cons_head) + ", posted " + std::to_string(now[i].resv_head));
  std::vector<double> gbps(rates.size());
  for (size_t i = 0; i < rates.size(); ++i) gbps[i] = rates[i] * static_cast<double>(size) / 1e3;  // GB/s
  const double mhz = probe_sm_clock_mhz();
  Record r = Record::ok("msg_rate", "Mmsg/s", bench::compute_stats(rates));
  Record g = Record::ok("goodput_gbps", "GB/s", bench::compute_stats(gbps));
  r.sm_clock_mhz = g.sm_clock_mhz = mhz;
  return {r, g};
}

}  // namespace gicomm::bench_gda
