// gda_rtt: the round trip of an 8-byte write through the model NIC under each ordering variant
// (variant, payload: its YAML). Block 0 pings through QP 0 into flag B; block 1 sees it and
// answers through QP 1 into flag A; block 0 sees the answer. rtt_ns per exchange (%globaltimer).
// --warmup exchanges, then --iters timed ones, in one kernel. Between two ranks (mlx5) block 0
// runs alone: its ping lands in flag B of rank 1's buffer, and rank 1's responder
// (harness/responder.h, scheme "flag"; a host thread, or a GPU thread with `responder: gpu`)
// answers into flag A here, through rank 1's mini-proxy worker and QP 0: never a GPU-built WQE, so
// such a round trip is not mini-gda's in both directions.
#include <cstring>

#include "gda.cuh"
#include "gicomm/common/clock.cuh"
#include "harness/responder.h"
#include "harness/two_rank.h"

using namespace gicomm;
using namespace gicomm::gda;

namespace gicomm::bench {

namespace {

constexpr uint32_t kFlagA = 0, kFlagB = 8;  // 8-byte words of the destination (64 B apart)

// `local` is this rank's destination, where the flags are polled (tg.dst, which the puts target,
// is the peer's between two ranks).
template <class Order, bool kInline>
__global__ void rtt_kernel(Context ctx, GdaTarget tg, uint64_t local, int warmup, int iters, long long* rtt_ns) {
  // Block 0 pings through QP 0 into flag B; block 1 answers through QP 1 into flag A.
  volatile uint64_t* flag_a = reinterpret_cast<volatile uint64_t*>(local) + kFlagA;
  volatile uint64_t* flag_b = reinterpret_cast<volatile uint64_t*>(local) + kFlagB;
  const uint64_t put_a = tg.dst + 8 * kFlagA, put_b = tg.dst + 8 * kFlagB;
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
    const PutOp op = put_op(tg, ping ? put_b : put_a, reinterpret_cast<uint64_t>(src), 8, kInline, value);
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
  // One process: the answer comes from a second block polling flag B in this GPU's memory. Two
  // ranks: from rank 1's responder (below), told where flag A is: mini-gda registers this buffer
  // only after its session connected its DEVX QPs, so rank 1 could not learn it then.
  const bool peer_pong = run.nic_backend == NicBackend::mlx5 && two_ranks();
  net::Message ask;
  const std::string responder = ask_responder(run, peer_pong, &ask);  // before any GPU work
  GdaRig& rig = GdaRig::reuse(gda_config(run, 2), gda_memory(1 << 20));
  // Reset the flags (a previous point used the same values).
  if (rig.dst().pinned) {
    std::memset(rig.dst().p, 0, 128);
  } else {
    GICOMM_CUDA(cudaMemset(rig.dst().p, 0, 128));
  }
  // Two ranks: the answers come from rank 1's responder, into flag A of this rank's buffer.
  if (peer_pong) {
    ask.set("scheme", "flag");
    ask.set_u64("ping_word", kFlagB);
    ask.set_u64("pong_word", kFlagA);
    ask.set_u64("addr", reinterpret_cast<uint64_t>(rig.dst().p));
    ask.set_u64("rkey", rig.dst_rkey());
    ask.set_u64("wait_ms", uint64_t(run.options.timeout_ms));
    start_peer_responder(run, ask);
  }
  const int iters = run.iters();
  DeviceBuffer<long long> rtt(iters);
  const Context ctx = rig.context();
  const uint64_t local = reinterpret_cast<uint64_t>(rig.dst().p);
  const int blocks = peer_pong ? 1 : 2;
  order::dispatch(variant_of(run), [&](auto policy) {
    using P = decltype(policy);
    if (inl) {
      rtt_kernel<P, true><<<blocks, 1>>>(ctx, rig.target(), local, run.warmup(), iters, rtt.p);
    } else {
      rtt_kernel<P, false><<<blocks, 1>>>(ctx, rig.target(), local, run.warmup(), iters, rtt.p);
    }
    return 0;
  });
  rig.check("rtt kernel");
  Record r = Record::ok("rtt_ns", "ns", compute_stats(to_d(rtt.read())));
  if (peer_pong) {
    Params params = run.point.params;
    params.set("responder", responder);
    r.params = params;
  }
  r.sm_clock_mhz = measure_sm_clock_mhz(200000);
  return {r};
}

GICOMM_EXPERIMENT(gda_rtt, gda_rtt);
// Rank 1's half between two ranks: the flag answer (harness/responder.h).
GICOMM_EXPERIMENT_SERVE(gda_rtt, round_trip_responder);

}  // namespace gicomm::bench
