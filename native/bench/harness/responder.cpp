#include "harness/responder.h"

#include <atomic>
#include <cstdlib>
#include <string>
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

// The words and values of ping i and its answer (word indexes: 8-byte words of each buffer).
struct Rule {
  std::string scheme;
  uint32_t window = 1, ping = 0, pong = 0;
  uint32_t ping_word(uint64_t i) const { return scheme == "flag" ? ping : payload_slot(0, window, i); }
  uint32_t pong_word(uint64_t i) const { return scheme == "flag" ? pong : payload_slot(1, window, i); }
  uint64_t ping_value(uint64_t i) const { return scheme == "flag" ? i + 1 : payload_value(0, i); }
  uint64_t pong_value(uint64_t i) const { return scheme == "flag" ? i + 1 : payload_value(1, i); }
};

class Pong final : public Responder {
 public:
  Pong(const ResponderSetup& s, const Rule& rule, uint64_t wait_ns, bool yield)
      : landing_(s.landing), rule_(rule), wait_ns_(wait_ns), timeout_ns_(s.timeout_ns), yield_(yield) {
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
  ~Pong() override {
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
      const uint32_t slot = rule_.ping_word(i);
      const uint64_t want = rule_.ping_value(i);
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
      const uint32_t info = proxy::make_info(proxy::Op::write_inline, rule_.pong_word(i), false);
      proxy::WaitError we{};
      if (proxy::enqueue_tuned(views_[0], tp, rule_.pong_value(i), info, timeout_ns_, &we) == ~0ull) {
        why_ = "its ring stayed full at the answer to ping " + std::to_string(i);
        return;
      }
      ++answered_;
    }
  }

  const uint64_t* landing_;
  const Rule rule_;
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

std::unique_ptr<Responder> pong_responder(const ResponderSetup& s) {
  Rule rule;
  rule.scheme = s.request.get("scheme");
  uint64_t window = 1, ping = 0, pong = 0, wait_ms = 0;
  std::string err;
  auto u64 = [&](const char* key, uint64_t max, uint64_t* v) {
    if (!s.request.get_u64(key, max, v, &err)) throw PointFailure("responder: " + err);
  };
  const uint64_t words = s.landing_bytes / 8;
  u64("wait_ms", 86400000, &wait_ms);
  if (rule.scheme == "proxy-pingpong") {
    u64("window", uint64_t(1) << 24, &window);
    if (window == 0 || (window & (window - 1)) || 2 * window > words)
      throw PointFailure("responder: window " + std::to_string(window) +
                         " must be a power of two whose two rings fit the " + std::to_string(s.landing_bytes) +
                         "-byte buffer");
  } else if (rule.scheme == "flag") {
    u64("ping_word", words ? words - 1 : 0, &ping);
    u64("pong_word", proxy::kInfoSlotMask, &pong);
  } else {
    throw PointFailure("responder: scheme '" + rule.scheme + "' is not one it answers; allowed: proxy-pingpong, flag");
  }
  rule.window = uint32_t(window);
  rule.ping = uint32_t(ping);
  rule.pong = uint32_t(pong);
  return std::make_unique<Pong>(s, rule, wait_ms * 1000000ull, s.request.get("yield") == "1");
}

}  // namespace gicomm::bench
