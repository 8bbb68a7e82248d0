#include "harness/responder.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gicomm/proxy/pool.h"
#include "harness/errors.h"
#include "harness/pingpong.h"

namespace gicomm::bench {

namespace {

// Tests only: the responder sees the pings and never answers (rank 0 must time out, and its record
// must say that rank 1 saw the ping).
bool muted() {
  const char* m = std::getenv("GICOMM_TEST_RESPONDER_MUTE");
  return m && *m == '1';
}

class ProxyPong final : public Responder {
 public:
  ProxyPong(const ResponderSetup& s, uint32_t window, uint64_t wait_ns, bool yield)
      : landing_(s.landing), window_(window), wait_ns_(wait_ns), timeout_ns_(s.timeout_ns), yield_(yield) {
    views_.push_back(proxy::RingView{slots_.data(), &counters_.head, &counters_.done, &counters_.tail,
                                     uint32_t(slots_.size()), 0});
    proxy::PoolConfig pc;
    pc.workers = 1;
    pc.numa_node = -1;
    pc.yield_when_idle = yield;
    pc.stall_timeout_ns = s.timeout_ns;
    std::string err;
    pool_ = proxy::WorkerPool::create(pc, views_, s.backend, nullptr, &err);
    if (!pool_ || !pool_->start(false, &err)) throw PointFailure("responder's mini-proxy pool: " + err);
    thread_ = std::thread([this] { run(); });
  }
  ~ProxyPong() override {
    uint64_t n = 0;
    std::string state;
    if (thread_.joinable()) stop(&n, &state);
  }

  bool stop(uint64_t* answers, std::string* state) override {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
    *answers = answered_;
    std::string err;
    const std::vector<uint64_t> expected{answered_};
    const bool drained = pool_->stop(&expected, timeout_ns_, &err);
    *state = "saw " + std::to_string(seen_) + " pings, answered " + std::to_string(answered_) + ", then " +
             (why_.empty() ? "was stopped waiting for ping " + std::to_string(seen_) : why_);
    if (!drained) *state += "; its worker did not complete the answers: " + err;
    return why_.empty() && drained && answered_ == seen_;
  }

 private:
  void run() {
    proxy::TunedProducer tp{0, 0};
    for (uint64_t i = 0;; ++i) {
      const uint32_t slot = payload_slot(0, window_, i);
      const uint64_t want = payload_value(0, i);
      auto start = std::chrono::steady_clock::now();
      for (;;) {
        if (__atomic_load_n(&landing_[slot], __ATOMIC_ACQUIRE) == want) break;
        if (stop_.load(std::memory_order_relaxed)) return;
        if (std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(wait_ns_)) {
          why_ = "timed out waiting for ping " + std::to_string(i) + " after " + std::to_string(wait_ns_ / 1000000) +
                 " ms (word " + std::to_string(slot) + " holds " +
                 std::to_string(__atomic_load_n(&landing_[slot], __ATOMIC_ACQUIRE)) + ")";
          return;
        }
        if (yield_) std::this_thread::yield();
      }
      ++seen_;
      if (muted()) continue;
      const uint32_t info = proxy::make_info(proxy::Op::write_inline, payload_slot(1, window_, i), false);
      proxy::WaitError we{};
      if (proxy::enqueue_tuned(views_[0], tp, payload_value(1, i), info, timeout_ns_, &we) == ~0ull) {
        why_ = "its ring stayed full at the answer to ping " + std::to_string(i);
        return;
      }
      ++answered_;
    }
  }

  const uint64_t* landing_;
  const uint32_t window_;
  const uint64_t wait_ns_, timeout_ns_;
  const bool yield_;
  std::vector<proxy::Desc> slots_ = std::vector<proxy::Desc>(256);
  proxy::RingCounters counters_{};
  std::vector<proxy::RingView> views_;
  std::unique_ptr<proxy::WorkerPool> pool_;
  std::atomic<bool> stop_{false};
  uint64_t seen_ = 0, answered_ = 0;
  std::string why_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Responder> proxy_pong_responder(const ResponderSetup& s) {
  uint64_t window = 0, wait_ms = 0;
  std::string err;
  if (!s.request.get_u64("window", uint64_t(1) << 24, &window, &err) ||
      !s.request.get_u64("wait_ms", 86400000, &wait_ms, &err))
    throw PointFailure("responder: " + err);
  if (window == 0 || (window & (window - 1)) || 2 * window * 8 > s.landing_bytes)
    throw PointFailure("responder: window " + std::to_string(window) +
                       " must be a power of two whose two rings fit the " + std::to_string(s.landing_bytes) +
                       "-byte buffer");
  return std::make_unique<ProxyPong>(s, uint32_t(window), wait_ms * 1000000ull, s.request.get("yield") == "1");
}

}  // namespace gicomm::bench
