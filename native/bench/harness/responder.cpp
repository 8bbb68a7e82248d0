#include "harness/responder.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gicomm/proxy/pool.h"
#include "harness/errors.h"
#include "harness/responder_parts.h"

namespace gicomm::bench {

bool responder_muted() {
  const char* m = std::getenv("GICOMM_TEST_RESPONDER_MUTE");
  return m && *m == '1';
}

PongRequest parse_pong_request(const ResponderSetup& s) {
  PongRequest q;
  const std::string scheme = s.request.get("scheme");
  uint64_t window = 1, ping = 0, pong = 0, wait_ms = 0;
  std::string err;
  auto u64 = [&](const char* key, uint64_t max, uint64_t* v) {
    if (!s.request.get_u64(key, max, v, &err)) throw PointFailure("responder: " + err);
  };
  const uint64_t words = s.landing_bytes / 8;
  u64("wait_ms", 86400000, &wait_ms);
  if (scheme == "proxy-pingpong") {
    u64("window", uint64_t(1) << 24, &window);
    if (window == 0 || (window & (window - 1)) || 2 * window > words)
      throw PointFailure("responder: window " + std::to_string(window) +
                         " must be a power of two whose two rings fit the " + std::to_string(s.landing_bytes) +
                         "-byte buffer");
  } else if (scheme == "flag") {
    u64("ping_word", words ? words - 1 : 0, &ping);
    u64("pong_word", proxy::kInfoSlotMask, &pong);
  } else {
    throw PointFailure("responder: scheme '" + scheme + "' is not one it answers; allowed: proxy-pingpong, flag");
  }
  q.rule.flag = scheme == "flag";
  q.rule.window = uint32_t(window);
  q.rule.ping = uint32_t(ping);
  q.rule.pong = uint32_t(pong);
  q.wait_ns = wait_ms * 1000000ull;
  q.yield = s.request.get("yield") == "1";
  const std::string enqueue = s.request.has("enqueue") ? s.request.get("enqueue") : "tuned";
  if (enqueue != "tuned" && enqueue != "baseline")
    throw PointFailure("responder: enqueue '" + enqueue + "' is not one it uses; allowed: tuned, baseline");
  const std::string store = s.request.has("store") ? s.request.get("store") : "sys";
  if (store != "sys" && store != "gpu" && store != "weak")
    throw PointFailure("responder: store '" + store + "' is not a scope it stores at; allowed: sys, gpu, weak");
  q.tuned = enqueue == "tuned";
  q.store_scope = store_scope_of(store);
  return q;
}

std::unique_ptr<proxy::WorkerPool> start_answer_worker(const ResponderSetup& s, const proxy::RingView& ring,
                                                       bool yield) {
  proxy::PoolConfig pc;
  pc.workers = 1;
  pc.numa_node = -1;
  pc.yield_when_idle = yield;
  pc.stall_timeout_ns = s.timeout_ns;
  std::string err;
  auto pool = proxy::WorkerPool::create(pc, {ring}, s.backend, nullptr, &err);
  if (!pool || !pool->start(false, &err)) throw PointFailure("responder's mini-proxy pool: " + err);
  return pool;
}

bool finish_answers(proxy::WorkerPool& worker, const PongOutcome& o, uint64_t wait_ns, uint64_t timeout_ns,
                    std::string* state) {
  std::string err;
  const std::vector<uint64_t> expected{o.answered};
  const bool drained = worker.stop(&expected, timeout_ns, &err);
  std::string then;
  if (o.why == kPongPingTimeout)
    then = "timed out waiting for ping " + std::to_string(o.at) + " after " + std::to_string(wait_ns / 1000000) +
           " ms (word " + std::to_string(o.word) + " holds " + std::to_string(o.held) + ")";
  else if (o.why == kPongRingFull)
    then = "its ring stayed full at the answer to ping " + std::to_string(o.at);
  else
    then = "was stopped waiting for ping " + std::to_string(o.seen);
  *state = "saw " + std::to_string(o.seen) + " pings, answered " + std::to_string(o.answered) + ", then " + then;
  if (!drained) *state += "; its worker did not complete the answers: " + err;
  return o.why == kPongStopped && drained && o.answered == o.seen;
}

namespace {

ServeFn& gpu_responder() {
  static ServeFn fn;
  return fn;
}

// The host thread: polls the landing word, answers through a ring in host memory.
class Pong final : public Responder {
 public:
  Pong(const ResponderSetup& s, const PongRequest& q) : landing_(s.landing), q_(q), timeout_ns_(s.timeout_ns) {
    const proxy::RingView ring{slots_.data(), &counters_.head, &counters_.done, &counters_.tail,
                               uint32_t(slots_.size()), 0};
    ring_ = ring;
    pool_ = start_answer_worker(s, ring_, q.yield);
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
    *answers = out_.answered;
    return finish_answers(*pool_, out_, q_.wait_ns, timeout_ns_, state);
  }

 private:
  void run() {
    proxy::TunedProducer tp{0, 0};
    const AnswerRule& rule = q_.rule;
    for (uint64_t i = 0;; ++i) {
      const uint32_t slot = rule.ping_word(i);
      const uint64_t want = rule.ping_value(i);
      auto start = std::chrono::steady_clock::now();
      for (;;) {
        if (__atomic_load_n(&landing_[slot], __ATOMIC_ACQUIRE) == want) break;
        if (stop_.load(std::memory_order_relaxed)) return;
        if (std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(q_.wait_ns)) {
          out_.why = kPongPingTimeout;
          out_.at = i;
          out_.word = slot;
          out_.held = __atomic_load_n(&landing_[slot], __ATOMIC_ACQUIRE);
          return;
        }
        if (q_.yield) std::this_thread::yield();
      }
      ++out_.seen;
      if (responder_muted()) continue;
      const uint32_t info = proxy::make_info(proxy::Op::write_inline, rule.pong_word(i), false);
      proxy::WaitError we{};
      if (proxy::enqueue_tuned(ring_, tp, rule.pong_value(i), info, timeout_ns_, &we) == ~0ull) {
        out_.why = kPongRingFull;
        out_.at = i;
        return;
      }
      ++out_.answered;
    }
  }

  const uint64_t* landing_;
  const PongRequest q_;
  const uint64_t timeout_ns_;
  std::vector<proxy::Desc> slots_ = std::vector<proxy::Desc>(256);
  proxy::RingCounters counters_{};
  proxy::RingView ring_{};
  std::unique_ptr<proxy::WorkerPool> pool_;
  std::atomic<bool> stop_{false};
  PongOutcome out_{};
  std::thread thread_;
};

}  // namespace

GpuResponderRegistration::GpuResponderRegistration(ServeFn fn) { gpu_responder() = std::move(fn); }

std::unique_ptr<Responder> pong_responder(const ResponderSetup& s) {
  return std::make_unique<Pong>(s, parse_pong_request(s));
}

std::unique_ptr<Responder> round_trip_responder(const ResponderSetup& s) {
  const std::string which = s.request.has("responder") ? s.request.get("responder") : "host";
  if (which == "host") return pong_responder(s);
  if (which != "gpu") throw PointFailure("responder '" + which + "' is not one rank 1 runs; allowed: host, gpu");
  if (!gpu_responder())
    throw PointFailure("responder 'gpu': this driver of rank 1 has no GPU responder (built without CUDA); "
                       "allowed here: host");
  return gpu_responder()(s);
}

std::string ask_responder(const Run& run, bool peer_pong, net::Message* ask) {
  const std::string which = run.point.params.get_string("responder", "host");
  if (!peer_pong) {
    if (run.point.params.has("responder"))
      throw PointFailure("bad parameter: responder '" + which +
                         "' names rank 1's half of a round trip between two ranks, and this point's answer does not "
                         "come from rank 1 (one process, or no round trip): leave responder out");
    return "";
  }
  ask->set("responder", which);
  return which == "gpu" ? kGpuPongResponderKind : kPongResponderKind;
}

}  // namespace gicomm::bench
