// connection_scaling (the paper's Fig. 10): min(producers, active_qps) threads, each owning the
// QPs q = its index + k * producers, visit their QPs round-robin and post `writes_per_visit`
// writes of `size` bytes per visit (8: inline; 16..4096: pointer; a doorbell every 16 WQEs and at
// the visit's end), as the paper's all-active pattern. The writes land in this host's own
// registered memory: on a NIC every write is both a send and a receive of the same NIC (loopback
// RC QPs: direction send_recv; send-only needs a second node and is not implemented). What the
// experiment studies is the NIC's connection-context cache: on the softnic it measures only the
// model NIC's polling of many doorbells, so its YAML runs it on mlx5 only. One warm-up launch
// (every connection visited once), then min(--iters, 3) timed launches of >= min_writes (2 M by
// default) writes and >= 4 rounds over every connection: msg_rate (Mmsg/s) and goodput_gbps (GB/s).
#include <algorithm>

#include "gda.cuh"
#include "gicomm/softnic/softnic.h"

using namespace gicomm;
using namespace gicomm::gda;

namespace gicomm::bench {

namespace {

using Fence = order::GpuFence;

__global__ void connections_kernel(Context ctx, GdaTarget tg, uint32_t producers, uint32_t visits, uint32_t writes,
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

std::vector<Record> connection_scaling(Run& run) {
  const uint32_t connections = run.param<uint32_t>("active_qps");
  const uint32_t size = run.param<uint32_t>("size");
  if (size != 8 && size < 16)
    throw PointFailure("bad parameter: size must be 8 (inline) or 16..4096 (pointer), not " + std::to_string(size));
  const uint32_t writes = run.param<uint32_t>("writes_per_visit");
  gda::SessionConfig cfg = gda_config(run, 1);
  if (cfg.engine != "mlx5" && connections > softnic::SoftNic::kMaxQps)
    throw PointFailure("bad parameter: active_qps " + std::to_string(connections) + ": the softnic serves at most " +
                       std::to_string(softnic::SoftNic::kMaxQps) + " QPs");
  cfg.num_qps = connections;
  cfg.sq_wqebbs = 64;  // 16-WQE doorbells; thousands of queues
  const uint32_t producers = std::min(run.param<uint32_t>("producers"), connections);
  const size_t dst_bytes = 64u << 20;
  GdaRig& rig = GdaRig::reuse(cfg, gda_memory(dst_bytes));
  const Context ctx = rig.context();
  const GdaTarget tg = rig.target();
  const uint32_t slots = static_cast<uint32_t>(dst_bytes / size);
  // Every QP is visited the same number of times: visits per producer = (its QPs) x rounds; enough
  // writes in all (>= min_writes, 2 M by default, and >= 4 rounds over every connection) that the
  // start and end are noise.
  const uint64_t min_writes = run.param<uint32_t>("min_writes");
  const uint64_t per_round = uint64_t(connections) * writes;
  const uint32_t rounds = static_cast<uint32_t>(std::max<uint64_t>(4, (min_writes + per_round - 1) / per_round));
  const uint32_t owned_max = (connections + producers - 1) / producers;
  const uint32_t visits = owned_max * rounds;
  const uint32_t block = std::min<uint32_t>(producers, 64);
  const uint32_t grid = (producers + block - 1) / block;
  auto launch = [&](uint32_t v) { connections_kernel<<<grid, block>>>(ctx, tg, producers, v, writes, size, slots); };
  launch(owned_max);  // warm-up: every connection visited once
  rig.check("connection_scaling warm-up");
  // A producer owning fewer QPs (connections not a multiple of producers) makes as many visits
  // over fewer QPs: every producer posts visits x writes.
  const uint64_t total = uint64_t(producers) * visits * writes;
  const std::vector<double> rates =
      rates_of(event_timed_ms(std::max(1, std::min(run.iters(), 3)), [&] { launch(visits); },
                              [&] { rig.check("connection_scaling kernel"); }),
               double(total));
  // Every write completed: each QP's quiet reached its producer index.
  rig.check_heads_meet("connection check");
  std::vector<double> gbps(rates.size());
  for (size_t i = 0; i < rates.size(); ++i) gbps[i] = rates[i] * static_cast<double>(size) / 1e3;  // GB/s
  const double mhz = measure_sm_clock_mhz(200000);
  Record r = Record::ok("msg_rate", "Mmsg/s", compute_stats(rates));
  Record g = Record::ok("goodput_gbps", "GB/s", compute_stats(gbps));
  r.sm_clock_mhz = g.sm_clock_mhz = mhz;
  return {r, g};
}

}  // namespace

GICOMM_EXPERIMENT(connection_scaling, connection_scaling);

}  // namespace gicomm::bench
