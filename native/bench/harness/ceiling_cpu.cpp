// The cpu engine's ceiling for one WQE shape (harness/engine_ceiling.h describes the method): host
// memory only, so it runs everywhere. Registers itself as the cpu engine's measurer.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "gicomm/mlx5/host_post.h"
#include "gicomm/softnic/softnic.h"
#include "harness/engine_ceiling.h"
#include "harness/errors.h"

namespace gicomm::bench {

namespace {

CeilingSamples measure_cpu(const EngineShape& shape, const CeilingPlan& plan) {
  const uint32_t qps = shape.qps, depth = plan.depth, bytes = shape.bytes;
  const uint32_t slot = (bytes + 63) / 64 * 64;
  uint32_t nbb = 1;
  if (shape.inline_payload && bytes != 8) nbb = mlx5::wqebbs_of_ds(2 + mlx5::inline_seg_ds(bytes));
  uint32_t ring = 64;
  while (ring < depth * nbb) ring <<= 1;
  // Destination slots wrap within 64 MiB; each QP's last WQE writes a check slot of its own.
  const uint32_t dst_slots = static_cast<uint32_t>(
      std::max<uint64_t>(1, std::min<uint64_t>(uint64_t(qps) * depth, (uint64_t(64) << 20) / slot)));
  const uint32_t src_slots = std::min<uint32_t>(depth, 64);
  std::vector<uint8_t> dst(size_t(dst_slots + qps) * slot, 0xee), src(size_t(src_slots) * slot);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>((i * 131u + (i >> 8) * 7u + 1u) & 0xff);
  softnic::SoftNic nic;
  const auto dmr = nic.register_mr(dst.data(), dst.size(), softnic::kAccessRemoteWrite);
  const auto smr = nic.register_mr(src.data(), src.size(), 0);
  softnic::QueueConfig qc;
  qc.sq_wqebbs = ring;
  qc.collapsed_cq = true;
  qc.cq_entries = 1;
  std::vector<mlx5::HostSq> sqs;
  for (uint32_t q = 0; q < qps; ++q) sqs.emplace_back(nic.sq(nic.create_qp(qc)));
  softnic::CpuEngine engine(nic, static_cast<int>(std::max(1u, shape.engine_threads)));
  engine.start();
  const int rounds = plan.warmup + plan.rounds;
  CeilingSamples out;
  for (int r = 0; r < rounds; ++r) {
    for (uint32_t q = 0; q < qps; ++q) {  // the round's WQEs, written before the clock starts
      mlx5::WqeImage img;
      for (uint32_t i = 0; i < depth; ++i) {
        const mlx5::WqeHeader h = sqs[q].header(true);
        const uint64_t d = i + 1 == depth ? uint64_t(dst_slots) + q : (uint64_t(q) * depth + i) % dst_slots;
        const uint64_t raddr = dmr.addr + d * slot;
        const uint64_t s = smr.addr + uint64_t(i % src_slots) * slot;
        uint32_t ds;
        if (shape.inline_payload && bytes == 8) {
          uint64_t v;
          std::memcpy(&v, reinterpret_cast<const void*>(s), 8);
          ds = mlx5::build_rdma_write_inline_u64(img, h, raddr, dmr.rkey, v);
        } else if (shape.inline_payload) {
          ds = mlx5::build_rdma_write_inline(img, h, raddr, dmr.rkey, reinterpret_cast<const void*>(s), bytes);
        } else {
          ds = mlx5::build_rdma_write(img, h, raddr, dmr.rkey, s, smr.lkey, bytes);
        }
        if (ds == 0) throw PointFailure("engine ceiling: an inline payload of " + std::to_string(bytes) + " B does not fit a WQE");
        sqs[q].push(img, ds);
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (uint32_t q = 0; q < qps; ++q) sqs[q].ring();
    const auto deadline = t0 + std::chrono::milliseconds(plan.timeout_ms);
    for (uint32_t q = 0; q < qps; ++q) {
      const mlx5::CqDesc cq = nic.cq(q);
      const uint16_t last = static_cast<uint16_t>(sqs[q].pi() - nbb);
      for (;;) {
        const uint32_t tail = __atomic_load_n(&cq.buf[0].w[15], __ATOMIC_ACQUIRE);
        const uint8_t op = mlx5::op_own_opcode(mlx5::tail_op_own(tail));
        if (op == mlx5::kCqeReqErr) throw PointFailure("engine ceiling: QP " + std::to_string(q) + ": error CQE");
        if (op == mlx5::kCqeReq && mlx5::tail_wqe_counter(tail) == last) break;
        if (std::chrono::steady_clock::now() > deadline)
          throw PointFailure("engine ceiling: QP " + std::to_string(q) + ": no CQE for WQE " + std::to_string(last) +
                             " within " + std::to_string(plan.timeout_ms) + " ms (last seen " +
                             std::to_string(mlx5::tail_wqe_counter(tail)) + ")");
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r >= plan.warmup) out.wqe_rate_mps.push_back(double(qps) * depth / secs / 1e6);
  }
  engine.stop();
  const softnic::Counters c = engine.counters();
  const uint64_t expected = uint64_t(qps) * depth * rounds;
  if (c.errors || c.wqes != expected)
    throw PointFailure("engine ceiling: the cpu engine executed " + std::to_string(c.wqes) + " WQEs with " +
                       std::to_string(c.errors) + " errors, expected " + std::to_string(expected));
  const uint8_t* want = src.data() + size_t((depth - 1) % src_slots) * slot;
  for (uint32_t q = 0; q < qps; ++q) {
    const uint8_t* got = dst.data() + size_t(dst_slots + q) * slot;
    bool ok = std::equal(want, want + bytes, got);
    for (uint32_t b = bytes; b < slot; ++b) ok = ok && got[b] == 0xee;
    if (!ok) throw PointFailure("engine ceiling: QP " + std::to_string(q) + ": the last WQE's destination does not hold its payload");
  }
  return out;
}

const CeilingMeasurerRegistration registration(EngineKind::cpu, measure_cpu);

}  // namespace

}  // namespace gicomm::bench
