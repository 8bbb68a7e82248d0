// Hybrid mode on the CPU: producers write WQEs and publish the doorbell record but never ring;
// the HybridRinger thread must ring for them. Checks that nothing executes before the ringer runs,
// and that afterwards every WQE executes exactly once, in order, with its payload.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "check.h"
#include "gicomm/gda/hybrid.h"
#include "gicomm/mlx5/host_post.h"
#include "gicomm/softnic/softnic.h"

namespace m = gicomm::mlx5;
namespace sn = gicomm::softnic;


int main() {
  const uint32_t kQps = 8, kWqes = 600, kBatch = 8;
  sn::SoftNic nic;
  std::vector<uint64_t> dst(size_t(kQps) * kWqes, 0);
  const auto mr = nic.register_mr(dst.data(), dst.size() * 8, sn::kAccessRemoteWrite);
  sn::QueueConfig qc;
  qc.sq_wqebbs = 1024;
  qc.cq_entries = 1024;
  std::vector<m::SqDesc> sqs;
  for (uint32_t q = 0; q < kQps; ++q) sqs.push_back(nic.sq(nic.create_qp(qc)));
  sn::CpuEngine engine(nic, 1);
  engine.start();
  // Publish WQEs through the dbrec only, as the GPU does in hybrid mode: the first half before the
  // ringer runs (nothing may execute), the second half while it runs (it must ring again and again).
  std::vector<m::HostSq> prod;
  for (auto& s : sqs) prod.emplace_back(s);
  auto publish = [&](uint32_t from, uint32_t to) {
  for (uint32_t i = from; i < to; ++i) {
    for (uint32_t q = 0; q < kQps; ++q) {
      m::WqeImage img;
      const uint64_t value = (uint64_t(q) << 32) | i;
      prod[q].push(img, m::build_rdma_write_inline_u64(img, prod[q].header(true), mr.addr + 8 * (q * kWqes + i),
                                                       mr.rkey, value));
      if ((i + 1) % kBatch == 0 || i + 1 == kWqes) {
        std::atomic_thread_fence(std::memory_order_release);
        __atomic_store_n(&sqs[q].dbrec[m::kSndDbr], m::sq_dbrec_value(prod[q].pi()), __ATOMIC_RELEASE);
      }
    }
    if ((i + 1) % kBatch == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  };
  publish(0, kWqes / 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  m::CqeFields c;
  m::HostCq probe(nic.cq(0));
  CHECK(!probe.poll(&c), "a WQE executed before anyone rang the doorbell");
  gicomm::gda::HybridRinger ringer(sqs);
  ringer.start();
  publish(kWqes / 2, kWqes);
  for (uint32_t q = 0; q < kQps; ++q) {
    m::HostCq cq(nic.cq(q));
    for (uint32_t i = 0; i < kWqes; ++i) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      bool got = false;
      while (!(got = cq.poll(&c)) && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      if (!got) {
        CHECK(false, "QP %u: timeout waiting for CQE %u (consumer index %u)", q, i, cq.ci());
        break;
      }
      CHECK(c.opcode == m::kCqeReq && c.wqe_counter == static_cast<uint16_t>(i), "QP %u: CQE %u has counter %u", q, i,
            c.wqe_counter);
    }
  }
  ringer.stop();
  engine.stop();
  for (uint32_t q = 0; q < kQps; ++q)
    for (uint32_t i = 0; i < kWqes; ++i)
      if (dst[q * kWqes + i] != ((uint64_t(q) << 32) | i)) {
        CHECK(false, "QP %u WQE %u payload wrong", q, i);
        q = kQps;
        break;
      }
  CHECK(engine.counters().wqes == uint64_t(kQps) * kWqes && engine.counters().errors == 0,
        "engine executed %llu WQEs", (unsigned long long)engine.counters().wqes);
  CHECK(ringer.rings() > kQps, "the ringer rang only %llu times for %u QPs published in batches",
        (unsigned long long)ringer.rings(), kQps);
  if (gicomm::test::failures()) return 1;
  std::printf("hybrid ringer: %u QPs x %u WQEs rung by the host thread (%llu doorbells)\n", kQps, kWqes,
              (unsigned long long)ringer.rings());
  return 0;
}
