// mini-proxy worker pool (see gicomm/proxy/pool.h).
#include "gicomm/proxy/pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <sstream>
#include <utility>

#include "gicomm/proxy/topology.h"

namespace gicomm {
namespace proxy {

namespace {

// Baseline completion: the host-resident counter of each ring, written with a release store so a
// producer that sees the count also sees everything the worker did before it.
class HostCounterPublisher : public CompletionPublisher {
 public:
  explicit HostCounterPublisher(const std::vector<RingView>& rings) : rings_(rings) {}
  bool publish(uint32_t ring, uint64_t done, std::string*) override {
    store_release_sys_u64(rings_[ring].done, done);
    return true;
  }

 private:
  std::vector<RingView> rings_;
};

// Worker `w`'s cpu among its node's (non-empty) cpus: the pool's workers take them from first_cpu on.
int nth_worker_cpu(const std::vector<int>& node_cpus, const PoolConfig& cfg, uint32_t w) {
  return node_cpus[(cfg.first_cpu + w) % node_cpus.size()];
}

}  // namespace

struct WorkerPool::Worker {
  uint32_t index = 0;
  int cpu = -1;
  std::unique_ptr<Channel> channel;
  std::vector<uint32_t> rings;  // global ids of the rings this worker owns
  std::thread thread;
  std::atomic<bool> exited{false};
  std::atomic<uint64_t> posts{0}, descriptors{0}, completed{0};
};

std::unique_ptr<WorkerPool> WorkerPool::create(const PoolConfig& cfg,
                                               const std::vector<RingView>& rings,
                                               Backend& backend, CompletionPublisher* publisher,
                                               std::string* error) {
  auto bad = [&](const std::string& msg) {
    if (error) *error = msg;
    return std::unique_ptr<WorkerPool>();
  };
  if (cfg.workers < 1 || cfg.workers > kMaxWorkers)
    return bad("workers must be in 1.." + std::to_string(kMaxWorkers) + ", got " +
               std::to_string(cfg.workers));
  if (cfg.batch < 1 || cfg.batch > kMaxBatch)
    return bad("batch must be in 1.." + std::to_string(kMaxBatch) + ", got " +
               std::to_string(cfg.batch));
  if (rings.empty() || rings.size() > kMaxRings)
    return bad("rings must be in 1.." + std::to_string(kMaxRings) + ", got " +
               std::to_string(rings.size()));
  if (rings.size() < cfg.workers)
    return bad("rings (" + std::to_string(rings.size()) + ") must be >= workers (" +
               std::to_string(cfg.workers) + "): a worker with no ring would only burn a core");
  for (size_t r = 0; r < rings.size(); ++r) {
    const RingView& v = rings[r];
    if (!v.slots || !v.head || !v.done || !is_pow2(v.capacity) || v.capacity < kMinRingCapacity ||
        v.capacity > kMaxRingCapacity)
      return bad("ring " + std::to_string(r) + " is malformed (null pointer or capacity " +
                 std::to_string(v.capacity) + " not a power of two in [2, 65536])");
  }

  std::unique_ptr<WorkerPool> pool(new WorkerPool());
  pool->cfg_ = cfg;
  pool->rings_ = rings;
  pool->ring_done_.reset(new std::atomic<uint64_t>[rings.size()]);
  for (size_t r = 0; r < rings.size(); ++r) pool->ring_done_[r].store(0);
  for (size_t r = 0; r < rings.size(); ++r) pool->rings_[r].id = static_cast<uint32_t>(r);
  if (publisher) {
    pool->publisher_ = publisher;
  } else {
    pool->default_publisher_.reset(new HostCounterPublisher(pool->rings_));
    pool->publisher_ = pool->default_publisher_.get();
  }

  std::vector<int> node_cpus;
  if (cfg.numa_node >= 0) {
    std::string err;
    if (!numa_node_cpus(cfg.numa_node, &node_cpus, &err)) return bad(err);
  }
  for (uint32_t w = 0; w < cfg.workers; ++w) {
    auto worker = std::make_unique<Worker>();
    worker->index = w;
    if (!node_cpus.empty()) worker->cpu = nth_worker_cpu(node_cpus, cfg, w);
    for (uint32_t r = w; r < rings.size(); r += cfg.workers) worker->rings.push_back(r);
    std::string err;
    worker->channel = backend.open(w, &err);
    if (!worker->channel) return bad("worker " + std::to_string(w) + ": " + err);
    if (worker->channel->room() < cfg.batch)
      return bad("worker " + std::to_string(w) + ": channel depth " +
                 std::to_string(worker->channel->room()) + " is below batch " +
                 std::to_string(cfg.batch));
    pool->cpus_.push_back(worker->cpu);
    pool->workers_.push_back(std::move(worker));
  }
  return pool;
}

int worker_cpu(const PoolConfig& cfg, uint32_t w) {
  std::vector<int> node_cpus;
  if (cfg.numa_node < 0 || !numa_node_cpus(cfg.numa_node, &node_cpus, nullptr) || node_cpus.empty()) return -1;
  return nth_worker_cpu(node_cpus, cfg, w);
}

std::vector<int> engine_cpus_beside(const PoolConfig& cfg, unsigned threads) {
  if (cfg.numa_node < 0) return {};
  return cpu_engine_cpus(cfg.numa_node, threads, allowed_cpus());
}

WorkerPool::~WorkerPool() {
  stopping_.store(true, std::memory_order_release);
  failed_.store(true, std::memory_order_release);  // make any worker leave at once
  unpark();
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
}

bool WorkerPool::start(bool start_parked, std::string* error) {
  parked_.store(start_parked, std::memory_order_release);
  for (auto& w : workers_) {
    try {
      w->thread = std::thread([this, idx = w->index] { run(idx); });
    } catch (const std::exception& e) {
      if (error) *error = std::string("cannot start worker thread: ") + e.what();
      return false;
    }
  }
  return true;
}

void WorkerPool::park() { parked_.store(true, std::memory_order_release); }

void WorkerPool::unpark() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    parked_.store(false, std::memory_order_release);
  }
  cv_.notify_all();
}

void WorkerPool::fail(const std::string& msg) {
  std::lock_guard<std::mutex> lk(mu_);
  if (error_.empty()) error_ = msg;
  failed_.store(true, std::memory_order_release);
}

std::string WorkerPool::error() const {
  std::lock_guard<std::mutex> lk(mu_);
  return error_;
}

std::vector<WorkerStats> WorkerPool::stats() const {
  std::vector<WorkerStats> out;
  for (const auto& w : workers_) {
    WorkerStats s;
    s.cpu = w->cpu;
    s.posts = w->posts.load(std::memory_order_relaxed);
    s.descriptors = w->descriptors.load(std::memory_order_relaxed);
    s.completed = w->completed.load(std::memory_order_relaxed);
    out.push_back(s);
  }
  return out;
}

std::vector<int> WorkerPool::worker_cpus() const { return cpus_; }

// The worker loop. One pass: for each owned ring take up to `batch` published descriptors and post
// them as one chained submission; then reap completions and publish per-ring completion counters.
void WorkerPool::run(uint32_t wi) {
  Worker& w = *workers_[wi];
  struct Inflight {
    uint32_t local;  // index into w.rings
    uint32_t count;
  };
  if (w.cpu >= 0) {
    std::string err;
    if (!pin_this_thread(w.cpu, &err)) {
      fail("worker " + std::to_string(wi) + ": " + err);
      w.exited.store(true, std::memory_order_release);
      return;
    }
  }
  const size_t nr = w.rings.size();
  std::vector<uint64_t> head(nr), done(nr);
  for (size_t i = 0; i < nr; ++i) {
    head[i] = load_acquire_sys(rings_[w.rings[i]].head);
    done[i] = head[i];
  }
  std::deque<Inflight> inflight;  // one entry per post, in post order (an RC queue retires in order)
  std::vector<bool> dirty(nr, false);
  Desc batch[kMaxBatch];
  uint64_t last_completion_ns = now_ns();
  std::string err;

  while (!failed_.load(std::memory_order_acquire)) {
    if (parked_.load(std::memory_order_acquire)) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] {
        return !parked_.load(std::memory_order_acquire) || stopping_.load(std::memory_order_acquire);
      });
      last_completion_ns = now_ns();
    }
    // Read before the pass: a pass that started after stop() and found nothing is conclusive.
    const bool stop_seen = stopping_.load(std::memory_order_acquire);
    bool progress = false;

    for (size_t i = 0; i < nr; ++i) {
      const RingView& ring = rings_[w.rings[i]];
      const uint32_t want = std::min<uint32_t>(cfg_.batch, w.channel->room());
      uint32_t n = 0;
      while (n < want && try_consume(ring, head[i] + n, &batch[n])) ++n;
      if (n == 0) continue;
      if (!w.channel->post(batch, n, &err)) {
        fail("worker " + std::to_string(wi) + " ring " + std::to_string(ring.id) + ": post of " +
             std::to_string(n) + " at head " + std::to_string(head[i]) + " failed: " + err);
        break;
      }
      if (inflight.empty()) last_completion_ns = now_ns();
      head[i] += n;
      // The slots are free once posted: the WQEs hold their own copy (inline or by reference).
      store_release_sys_u64(ring.head, head[i]);
      inflight.push_back({static_cast<uint32_t>(i), n});
      w.posts.fetch_add(1, std::memory_order_relaxed);
      w.descriptors.fetch_add(n, std::memory_order_relaxed);
      progress = true;
    }
    if (failed_.load(std::memory_order_acquire)) break;

    if (!inflight.empty()) {
      int64_t c = w.channel->poll(&err);
      if (c < 0) {
        fail("worker " + std::to_string(wi) + ": completion poll failed: " + err);
        break;
      }
      if (c > 0) {
        progress = true;
        last_completion_ns = now_ns();
        w.completed.fetch_add(static_cast<uint64_t>(c), std::memory_order_relaxed);
        while (c > 0 && !inflight.empty()) {
          Inflight& f = inflight.front();
          const uint32_t take = static_cast<uint32_t>(std::min<int64_t>(c, f.count));
          done[f.local] += take;
          dirty[f.local] = true;
          f.count -= take;
          c -= take;
          if (f.count == 0) inflight.pop_front();
        }
        for (size_t i = 0; i < nr; ++i) {
          if (!dirty[i]) continue;
          dirty[i] = false;
          ring_done_[w.rings[i]].store(done[i], std::memory_order_relaxed);
          if (!publisher_->publish(w.rings[i], done[i], &err)) {
            fail("worker " + std::to_string(wi) + " ring " + std::to_string(w.rings[i]) +
                 ": completion publish failed: " + err);
            break;
          }
        }
      } else if (cfg_.stall_timeout_ns && now_ns() - last_completion_ns > cfg_.stall_timeout_ns) {
        const Inflight& f = inflight.front();
        std::ostringstream m;
        m << "worker " << wi << " ring " << w.rings[f.local] << ": no completion for "
          << cfg_.stall_timeout_ns / 1000000 << " ms (head " << head[f.local] << ", done "
          << done[f.local] << ", outstanding posts " << inflight.size() << ")";
        fail(m.str());
        break;
      }
    }

    if (stop_seen && !progress && inflight.empty()) {
      bool all = true;
      if (!expected_.empty()) {
        for (size_t i = 0; i < nr; ++i) all = all && done[i] >= expected_[w.rings[i]];
      }
      if (all) break;
    }
    if (!progress && cfg_.yield_when_idle) sched_yield();
  }
  w.exited.store(true, std::memory_order_release);
}

bool WorkerPool::stop(const std::vector<uint64_t>* expected, uint64_t timeout_ns,
                      std::string* error) {
  if (expected) {
    if (expected->size() != rings_.size()) {
      if (error) *error = "stop: expected counts for " + std::to_string(expected->size()) +
                          " rings, pool has " + std::to_string(rings_.size());
      return false;
    }
    expected_ = *expected;
  }
  stopping_.store(true, std::memory_order_release);
  unpark();
  const uint64_t deadline = now_ns() + timeout_ns;
  bool all_exited = false;
  while (!all_exited) {
    all_exited = true;
    for (auto& w : workers_) all_exited = all_exited && w->exited.load(std::memory_order_acquire);
    if (all_exited) break;
    if (timeout_ns && now_ns() > deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (!all_exited) {
    // Name the rings that did not drain, with their counters, then make the workers leave.
    std::ostringstream m;
    m << "drain timed out after " << timeout_ns / 1000000 << " ms:";
    for (size_t r = 0; r < rings_.size(); ++r) {
      const uint64_t h = load_acquire_sys(rings_[r].head);
      m << " ring " << r << " (worker " << r % cfg_.workers << ") head " << h << " done "
        << ring_done_[r].load(std::memory_order_relaxed);
      if (!expected_.empty()) m << " expected " << expected_[r];
      m << ";";
    }
    fail(m.str());
  }
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  if (failed()) {
    if (error) *error = this->error();
    return false;
  }
  return true;
}

}  // namespace proxy
}  // namespace gicomm
