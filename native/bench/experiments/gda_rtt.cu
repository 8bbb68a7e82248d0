// gda_rtt: the round trip of an 8-byte write through the model NIC under each ordering variant
// (variant, payload: its YAML). Block 0 pings through QP 0 into flag B; block 1 sees it and
// answers through QP 1 into flag A; block 0 sees the answer. rtt_ns per exchange (%globaltimer).
// --warmup exchanges, then --iters timed ones, in one kernel.
#include <cstring>

#include "gda.cuh"
#include "gicomm/common/clock.cuh"
#include "harness/two_rank.h"

using namespace gicomm;
using namespace gicomm::gda;

namespace gicomm::bench {

namespace {

template <class Order, bool kInline>
__global__ void rtt_kernel(Context ctx, GdaTarget tg, int warmup, int iters, long long* rtt_ns) {
  // Block 0 pings through QP 0 into flag B; block 1 answers through QP 1 into flag A.
  volatile uint64_t* flag_a = reinterpret_cast<volatile uint64_t*>(tg.dst);
  volatile uint64_t* flag_b = reinterpret_cast<volatile uint64_t*>(tg.dst + 64);
  const bool ping = blockIdx.x == 0;
  ThreadQp tq(&ctx.qps[ping ? 0 : 1]);
  uint64_t* src = reinterpret_cast<uint64_t*>(tg.src) + (ping ? 0 : 8);
  for (int i = -warmup; i < iters; ++i) {
    const uint64_t value = static_cast<uint64_t>(i + warmup + 1);
    const unsigned long long t0 = globaltimer();
    if (!ping) {
      for (uint32_t spin = 0; *flag_b != value; ++spin) {
        if ((spin & 1023) == 1023 && (failed(ctx) || globaltimer() - t0 > ctx.timeout_ns)) {
          report(ctx, WaitSite::peer, ctx.qps[0], value, *flag_b);
          return;
        }
      }
    }
    if (!kInline) *src = value;
    const PutOp op = put_op(tg, reinterpret_cast<uint64_t>(ping ? flag_b : flag_a), reinterpret_cast<uint64_t>(src), 8,
                            kInline, value);
    if (!tq.put<Order>(ctx, op, true)) return;
    if (ping) {
      for (uint32_t spin = 0; *flag_a != value; ++spin) {
        if ((spin & 1023) == 1023 && (failed(ctx) || globaltimer() - t0 > ctx.timeout_ns)) {
          report(ctx, WaitSite::peer, ctx.qps[1], value, *flag_a);
          return;
        }
      }
      if (i >= 0) rtt_ns[i] = static_cast<long long>(globaltimer() - t0);
    }
  }
  tq.quiet(ctx);
  tq.flush();
}

std::vector<Record> gda_rtt(Run& run) { return measure_rtt(run); }

}  // namespace

std::vector<Record> measure_rtt(Run& run) {
  const bool inl = run.param<std::string>("payload") == "inline";
  // The answer comes from a second block polling the flag in this GPU's memory. Between two ranks
  // it must come from rank 1 (two_rank.h: GICOMM_EXPERIMENT_SERVE), whose answers would need rank
  // 0's flag buffer and rkey when its QPs connect; mini-gda registers that buffer only after its
  // session (and so its DEVX QPs) exists.
  if (run.nic_backend == NicBackend::mlx5)
    refuse_two_ranks(run, "the mini-gda round trip (rtt_ns)",
                     "a responder on rank 1 answering into rank 0's flags, whose buffer mini-gda's session "
                     "registers only after its QPs connected to rank 1 (mini-proxy's pingpong has one)");
  GdaRig& rig = GdaRig::reuse(gda_config(run, 2), gda_memory(1 << 20));
  // Reset the flags (a previous point used the same values).
  if (rig.dst().pinned) {
    std::memset(rig.dst().p, 0, 128);
  } else {
    GICOMM_CUDA(cudaMemset(rig.dst().p, 0, 128));
  }
  const int iters = run.iters();
  DeviceBuffer<long long> rtt(iters);
  const Context ctx = rig.context();
  order::dispatch(variant_of(run), [&](auto policy) {
    using P = decltype(policy);
    if (inl) {
      rtt_kernel<P, true><<<2, 1>>>(ctx, rig.target(), run.warmup(), iters, rtt.p);
    } else {
      rtt_kernel<P, false><<<2, 1>>>(ctx, rig.target(), run.warmup(), iters, rtt.p);
    }
    return 0;
  });
  rig.check("rtt kernel");
  Record r = Record::ok("rtt_ns", "ns", compute_stats(to_d(rtt.read())));
  r.sm_clock_mhz = measure_sm_clock_mhz(200000);
  return {r};
}

GICOMM_EXPERIMENT(gda_rtt, gda_rtt);

}  // namespace gicomm::bench
