// gda_one_op: issue and put+completion of one 8-byte write, one thread, at most one outstanding,
// under each memory-ordering variant of the paper's Table 4 (variant, payload: its YAML), and the
// floor: the bare 48-byte WQE store + the variant's fence + the 8-byte doorbell store, same memory,
// same run. Records issue_cycles, issue_ns, completion_ns, floor_issue_cycles, floor_issue_ns and
// issue_over_floor (ratio of p50s). --warmup ops, then --iters timed ops, in one kernel.
#include "gda.cuh"
#include "gicomm/common/clock.cuh"
#include "harness/floor.h"

using namespace gicomm;
using namespace gicomm::gda;

namespace gicomm::bench {

namespace {

struct OneOpOut {
  long long* issue;
  long long* complete;
  long long* floor;
  ClockSample start, end;
};

template <class Order, bool kInline>
__global__ void one_op_kernel(Context ctx, GdaTarget tg, int warmup, int iters, OneOpOut* out, uint8_t* floor_sq,
                              uint64_t* floor_db) {
  ThreadQp tq(&ctx.qps[0]);
  const ClockSample s0 = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    uint64_t* src = reinterpret_cast<uint64_t*>(tg.src) + (i & 255);
    if (!kInline) *src = 0x1000 + i;  // the pointer payload: written before the op, ordered by the policy
    const PutOp op = put_op(tg, tg.dst + 8 * (i & 255), reinterpret_cast<uint64_t>(src), 8, kInline, 0x1000 + i);
    long long issue = 0, complete = 0;
    if (!timed_put_quiet<Order>(tq, ctx, op, &issue, &complete)) break;
    if (i >= 0) {
      out->issue[i] = issue;
      out->complete[i] = complete;
    }
  }
  tq.flush();
  // The floor: the bare stores of the same sequence into the same kind of memory, same fence.
  for (int i = -warmup; i < iters; ++i) {
    const long long t = timed_bare_sequence<Order>(floor_sq, floor_db, i);
    if (i >= 0) out->floor[i] = t;
  }
  out->start = s0;
  out->end = clock_sample();
}

std::vector<Record> gda_one_op(Run& run) { return measure_one_op(run); }

}  // namespace

std::vector<Record> measure_one_op(Run& run) {
  const bool inl = run.param<std::string>("payload") == "inline";
  GdaRig& rig = GdaRig::reuse(gda_config(run, 2), gda_memory(1 << 20));  // the same 2-QP session as gda_rtt
  const int iters = run.iters();
  DeviceBuffer<long long> issue(iters), complete(iters), floor(iters);
  DeviceBuffer<OneOpOut> d_out(1);
  OneOpOut h{issue.p, complete.p, floor.p, {}, {}};
  GICOMM_CUDA(cudaMemcpy(d_out.p, &h, sizeof h, cudaMemcpyHostToDevice));
  const Context ctx = rig.context();
  order::dispatch(variant_of(run), [&](auto policy) {
    using P = decltype(policy);
    if (inl) {
      one_op_kernel<P, true><<<1, 1>>>(ctx, rig.target(), run.warmup(), iters, d_out.p, rig.session().floor_sq(),
                                       rig.session().floor_doorbell());
    } else {
      one_op_kernel<P, false><<<1, 1>>>(ctx, rig.target(), run.warmup(), iters, d_out.p, rig.session().floor_sq(),
                                        rig.session().floor_doorbell());
    }
    return 0;
  });
  rig.check("one-op kernel");
  GICOMM_CUDA(cudaMemcpy(&h, d_out.p, sizeof h, cudaMemcpyDeviceToHost));
  const double mhz = sm_clock_mhz(h.start, h.end);
  if (!(mhz > 100)) throw PointFailure("implausible SM clock " + std::to_string(mhz) + " MHz");
  const std::vector<long long> is = issue.read(), co = complete.read(), fl = floor.read();
  std::vector<Record> out;
  out.push_back(timed_record("issue_cycles", "cycles", to_d(is), mhz));
  out.push_back(timed_record("issue_ns", "ns", to_ns(is, mhz), mhz));
  out.push_back(timed_record("completion_ns", "ns", to_ns(co, mhz), mhz));
  out.push_back(timed_record("floor_issue_cycles", "cycles", to_d(fl), mhz));
  out.push_back(timed_record("floor_issue_ns", "ns", to_ns(fl, mhz), mhz));
  const double ratio = out[0].stats->p50 / std::max(1.0, out[3].stats->p50);
  out.push_back(timed_record("issue_over_floor", "ratio", {ratio}, mhz));
  attach_same_run_floor(out, "floor_issue_ns", "wqe_doorbell_same_point", {"issue_ns"});
  return out;
}

GICOMM_EXPERIMENT(gda_one_op, gda_one_op);

}  // namespace gicomm::bench
