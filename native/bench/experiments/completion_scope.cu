// completion_scope (the paper's Fig. 4): one thread posts one 8-byte inline write, on QP
// i mod qps_per_peer for op i (post round_robin) or always on QP 0 (first), then waits with
// quiet_qp on that QP (scope used) or quiet_all over every QP of the context (all); at most one op
// outstanding. Both scopes run the same code up to the wait. issue_ns and completion_ns; --warmup
// ops, then --iters timed ops in one kernel. GPU-scope fence ordering.
#include "gda.cuh"

using namespace gicomm;
using namespace gicomm::gda;

namespace gicomm::bench {

namespace {

using Fence = order::GpuFence;

template <bool kAll>
__global__ void scope_kernel(Context ctx, GdaTarget tg, bool round_robin, int warmup, int iters, TimedOut* out) {
  const ClockSample s0 = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    const uint32_t q = round_robin ? static_cast<uint32_t>(i + warmup) % ctx.num_qps : 0u;
    DeviceQp* qp = &ctx.qps[q];
    ThreadQp tq(qp);
    // The heads as the last quiet left them (quiet_qp publishes cons_head with atomicMax).
    tq.pi = *reinterpret_cast<volatile unsigned long long*>(&qp->resv_head);
    tq.cons = *reinterpret_cast<volatile unsigned long long*>(&qp->cons_head);
    const uint64_t value = 0x1000 + static_cast<uint64_t>(i + warmup);
    const PutOp op = put_op(tg, tg.dst + 8 * (i & 255), tg.src, 8, true, value);
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

std::vector<Record> completion_scope(Run& run) {
  const uint32_t qpp = run.param<uint32_t>("qps_per_peer");
  const bool all = run.param<std::string>("scope") == "all";
  const bool rr = run.param<std::string>("post") == "round_robin";
  GdaRig& rig = GdaRig::reuse(gda_config(run, qpp), gda_memory(1 << 20));
  const Context ctx = rig.context();
  const GdaTarget tg = rig.target();
  const int warmup = run.warmup(), iters = run.iters();
  const Timed t = run_timed(rig, iters, "completion_scope kernel", [&](TimedOut* d_out) {
    if (all) {
      scope_kernel<true><<<1, 1>>>(ctx, tg, rr, warmup, iters, d_out);
    } else {
      scope_kernel<false><<<1, 1>>>(ctx, tg, rr, warmup, iters, d_out);
    }
  });
  // Every op of the run completed: each QP's CQE names its last WQE.
  rig.check_last_cqes("scope check");
  return {timed_record("issue_ns", "ns", to_ns(t.issue, t.mhz), t.mhz),
          timed_record("completion_ns", "ns", to_ns(t.complete, t.mhz), t.mhz)};
}

}  // namespace

GICOMM_EXPERIMENT(completion_scope, completion_scope);

}  // namespace gicomm::bench
