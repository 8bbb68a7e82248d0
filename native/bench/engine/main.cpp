// gicomm-bench-engine: the softnic engines' own ceilings (WQE/s), so every report can say when the
// model NIC, not the GPU, was the limit.
//
// --experiment engine_ceiling, point params:
//   engine (cpu|gpu), qps, depth (WQEs per QP per round, <= SQ size), threads (cpu engine threads),
//   payload (inline|pointer), rounds
// Method: the WQEs of a round (8-byte RDMA writes, every WQE signaled into a collapsed CQ, as
// mini-gda posts them) are written to every QP's ring before the clock starts; then each QP's
// doorbell is rung once for its whole window and the time until every QP's CQE names its last WQE
// is the round's time. metric engine_wqe_rate (Mmsg/s), one sample per round. The gpu engine's
// rounds are driven by GPU kernels (gpu_ceiling.cu, CUDA builds only).
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.h"
#include "engine_gpu.h"
#include "gicomm/mlx5/host_post.h"
#include "gicomm/softnic/softnic.h"

using namespace gicomm;
using gicomm::bench::PointFailure;
using gicomm::bench::Record;

namespace {

std::vector<Record> cpu_ceiling(const bench::Point& p, const bench::Options& o) {
  const uint32_t qps = static_cast<uint32_t>(p.params.get_int("qps", 8));
  const uint32_t depth = static_cast<uint32_t>(p.params.get_int("depth", 1024));
  const int threads = static_cast<int>(p.params.get_int("threads", 1));
  const bool inl = p.params.get_string("payload", "inline") == "inline";
  const int rounds = static_cast<int>(p.params.get_int("rounds", 5));
  if (depth < 1 || depth > 16384 || qps < 1 || qps > 4096) throw PointFailure("depth 1..16384, qps 1..4096");
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
  for (int r = 0; r < rounds + 1; ++r) {
    // Fill every ring with the round's WQEs (not timed).
    std::vector<uint64_t> doorbells(qps);
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
    const auto deadline = t0 + std::chrono::milliseconds(o.timeout_ms);
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
    if (r > 0) rates.push_back(double(qps) * depth / secs / 1e6);  // round 0 is warm-up
  }
  engine.stop();
  const softnic::Counters c = engine.counters();
  if (c.errors || c.wqes != uint64_t(qps) * depth * (rounds + 1))
    throw PointFailure("engine executed " + std::to_string(c.wqes) + " WQEs with " + std::to_string(c.errors) +
                       " errors, expected " + std::to_string(uint64_t(qps) * depth * (rounds + 1)));
  for (uint32_t q = 0; q < qps; ++q)
    for (uint32_t i = 0; i < depth; ++i) {
      const uint64_t want = inl ? i : 0x5a5a5a5a5a5a5a5aull;
      if (dst[size_t(q) * depth + i] != want) throw PointFailure("payload mismatch at QP " + std::to_string(q));
    }
  Record rec = Record::ok("engine_wqe_rate", "Mmsg/s", bench::compute_stats(rates));
  rec.nic_backend = "softnic-cpu";
  rec.transport = "softnic";
  return {rec};
}

}  // namespace

int main(int argc, char** argv) {
  bench::DriverInfo info{"gicomm-bench-engine", "softnic", "softnic-cpu"};
  return bench::run_driver(argc, argv, info, [](const bench::Point& p, const bench::Options& o) {
    if (o.experiment != "engine_ceiling") throw PointFailure("gicomm-bench-engine runs engine_ceiling only");
    const std::string engine = p.params.get_string("engine", "cpu");
    if (engine == "cpu") return cpu_ceiling(p, o);
    if (engine == "gpu") return gpu_engine_ceiling(p, o);
    throw PointFailure("engine must be cpu or gpu");
  });
}
