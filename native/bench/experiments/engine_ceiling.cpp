// engine_ceiling: the softnic engines' own ceilings (WQE/s), so every report can say when the
// model NIC, not the GPU, was the limit. Parameters: config/experiments/engine_ceiling.yaml.
//
// Method: the WQEs of a round (8-byte RDMA writes, every WQE signaled into a collapsed CQ, as
// mini-gda posts them) are written to every QP's ring before the clock starts; then each QP's
// doorbell is rung once for its whole window and the time until every QP's CQE names its last WQE
// is the round's time. --warmup rounds, then --iters timed rounds: metric engine_wqe_rate (Mmsg/s),
// one sample per timed round. The gpu engine's rounds are driven by GPU kernels
// (engine_ceiling_gpu.cu, CUDA builds only).
#include <chrono>
#include <string>
#include <vector>

#include "gicomm/mlx5/host_post.h"
#include "gicomm/softnic/softnic.h"
#include "harness/harness.h"

namespace gicomm::bench {

std::vector<Record> gpu_engine_ceiling(Run& r);  // engine_ceiling_gpu.cu

namespace {

std::vector<Record> cpu_ceiling(Run& run) {
  const uint32_t qps = run.derived<uint32_t>("qps", 8);
  const uint32_t depth = run.derived<uint32_t>("depth", 1024);
  const int threads = run.param<int>("threads");
  const bool inl = run.param<std::string>("payload") == "inline";
  const int warmup = run.warmup(), rounds = run.warmup() + run.iters();
  uint32_t ring = 1;
  while (ring < depth) ring <<= 1;
  softnic::SoftNic nic;
  std::vector<uint64_t> dst(size_t(qps) * depth, 0), src(depth, 0x5a5a5a5a5a5a5a5aull);
  const auto dmr = nic.register_mr(dst.data(), dst.size() * 8, softnic::kAccessRemoteWrite);
  const auto smr = nic.register_mr(src.data(), src.size() * 8, 0);
  softnic::QueueConfig qc;
  qc.sq_wqebbs = ring;
  qc.collapsed_cq = true;
  qc.cq_entries = 1;
  std::vector<mlx5::HostSq> sqs;
  for (uint32_t q = 0; q < qps; ++q) sqs.emplace_back(nic.sq(nic.create_qp(qc)));
  softnic::CpuEngine engine(nic, threads);
  engine.start();
  std::vector<double> rates;
  for (int r = 0; r < rounds; ++r) {
    // Fill every ring with the round's WQEs (not timed).
    for (uint32_t q = 0; q < qps; ++q) {
      mlx5::WqeImage img;
      for (uint32_t i = 0; i < depth; ++i) {
        const mlx5::WqeHeader h = sqs[q].header(true);
        const uint64_t raddr = dmr.addr + 8 * (uint64_t(q) * depth + i);
        const uint32_t ds = inl ? mlx5::build_rdma_write_inline_u64(img, h, raddr, dmr.rkey, i)
                                : mlx5::build_rdma_write(img, h, raddr, dmr.rkey, smr.addr + 8 * i, smr.lkey, 8);
        sqs[q].push(img, ds);
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (uint32_t q = 0; q < qps; ++q) sqs[q].ring();
    const auto deadline = t0 + std::chrono::milliseconds(run.options.timeout_ms);
    for (uint32_t q = 0; q < qps; ++q) {
      const mlx5::CqDesc cq = nic.cq(q);
      const uint16_t last = static_cast<uint16_t>(sqs[q].pi() - 1);
      for (;;) {
        const uint32_t tail = __atomic_load_n(&cq.buf[0].w[15], __ATOMIC_ACQUIRE);
        if (mlx5::op_own_opcode(mlx5::tail_op_own(tail)) == mlx5::kCqeReqErr)
          throw PointFailure("QP " + std::to_string(q) + ": error CQE");
        if (mlx5::op_own_opcode(mlx5::tail_op_own(tail)) == mlx5::kCqeReq && mlx5::tail_wqe_counter(tail) == last) break;
        if (std::chrono::steady_clock::now() > deadline)
          throw PointFailure("QP " + std::to_string(q) + ": CQE for WQE " + std::to_string(last) + " not seen, last " +
                             std::to_string(mlx5::tail_wqe_counter(tail)));
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r >= warmup) rates.push_back(double(qps) * depth / secs / 1e6);
  }
  engine.stop();
  const softnic::Counters c = engine.counters();
  if (c.errors || c.wqes != uint64_t(qps) * depth * rounds)
    throw PointFailure("engine executed " + std::to_string(c.wqes) + " WQEs with " + std::to_string(c.errors) +
                       " errors, expected " + std::to_string(uint64_t(qps) * depth * rounds));
  for (uint32_t q = 0; q < qps; ++q)
    for (uint32_t i = 0; i < depth; ++i) {
      const uint64_t want = inl ? i : 0x5a5a5a5a5a5a5a5aull;
      if (dst[size_t(q) * depth + i] != want) throw PointFailure("payload mismatch at QP " + std::to_string(q));
    }
  Record rec = Record::ok("engine_wqe_rate", "Mmsg/s", compute_stats(rates));
  rec.nic_backend = "softnic-cpu";
  return {rec};
}

std::vector<Record> engine_ceiling(Run& r) {
  if (r.param<std::string>("engine") == "gpu") return gpu_engine_ceiling(r);
  return cpu_ceiling(r);
}

}  // namespace

#if !defined(GICOMM_BENCH_WITH_CUDA)
std::vector<Record> gpu_engine_ceiling(Run&) {
  throw HardwareMissing("this build has no CUDA: the gpu engine ceiling needs two GPUs");
}
#endif

GICOMM_EXPERIMENT(engine_ceiling, engine_ceiling);

}  // namespace gicomm::bench
