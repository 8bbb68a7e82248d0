// Protocol stress with CPU producer threads and the real worker pool:
//   tuned    - one producer per ring, many rings, tiny rings (thousands of wrap-arounds);
//   baseline - several producers per ring contending for tickets;
//   drain    - stop() right after the producers finish: everything consumed and completed;
//   stall    - a channel that never completes: the pool reports the ring and its counters;
//   config   - bad worker/batch/ring/NUMA settings are refused with a clear reason.
// The checking channel sees every descriptor a worker posts and verifies that no descriptor is
// lost, duplicated or reordered (per producer), and that no chain exceeds the batch size.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/ring.h"
#include "host_rings.h"

using namespace gicomm::proxy;

namespace {

constexpr uint64_t kSec = 1000000000ull;

// value = producer << 40 | sequence number within that producer; the remote slot field = ring.
uint64_t encode(uint32_t producer, uint64_t i) { return (uint64_t(producer) << 40) | i; }

// Shared verdicts. Each producer's stream is only ever posted by one worker (its ring's), so
// next[] needs no lock; errors are rare and go under a mutex.
struct Checker {
  Checker(uint32_t producers, uint32_t batch) : next(producers), batch(batch) {
    for (auto& n : next) n.store(0);
  }
  void see(const Desc& d) {
    const uint32_t prod = uint32_t(d.value >> 40);
    const uint64_t i = d.value & ((1ull << 40) - 1);
    if (prod >= next.size()) return error("descriptor from unknown producer");
    const uint64_t want = next[prod].load(std::memory_order_relaxed);
    if (i != want)
      return error("producer " + std::to_string(prod) + ": got #" + std::to_string(i) +
                   ", expected #" + std::to_string(want) + (i < want ? " (duplicate)" : " (lost or reordered)"));
    next[prod].store(want + 1, std::memory_order_relaxed);
    total.fetch_add(1, std::memory_order_relaxed);
  }
  void error(const std::string& e) {
    std::lock_guard<std::mutex> lk(mu);
    if (first_error.empty()) first_error = e;
  }
  std::vector<std::atomic<uint64_t>> next;
  uint32_t batch;
  std::atomic<uint64_t> total{0}, posts{0};
  std::atomic<uint32_t> max_chain{0};
  std::mutex mu;
  std::string first_error;
};

// A channel that checks what it is given and completes with a delay of a few polls, so the pool's
// in-flight bookkeeping (several posts outstanding, partial retirement) is exercised.
class CheckingChannel : public Channel {
 public:
  CheckingChannel(Checker* c, uint32_t depth, bool never_complete)
      : c_(c), depth_(depth), never_(never_complete) {}
  uint32_t room() const override { return depth_ - outstanding_; }
  bool post(const Desc* d, uint32_t n, std::string* err) override {
    if (n == 0 || n > c_->batch || n > room()) {
      *err = "chain of " + std::to_string(n) + " exceeds batch/room";
      c_->error(*err);
      return false;
    }
    for (uint32_t k = 0; k < n; ++k) c_->see(d[k]);
    uint32_t m = c_->max_chain.load();
    while (n > m && !c_->max_chain.compare_exchange_weak(m, n)) {
    }
    c_->posts.fetch_add(1);
    outstanding_ += n;
    return true;
  }
  int64_t poll(std::string*) override {
    if (never_) return 0;
    if (++polls_ % 3 != 0) return 0;
    // Retire part of what is outstanding: completions arrive in pieces.
    const uint32_t c = (outstanding_ + 1) / 2;
    outstanding_ -= c;
    return c;
  }

 private:
  Checker* c_;
  uint32_t depth_;
  bool never_;
  uint32_t outstanding_ = 0;
  uint64_t polls_ = 0;
};

class CheckingBackend : public Backend {
 public:
  CheckingBackend(Checker* c, uint32_t depth, bool never) : c_(c), depth_(depth), never_(never) {}
  const char* name() const override { return "none"; }
  std::unique_ptr<Channel> open(uint32_t, std::string*) override {
    return std::unique_ptr<Channel>(new CheckingChannel(c_, depth_, never_));
  }

 private:
  Checker* c_;
  uint32_t depth_;
  bool never_;
};

PoolConfig cfg_for(uint32_t workers, uint32_t batch) {
  PoolConfig cfg;
  cfg.workers = workers;
  cfg.batch = batch;
  cfg.numa_node = 0;            // pinning is part of what is tested
  cfg.yield_when_idle = true;   // CI has 2 cores for producers and workers together
  cfg.stall_timeout_ns = 10 * kSec;
  return cfg;
}

// Producers run tuned (one per ring) or baseline (per_ring per ring); returns after stop().
void run_stress(bool tuned, uint32_t rings, uint32_t per_ring, uint32_t workers, uint32_t batch,
                uint32_t cap, uint64_t per_producer) {
  gicomm::test::HostRings rs(rings, cap);
  const uint32_t producers = rings * per_ring;
  Checker chk(producers, batch);
  CheckingBackend be(&chk, 64, false);
  std::string err;
  auto pool = WorkerPool::create(cfg_for(workers, batch), rs.views, be, nullptr, &err);
  REQUIRE(pool, "%s", err.c_str());
  REQUIRE(pool->start(false, &err), "%s", err.c_str());

  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      const RingView& v = rs.views[p % rings];
      TunedProducer tp{0, 0};
      WaitError we{};
      for (uint64_t i = 0; i < per_producer; ++i) {
        const uint64_t timeout = 20 * kSec;
        const uint32_t info = make_info(Op::write_inline, v.id, false);
        const uint64_t t = tuned ? enqueue_tuned(v, tp, encode(p, i), info, timeout, &we)
                                 : enqueue_baseline(v, encode(p, i), info, timeout, &we);
        if (t == ~0ull) {
          std::fprintf(stderr, "producer %u: ring %u full: head %llu, waiting for %llu\n", p, we.ring,
                       (unsigned long long)we.seen, (unsigned long long)we.expected);
          failures.fetch_add(1);
          return;
        }
        if ((i & 63) == 0) std::this_thread::yield();  // let the workers in on 2 cores
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(failures.load() == 0);

  std::vector<uint64_t> expected(rings, uint64_t(per_ring) * per_producer);
  REQUIRE(pool->stop(&expected, 20 * kSec, &err), "%s", err.c_str());
  REQUIRE(chk.first_error.empty(), "%s", chk.first_error.c_str());
  REQUIRE(chk.total.load() == uint64_t(producers) * per_producer);
  for (uint32_t p = 0; p < producers; ++p) REQUIRE(chk.next[p].load() == per_producer);
  for (uint32_t r = 0; r < rings; ++r) {
    REQUIRE(rs.counters[r].head == expected[r]);
    REQUIRE(rs.counters[r].done == expected[r], "ring %u done %llu", r,
              (unsigned long long)rs.counters[r].done);
  }
  REQUIRE(chk.max_chain.load() <= batch);
  uint64_t posts = 0, descs = 0;
  for (const auto& s : pool->stats()) {
    posts += s.posts;
    descs += s.descriptors;
    REQUIRE(s.cpu >= 0);  // pinned
  }
  REQUIRE(descs == chk.total.load() && posts == chk.posts.load());
  std::printf("  %s rings=%u producers/ring=%u workers=%u batch=%u cap=%u: %llu descriptors, %llu posts "
              "(mean chain %.2f, max %u)\n",
              tuned ? "tuned" : "baseline", rings, per_ring, workers, batch, cap,
              (unsigned long long)descs, (unsigned long long)posts, double(descs) / double(posts),
              chk.max_chain.load());
}

void test_drain_without_targets() {
  // stop() with no expected counts: a pass that finds nothing ends a worker only after the stop
  // request, so everything published before stop() is consumed and completed.
  gicomm::test::HostRings rs(3, 8);
  Checker chk(3, 4);
  CheckingBackend be(&chk, 64, false);
  std::string err;
  auto pool = WorkerPool::create(cfg_for(2, 4), rs.views, be, nullptr, &err);
  REQUIRE(pool);
  REQUIRE(pool->start(true, &err));  // parked: nothing is consumed yet (cold start)
  std::vector<TunedProducer> tp(3, TunedProducer{0, 0});
  for (uint32_t r = 0; r < 3; ++r)
    for (uint64_t i = 0; i < 8; ++i)
      REQUIRE(enqueue_tuned(rs.views[r], tp[r], encode(r, i), 0, kSec, nullptr) == i);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(rs.counters[0].head == 0);  // parked workers really are idle
  REQUIRE(pool->stop(nullptr, 10 * kSec, &err), "%s", err.c_str());
  for (uint32_t r = 0; r < 3; ++r) REQUIRE(rs.counters[r].head == 8 && rs.counters[r].done == 8);
  REQUIRE(chk.total.load() == 24 && chk.first_error.empty());
}

void test_drain_timeout_names_ring() {
  // Expecting more than was produced: stop() must time out and name the ring and its counters.
  gicomm::test::HostRings rs(2, 8);
  Checker chk(2, 1);
  CheckingBackend be(&chk, 64, false);
  std::string err;
  auto pool = WorkerPool::create(cfg_for(1, 1), rs.views, be, nullptr, &err);
  REQUIRE(pool && pool->start(false, &err));
  TunedProducer tp{0, 0};
  REQUIRE(enqueue_tuned(rs.views[1], tp, encode(1, 0), 0, 0, nullptr) == 0);
  std::vector<uint64_t> expected{0, 5};
  REQUIRE(!pool->stop(&expected, 200000000ull, &err));
  REQUIRE(err.find("ring 1") != std::string::npos && err.find("head 1") != std::string::npos &&
                err.find("expected 5") != std::string::npos,
            "message: %s", err.c_str());
}

void test_stall_reports_ring() {
  gicomm::test::HostRings rs(2, 8);
  Checker chk(2, 2);
  CheckingBackend be(&chk, 64, true);  // never completes
  PoolConfig cfg = cfg_for(1, 2);
  cfg.stall_timeout_ns = 100000000ull;  // 100 ms
  std::string err;
  auto pool = WorkerPool::create(cfg, rs.views, be, nullptr, &err);
  REQUIRE(pool && pool->start(false, &err));
  TunedProducer tp{0, 0};
  REQUIRE(enqueue_tuned(rs.views[1], tp, encode(1, 0), 0, 0, nullptr) == 0);
  const uint64_t deadline = now_ns() + 5 * kSec;
  while (!pool->failed() && now_ns() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(pool->failed());
  err = pool->error();
  REQUIRE(err.find("ring 1") != std::string::npos && err.find("no completion") != std::string::npos &&
                err.find("done 0") != std::string::npos,
            "message: %s", err.c_str());
  REQUIRE(!pool->stop(nullptr, kSec, &err));
}

// A custom completion publisher (what the bench uses for the GPU-resident counter) receives every
// ring's count from that ring's worker only, increasing, ending at what was sent; the host-resident
// counter is then left alone.
class RecordingPublisher : public CompletionPublisher {
 public:
  explicit RecordingPublisher(uint32_t rings, uint32_t workers) : last(rings), workers(workers) {
    for (auto& l : last) l.store(0);
  }
  bool publish(uint32_t ring, uint64_t done, std::string* err) override {
    if (done <= last[ring].load()) {
      *err = "ring " + std::to_string(ring) + " count went from " + std::to_string(last[ring].load()) +
             " to " + std::to_string(done);
      bad.store(true);
      return false;
    }
    last[ring].store(done);
    calls.fetch_add(1);
    return true;
  }
  std::vector<std::atomic<uint64_t>> last;
  uint32_t workers;
  std::atomic<uint64_t> calls{0};
  std::atomic<bool> bad{false};
};

void test_custom_publisher() {
  gicomm::test::HostRings rs(6, 8);
  Checker chk(6, 4);
  CheckingBackend be(&chk, 32, false);
  RecordingPublisher pub(6, 3);
  std::string err;
  auto pool = WorkerPool::create(cfg_for(3, 4), rs.views, be, &pub, &err);
  REQUIRE(pool && pool->start(false, &err));
  std::vector<TunedProducer> tp(6, TunedProducer{0, 0});
  for (uint64_t i = 0; i < 2000; ++i)
    for (uint32_t r = 0; r < 6; ++r)
      REQUIRE(enqueue_tuned(rs.views[r], tp[r], encode(r, i), 0, 10 * kSec, nullptr) == i);
  std::vector<uint64_t> expected(6, 2000);
  REQUIRE(pool->stop(&expected, 10 * kSec, &err), "%s", err.c_str());
  REQUIRE(!pub.bad.load());
  for (uint32_t r = 0; r < 6; ++r) {
    REQUIRE(pub.last[r].load() == 2000);
    REQUIRE(rs.counters[r].done == 0);  // the host counter is not the one in use
  }
  REQUIRE(pub.calls.load() >= 6);
}

void test_config_errors() {
  gicomm::test::HostRings rs(4, 8);
  auto be = make_null_backend();
  std::string err;
  auto bad = [&](PoolConfig c, size_t nrings, const char* needle) {
    std::vector<RingView> v(rs.views.begin(), rs.views.begin() + nrings);
    err.clear();
    REQUIRE(!WorkerPool::create(c, v, *be, nullptr, &err));
    REQUIRE(err.find(needle) != std::string::npos, "'%s' not in '%s'", needle, err.c_str());
  };
  bad(cfg_for(0, 1), 4, "workers must be in 1..8");
  bad(cfg_for(9, 1), 4, "workers must be in 1..8");
  bad(cfg_for(1, 0), 4, "batch must be in 1..16");
  bad(cfg_for(1, 17), 4, "batch must be in 1..16");
  bad(cfg_for(4, 1), 2, "must be >= workers");
  PoolConfig c = cfg_for(1, 1);
  c.numa_node = 4095;
  bad(c, 4, "NUMA node 4095 not found (nodes present: 0");
  std::vector<RingView> v = rs.views;
  v[2].capacity = 6;
  err.clear();
  REQUIRE(!WorkerPool::create(cfg_for(1, 1), v, *be, nullptr, &err));
  REQUIRE(err.find("ring 2 is malformed") != std::string::npos);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "all";
  if (mode == "tuned" || mode == "all") {
    run_stress(true, 1, 1, 1, 1, 2, 50000);    // smallest ring: every second enqueue wraps
    run_stress(true, 8, 1, 3, 16, 8, 20000);   // many rings, uneven ring-to-worker split
    run_stress(true, 32, 1, 8, 4, 16, 3000);   // the maximum: 32 rings, 8 workers
  }
  if (mode == "baseline" || mode == "all") {
    run_stress(false, 1, 6, 1, 16, 4, 8000);   // six producers fight for one tiny ring
    run_stress(false, 4, 3, 2, 8, 8, 8000);
  }
  if (mode == "drain" || mode == "all") {
    test_drain_without_targets();
    test_drain_timeout_names_ring();
    test_stall_reports_ring();
    test_custom_publisher();
  }
  if (mode == "config" || mode == "all") test_config_errors();
  std::printf("proxy_protocol_test %s: ok\n", mode.c_str());
  return 0;
}
