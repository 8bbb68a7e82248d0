// inline_payload (the paper's Fig. 3): one RDMA write of `size` bytes, its payload inline in the
// WQE (up to mlx5::kMaxInlineRc = 220 B, four WQEBBs) or read by the NIC through a pointer
// (parameters: its YAML). Per point:
//   issue_cycles, issue_ns, completion_ns: one op on QP 0, one thread, at most one outstanding (as
//     gda_one_op): --warmup ops, then --iters timed ops in one kernel;
//   msg_rate (Mmsg/s): `qps` CTAs of one thread, each owning its QP, `batch` WQEs per doorbell
//     (gda_msg_rate's thread mode): a warm-up launch of a tenth, then min(--iters, 3) timed ones.
// 8 B inline carries the value from a register (as NVSHMEM's p); larger inline payloads are copied
// from the source buffer into the WQE by the thread. GPU-scope fence ordering.
#include <algorithm>
#include <cstring>

#include "gda.cuh"
#include "gicomm/mlx5/wqe.h"

using namespace gicomm;
using namespace gicomm::gda;

namespace gicomm::bench {

namespace {

constexpr uint32_t kSlot = 256;  // destination and source stride of sized payloads
using Fence = order::GpuFence;

// WQEBBs of one put of `size` bytes (pointer: ds 3; 8 B inline: ds 3; larger inline: ds 2 + inline).
uint32_t wqebbs_of_put(uint32_t size, bool inl) {
  if (!inl || size == 8) return 1;
  return mlx5::wqebbs_of_ds(2 + mlx5::inline_seg_ds(size));
}

template <bool kInline>
__global__ void sized_one_op_kernel(Context ctx, GdaTarget tg, uint32_t size, int warmup, int iters,
                                    TimedOut* out) {
  ThreadQp tq(&ctx.qps[0]);
  const ClockSample s0 = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    const uint64_t value = 0x1000 + static_cast<uint64_t>(i + warmup);
    uint8_t* src = reinterpret_cast<uint8_t*>(tg.src) + kSlot * (i & 63);
    // The payload's first 8 bytes change every op (pointer payloads are read by the NIC, inline
    // payloads > 8 B are copied into the WQE by write_put); written before the op, as gda_one_op.
    if (!kInline || size > 8) *reinterpret_cast<uint64_t*>(src) = value;
    const PutOp op = put_op(tg, tg.dst + kSlot * (i & 255), reinterpret_cast<uint64_t>(src), size, kInline, value);
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

template <bool kInline>
__global__ void sized_rate_kernel(Context ctx, GdaTarget tg, uint32_t size, uint32_t ops,
                                  uint32_t batch, uint32_t slots) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  ThreadQp tq(&ctx.qps[t]);
  for (uint32_t j = 0; j < ops; ++j) {
    const uint64_t slot = (uint64_t(t) * 7919u + j) % slots;
    const PutOp op = put_op(tg, tg.dst + kSlot * slot, tg.src + kSlot * (slot & 127), size, kInline, slot);
    if (!tq.put<Fence>(ctx, op, (j % batch) == batch - 1 || j + 1 == ops)) return;
  }
  if (tq.quiet(ctx)) tq.flush();
}

std::vector<Record> inline_payload(Run& run) {
  const bool inl = run.param<std::string>("payload") == "inline";
  const uint32_t sz = run.param<uint32_t>("size");
  const uint32_t max_size = inl ? mlx5::kMaxInlineRc : kSlot;
  if (sz > max_size)
    throw PointFailure("bad parameter: size " + std::to_string(sz) + " B: a" + (inl ? "n inline" : " pointer") +
                       " payload here is 1.." + std::to_string(max_size) + " B" +
                       (inl ? " (mlx5::kMaxInlineRc, 4 WQEBBs)" : ""));
  const uint32_t qps = run.param<uint32_t>("qps");
  const uint32_t batch = run.param<uint32_t>("batch");
  const uint64_t wqes = run.param<uint64_t>("wqes");
  gda::SessionConfig cfg = gda_config(run, qps);
  cfg.sq_wqebbs = 1024;
  const size_t dst_bytes = 8u << 20;
  GdaRig& rig = GdaRig::reuse(cfg, gda_memory(dst_bytes));
  const Context ctx = rig.context();
  const GdaTarget tg = rig.target();
  const uint32_t nbb = wqebbs_of_put(sz, inl);

  // One op on QP 0.
  const int iters = run.iters(), warmup = run.warmup();
  const Timed t = run_timed(rig, iters, "inline_payload one-op kernel", [&](TimedOut* d_out) {
    if (inl) {
      sized_one_op_kernel<true><<<1, 1>>>(ctx, tg, sz, warmup, iters, d_out);
    } else {
      sized_one_op_kernel<false><<<1, 1>>>(ctx, tg, sz, warmup, iters, d_out);
    }
  });
  // Check the last op's payload landed whole: destination slot == source slot (or the 8-byte value).
  {
    const int last = iters - 1;
    std::vector<uint8_t> got(sz), want(sz);
    rig.dst().copy_out(size_t(kSlot) * (last & 255), got.data(), sz);
    if (inl && sz == 8) {
      const uint64_t value = 0x1000 + static_cast<uint64_t>(last + warmup);
      std::memcpy(want.data(), &value, 8);
    } else {
      rig.src().copy_out(size_t(kSlot) * (last & 63), want.data(), sz);
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
      sized_rate_kernel<true><<<qps, 1>>>(ctx, tg, sz, n, batch, slots);
    } else {
      sized_rate_kernel<false><<<qps, 1>>>(ctx, tg, sz, n, batch, slots);
    }
  };
  launch(std::max<uint32_t>(1, ops / 10));  // warm-up
  rig.check("inline_payload rate warm-up");
  const std::vector<double> rates =
      rates_of(event_timed_ms(std::max(1, std::min(iters, 3)), [&] { launch(ops); },
                              [&] { rig.check("inline_payload rate kernel"); }),
               double(ops) * qps);
  // Every QP's collapsed CQE names its last WQE (multi-WQEBB WQEs: the index of the last one's
  // first WQEBB), and quiet's frontier reached the producer index exactly.
  rig.check_last_cqes("rate check", nbb);
  rig.check_heads_meet("rate check");
  Record r = Record::ok("msg_rate", "Mmsg/s", compute_stats(rates));
  r.sm_clock_mhz = measure_sm_clock_mhz(200000);
  out.push_back(r);
  return out;
}

}  // namespace

GICOMM_EXPERIMENT(inline_payload, inline_payload);

}  // namespace gicomm::bench
