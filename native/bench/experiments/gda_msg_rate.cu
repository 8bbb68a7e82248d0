// gda_msg_rate: mini-gda's message rate: 8-byte writes from `blocks` CTAs of `threads` threads over
// `qps` queues, `batch` WQEs per doorbell, each mode a way to publish (parameters: its YAML):
//   thread   each thread owns a QP (qps = blocks x threads)
//   lock     threads share a QP, a doorbell lock per batch
//   handoff  threads share a QP: slot reservation, in-order ready-head hand-off
//   warp     a warp publishes cooperatively
//   hybrid   each thread owns a QP; the GPU writes WQEs and the dbrec, a host thread rings
// completion: each thread waits on the QP it used, or on every QP of the context. One warm-up
// launch of a tenth of the WQEs, then min(--iters, 5) launches timed with CUDA events, each of
// `wqes` WQEs in all; msg_rate (Mmsg/s) per launch. The rate kernels use the GPU-scope fence
// (gda_one_op measures what each variant costs); every QP's last CQE is checked after the run.
#include <algorithm>

#include "gda.cuh"

using namespace gicomm;
using namespace gicomm::gda;

namespace gicomm::bench {

namespace {

enum Mode { kThread, kLock, kHandoff, kWarp, kHybrid };

template <class Order, int M, bool kInline>
__global__ void rate_kernel(Context ctx, GdaTarget tg, uint32_t ops, uint32_t batch, bool all_qps, uint32_t slots) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t total = gridDim.x * blockDim.x;
  const uint64_t* src = reinterpret_cast<const uint64_t*>(tg.src);
  auto make = [&](uint32_t j) {
    const uint64_t slot = (uint64_t(t) * 7919u + j) % slots;
    return put_op(tg, tg.dst + 8 * slot, reinterpret_cast<uint64_t>(src + (slot & 4095)), 8, kInline, slot);
  };
  if (M == kThread || M == kHybrid) {
    DeviceQp* qp = &ctx.qps[t];
    if (M == kThread) {
      ThreadQp tq(qp);
      for (uint32_t j = 0; j < ops; ++j)
        if (!tq.put<Order>(ctx, make(j), (j % batch) == batch - 1 || j + 1 == ops)) return;
      tq.flush();
    } else {
      HybridThreadQp hq(qp);
      for (uint32_t j = 0; j < ops; ++j)
        if (!hq.put(ctx, make(j), (j % batch) == batch - 1 || j + 1 == ops)) return;
      hq.t.flush();
    }
  } else {
    const uint32_t qpi = static_cast<uint32_t>((uint64_t(t) * ctx.num_qps) / total);
    DeviceQp* qp = &ctx.qps[qpi];
    if (M == kWarp) {
      for (uint32_t j = 0; j < ops; ++j)
        if (!put_warp<Order>(ctx, *qp, make(j))) return;
    } else {
      PutOp list[16];
      for (uint32_t j = 0; j < ops;) {
        const uint32_t n = min(batch, ops - j);
        for (uint32_t k = 0; k < n; ++k) list[k] = make(j + k);
        const bool ok = M == kLock ? put_locked<Order>(ctx, *qp, list, n) : put_handoff<Order>(ctx, *qp, list, n);
        if (!ok) return;
        j += n;
      }
    }
  }
  // Completion scope: the QP this thread used, or every QP of the context.
  if (all_qps) {
    quiet_all(ctx);
  } else {
    quiet_qp(ctx, (M == kThread || M == kHybrid) ? ctx.qps[t]
                                                 : ctx.qps[static_cast<uint32_t>((uint64_t(t) * ctx.num_qps) / total)]);
  }
}

// Instantiating the seven ordering variants would multiply build time by seven: gpu_fence only.
template <int M>
void launch_rate(bool inl, int blocks, int threads, const Context& ctx, const GdaTarget& tg, uint32_t ops,
                 uint32_t batch, bool all, uint32_t slots) {
  using P = order::GpuFence;
  if (inl) {
    rate_kernel<P, M, true><<<blocks, threads>>>(ctx, tg, ops, batch, all, slots);
  } else {
    rate_kernel<P, M, false><<<blocks, threads>>>(ctx, tg, ops, batch, all, slots);
  }
}

std::vector<Record> gda_msg_rate(Run& run) {
  const std::string mode = run.param<std::string>("mode");
  const int blocks = run.param<int>("blocks");
  const int threads = run.param<int>("threads");
  const uint32_t qps = run.param<uint32_t>("qps");
  const uint32_t batch = run.param<uint32_t>("batch");
  const bool inl = run.param<std::string>("payload") == "inline";
  const bool all = run.param<std::string>("completion") == "all";
  const uint64_t wqes = run.param<uint64_t>("wqes");
  const int m = mode == "thread" ? kThread : mode == "lock" ? kLock : mode == "handoff" ? kHandoff
              : mode == "warp"   ? kWarp   : kHybrid;
  const uint64_t total_threads = uint64_t(blocks) * threads;
  if ((m == kThread || m == kHybrid) && qps != total_threads)
    throw PointFailure("bad parameter: mode " + mode + " gives each thread its own QP: qps must equal blocks*threads");
  if ((m == kLock || m == kHandoff) && batch > 16) throw PointFailure("bad parameter: batch must be 1..16 for lock/handoff");
  gda::SessionConfig cfg = gda_config(run, qps);
  cfg.hybrid = m == kHybrid;
  cfg.sq_wqebbs = 1024;
  if (cfg.hybrid) run.doorbell_target = "pinned-host";  // the GPU publishes the dbrec, a host thread rings
  GdaRig& rig = GdaRig::reuse(cfg, gda_memory(8u << 20));
  const uint32_t slots = (8u << 20) / 8;
  const Context ctx = rig.context();
  const GdaTarget tg = rig.target();
  uint32_t ops = static_cast<uint32_t>(std::max<uint64_t>(1, wqes / total_threads));
  if (m == kWarp) ops = std::max<uint32_t>(1, ops);
  auto launch = [&](uint32_t n) {
    switch (m) {
      case kThread: launch_rate<kThread>(inl, blocks, threads, ctx, tg, n, batch, all, slots); break;
      case kLock: launch_rate<kLock>(inl, blocks, threads, ctx, tg, n, batch, all, slots); break;
      case kHandoff: launch_rate<kHandoff>(inl, blocks, threads, ctx, tg, n, batch, all, slots); break;
      case kWarp: launch_rate<kWarp>(inl, blocks, threads, ctx, tg, n, batch, all, slots); break;
      default: launch_rate<kHybrid>(inl, blocks, threads, ctx, tg, n, batch, all, slots); break;
    }
  };
  launch(std::max<uint32_t>(1, ops / 10));  // warm-up
  rig.check("rate warm-up");
  const std::vector<double> rates = rates_of(
      event_timed_ms(std::max(1, std::min(run.iters(), 5)), [&] { launch(ops); }, [&] { rig.check("rate kernel"); }),
      double(ops) * total_threads);
  // Protocol check of the run: every QP's collapsed CQE names its last WQE.
  rig.check_last_cqes("rate check");
  Record r = Record::ok("msg_rate", "Mmsg/s", compute_stats(rates));
  r.sm_clock_mhz = measure_sm_clock_mhz(200000);
  return {r};
}

}  // namespace

GICOMM_EXPERIMENT(gda_msg_rate, gda_msg_rate);

}  // namespace gicomm::bench
