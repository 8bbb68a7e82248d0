// engine_ceiling: the softnic engines' own ceilings (WQE/s) per WQE shape, so every report can say
// when the model NIC, not the GPU, was the limit. Parameters: config/experiments/engine_ceiling.yaml.
//
// Method (harness/engine_ceiling.h, the same measurement every rate record's engine_ceiling
// comes from): the WQEs of a round (RDMA writes of `size` bytes, inline or by pointer, every WQE
// signaled into a collapsed CQ, as mini-gda posts them) are written to every QP's ring before the
// clock starts; then each QP's doorbell is rung once for its whole window and the time until every
// QP's CQE names its last WQE is the round's time. --warmup untimed rounds (the gpu engine: one),
// then --iters timed rounds: metric engine_wqe_rate (Mmsg/s), one sample per timed round.
#include <string>
#include <vector>

#include "harness/engine_ceiling.h"
#include "harness/harness.h"

namespace gicomm::bench {

namespace {

std::vector<Record> engine_ceiling(Run& run) {
  const std::string engine = run.param<std::string>("engine");
  const bool cpu = engine == "cpu";
  EngineShape shape;
  shape.backend = cpu ? NicBackend::softnic_cpu : engine == "gpu" ? NicBackend::softnic_gpu : NicBackend::softnic_gpu_same;
  shape.inline_payload = run.param<std::string>("payload") == "inline";
  shape.bytes = run.param<uint32_t>("size");
  shape.qps = run.derived<uint32_t>("qps", cpu ? 8 : 16);
  shape.engine_threads = cpu ? run.param<uint32_t>("threads") : 0;
  if (shape.inline_payload && shape.bytes > 220)
    throw PointFailure("bad parameter: an inline payload is at most 220 bytes (four WQEBBs), not " +
                       std::to_string(shape.bytes));
  if (!cpu && shape.qps > kGpuEngineMaxQps)
    throw PointFailure("bad parameter: the gpu engine serves at most " + std::to_string(kGpuEngineMaxQps) +
                       " QPs, not " + std::to_string(shape.qps));
  CeilingPlan plan;
  plan.depth = run.derived<uint32_t>("depth", cpu ? 1024 : 4096);
  plan.warmup = run.warmup();
  plan.rounds = run.iters();
  plan.timeout_ms = static_cast<uint32_t>(run.options.timeout_ms);
  plan.engine_warps_per_block = run.param<int>("engine_warps_per_block");
  plan.method = run.param<std::string>("method") == "window" ? CeilingMethod::window : CeilingMethod::steady;
  if (!cpu && plan.method != CeilingMethod::steady)
    throw PointFailure("bad parameter: method window is the cpu engine's earlier method; engine " + engine +
                       " has one method (steady)");
  const CeilingSamples s = measure_engine_ceiling(shape, plan);
  Record rec = Record::ok("engine_wqe_rate", "Mmsg/s", compute_stats(s.wqe_rate_mps));
  say_ceiling(shape, ceiling_of(s), describe_measurement(s));
  rec.nic_backend = name_of(shape.backend);
  rec.sm_clock_mhz = s.sm_clock_mhz;
  rec.engine_ceiling_shape = shape.text();
  return {rec};
}

}  // namespace

GICOMM_EXPERIMENT(engine_ceiling, engine_ceiling);

}  // namespace gicomm::bench
