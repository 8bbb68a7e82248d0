// The worker pool on the software NIC: CPU producers (tuned and baseline) enqueue 8-byte inline
// writes and pointer writes; workers build mlx5 WQEs into softnic QPs; the test checks the bytes
// that landed in the registered destination, the completion counters, and that a bad rkey comes
// back as an error CQE that fails the pool with the QP and syndrome named.
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/softnic_backend.h"
#include "host_rings.h"

using namespace gicomm;
using namespace gicomm::proxy;

namespace {
constexpr uint64_t kSec = 1000000000ull;

struct Setup {
  Setup(uint32_t n, uint32_t cap, uint32_t window)
      : rings(n, cap), remote(size_t(n) * window, 0), local(4096, 0) {
    for (size_t i = 0; i < local.size(); ++i) local[i] = 0xabc0000000000000ull | i;
    rmr = nic.register_mr(remote.data(), remote.size() * 8, softnic::kAccessLocalWrite | softnic::kAccessRemoteWrite);
    lmr = nic.register_mr(local.data(), local.size() * 8, softnic::kAccessLocalWrite);
    target.remote_addr = rmr.addr;
    target.rkey = rmr.rkey;
    target.local_addr = lmr.addr;
    target.lkey = lmr.lkey;
    target.sq_wqebbs = 64;
  }
  softnic::SoftNic nic;
  gicomm::test::HostRings rings;
  std::vector<uint64_t> remote, local;
  softnic::MemoryRegionHandle rmr, lmr;
  SoftnicTarget target;
};

PoolConfig cfg(uint32_t workers, uint32_t batch) {
  PoolConfig c;
  c.workers = workers;
  c.batch = batch;
  c.numa_node = 0;
  c.yield_when_idle = true;
  c.stall_timeout_ns = 10 * kSec;
  return c;
}

uint64_t value_of(uint32_t ring, uint64_t i) { return (uint64_t(ring + 1) << 48) | (i * 2654435761u & 0xffffffffffull); }

void test_writes(bool tuned, uint32_t rings, uint32_t workers, uint32_t batch) {
  const uint32_t window = 64, per_ring = 5000;
  Setup s(rings, 16, window);
  softnic::CpuEngine engine(s.nic, 1);
  engine.start();
  auto be = make_softnic_backend(s.nic, s.target);
  std::string err;
  auto pool = WorkerPool::create(cfg(workers, batch), s.rings.views, *be, nullptr, &err);
  REQUIRE(pool, "%s", err.c_str());
  REQUIRE(pool->start(false, &err));
  std::vector<std::thread> prod;
  for (uint32_t r = 0; r < rings; ++r) {
    prod.emplace_back([&, r] {
      TunedProducer tp{0, 0};
      for (uint64_t i = 0; i < per_ring; ++i) {
        const uint32_t slot = r * window + uint32_t(i % window);
        // Every 7th request is a pointer write of a local word, the rest inline values.
        const bool ptr = i % 7 == 3;
        const uint64_t v = ptr ? ((8ull << 40) | (8 * (i % 4096))) : value_of(r, i);
        const uint32_t info = make_info(ptr ? Op::write : Op::write_inline, slot, false);
        const uint64_t t = tuned ? enqueue_tuned(s.rings.views[r], tp, v, info, 20 * kSec, nullptr)
                                 : enqueue_baseline(s.rings.views[r], v, info, 20 * kSec, nullptr);
        REQUIRE(t == i);
      }
    });
  }
  for (auto& t : prod) t.join();
  std::vector<uint64_t> expected(rings, per_ring);
  REQUIRE(pool->stop(&expected, 20 * kSec, &err), "%s", err.c_str());
  engine.stop();
  // Each destination word holds the last request aimed at it.
  for (uint32_t r = 0; r < rings; ++r) {
    REQUIRE(s.rings.counters[r].done == per_ring);
    for (uint32_t w = 0; w < window; ++w) {
      uint64_t last = per_ring - 1;
      while (last % window != w) --last;
      const uint64_t want = last % 7 == 3 ? s.local[last % 4096] : value_of(r, last);
      REQUIRE(s.remote[r * window + w] == want, "ring %u word %u: %llx != %llx", r, w,
                (unsigned long long)s.remote[r * window + w], (unsigned long long)want);
    }
  }
  const softnic::Counters c = engine.counters();
  REQUIRE(c.wqes == uint64_t(rings) * per_ring && c.errors == 0);
  uint64_t posts = 0;
  for (const auto& st : pool->stats()) posts += st.posts;
  REQUIRE(c.cqes == posts);  // one CQE per chain: selective signaling
  std::printf("  softnic %s rings=%u workers=%u batch=%u: %llu WQEs in %llu chains\n", tuned ? "tuned" : "baseline",
              rings, workers, batch, (unsigned long long)c.wqes, (unsigned long long)posts);
}

void test_error_cqe() {
  Setup s(1, 8, 8);
  s.target.rkey ^= 0x55;  // a key the softnic does not know
  softnic::CpuEngine engine(s.nic, 1);
  engine.start();
  auto be = make_softnic_backend(s.nic, s.target);
  std::string err;
  auto pool = WorkerPool::create(cfg(1, 1), s.rings.views, *be, nullptr, &err);
  REQUIRE(pool && pool->start(false, &err));
  TunedProducer tp{0, 0};
  REQUIRE(enqueue_tuned(s.rings.views[0], tp, 42, make_info(Op::write_inline, 0, false), 0, nullptr) == 0);
  const uint64_t deadline = now_ns() + 5 * kSec;
  while (!pool->failed() && now_ns() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  err = pool->error();
  REQUIRE(err.find("error CQE") != std::string::npos && err.find("syndrome 0x13") != std::string::npos,
            "%s", err.c_str());
  REQUIRE(!pool->stop(nullptr, kSec, &err));
  engine.stop();
}
}  // namespace

int main() {
  test_writes(true, 1, 1, 1);
  test_writes(true, 6, 2, 16);
  test_writes(false, 3, 3, 4);
  test_error_cqe();
  std::printf("proxy_softnic_test: ok\n");
  return 0;
}
