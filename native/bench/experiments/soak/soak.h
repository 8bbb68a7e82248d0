// The reliability soak (experiment soak; docs/soak.md is the full description): what its parts
// share. Producers are forked processes (producers.cpp) writing into MAP_SHARED queues; a verifier
// checks every executed op exactly once and in order (verifier.cpp); the soak loop kills and
// restarts producers while rate windows run (loop.cpp); each target sets up its queues and
// consumer (targets.cpp: the softnic's SQ rings, or mini-proxy's rings and worker pool).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gicomm/mlx5/queue.h"
#include "gicomm/proxy/backend.h"
#include "gicomm/proxy/ring.h"
#include "gicomm/softnic/softnic.h"
#include "harness/harness.h"

namespace gicomm::soak {

using bench::PointFailure;

constexpr uint32_t kMaxProducers = 64;
constexpr uint32_t kMaxQueues = 256;
constexpr uint32_t kMaxQueuesPerProducer = 16;
constexpr uint32_t kMaxOpBatch = 16;

// ---- operation tags ----------------------------------------------------------------------------------
// tag(p, s) = (p + 1) << 40 | (s + 1): never 0, names the producer and its sequence number. A doubled
// fetch-add (2 * tag) decodes to another producer, so a duplicate execution cannot pass as valid.
constexpr uint64_t kSeqMask = (1ull << 40) - 1;
inline uint64_t tag_of_op(uint32_t p, uint64_t s) { return (uint64_t(p + 1) << 40) | ((s + 1) & kSeqMask); }
inline uint32_t tag_producer(uint64_t t) { return uint32_t(t >> 40) - 1; }
inline uint64_t tag_seq(uint64_t t) { return (t & kSeqMask) - 1; }

// MAP_SHARED anonymous memory (survives a producer's SIGKILL; the parent frees it).
void* shm_alloc(size_t bytes);
void shm_free(void* p, size_t bytes);

// Maps the shared softnic queue pages back to private memory when the point ends, on every path
// (the SoftNic frees them with free(); they must not stay shared with later producer processes).
struct SharedRegions {
  std::vector<std::pair<void*, size_t>> regions;
  void share(void* p, size_t bytes);
  ~SharedRegions();
};

// Joins a thread on every path (after setting its stop flag).
struct JoinGuard {
  std::thread& t;
  std::atomic<bool>& stop;
  ~JoinGuard() {
    stop.store(true, std::memory_order_release);
    if (t.joinable()) t.join();
  }
};

template <class T>
T ld(const T* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
template <class T>
void st(T* p, T v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

// A producer's durable progress, in shared memory: it survives the producer's SIGKILL.
//   committed: ops [0, committed) are submitted (their publication store is done and recorded).
//   intent_*: the batch being published; intent_count == 0 means none. Written before the first
//   store into the queue, cleared after the commit; recovery resolves it against the queue itself.
struct alignas(64) ProducerLog {
  uint64_t committed;
  uint64_t batches;
  uint64_t intent_seq;
  uint64_t intent_pos;
  uint32_t intent_count;
  uint32_t intent_queue;
  uint64_t incarnations;   // processes started for this producer
  uint64_t rolled_forward; // recoveries that found the batch published
  uint64_t dropped;        // recoveries that found (part of) the batch unpublished
  uint64_t queue_pos[kMaxQueuesPerProducer];  // next WQE index (engine) / ticket (rings) per owned queue
};

struct Shared {
  alignas(64) uint32_t stop;
  alignas(64) uint64_t credit[kMaxQueues];  // engine: WQEs verified per QP (producer flow control)
  ProducerLog log[kMaxProducers];
};

// ---- the configuration a producer process needs (copied by fork, read-only) ---------------------------
struct Setup {
  bool engine = true;
  uint32_t producers = 2, queues = 2, depth = 256, max_batch = 8;
  uint64_t seed = 1;
  pid_t parent = 0;       // the driver: a producer whose parent is gone exits (no orphan spins)
  uint64_t dwell_ns = 0;  // producer pause before each store of a batch (widens the mid-batch window)
  int inject = 0;  // verifier self-test: 0 none, 1 lose, 2 duplicate, 3 blind_recovery (see soak_point)
  Shared* sh = nullptr;
  // engine
  mlx5::SqDesc sq[kMaxQueues]{};
  uint64_t dst_addr = 0, old_addr = 0;
  uint32_t dst_key = 0, old_key = 0;
  // rings
  proxy::RingView ring[kMaxQueues]{};

  uint32_t owned(uint32_t p) const { return (queues - p + producers - 1) / producers; }  // queues q = p + k*P
  uint32_t queue_of(uint32_t p, uint32_t k) const { return p + k * producers; }
};

// Resolve the batch a dead producer left in flight (idempotent: a successor process, or the
// parent at the end, does it the same way).
void recover(const Setup& su, uint32_t p);

// ---- exactly-once bookkeeping --------------------------------------------------------------------------
// One bit per (producer, seq), in lazily allocated chunks so concurrent workers can mark bits.
class SeenBits {
 public:
  static constexpr uint64_t kChunkBits = 1ull << 22;
  static constexpr uint64_t kChunks = 1ull << 14;  // 2^36 ops per producer
  explicit SeenBits(uint32_t producers) : chunks_(size_t(producers) * kChunks) {
    for (auto& c : chunks_) c.store(nullptr);
  }
  ~SeenBits() {
    for (auto& c : chunks_) delete[] c.load();
  }
  // Sets the bit; returns true if it was already set. Throws past the capacity.
  bool test_and_set(uint32_t p, uint64_t s) {
    const uint64_t c = s / kChunkBits;
    if (c >= kChunks) throw PointFailure("sequence beyond the verifier's capacity");
    std::atomic<std::atomic<uint64_t>*>& slot = chunks_[size_t(p) * kChunks + c];
    std::atomic<uint64_t>* words = slot.load(std::memory_order_acquire);
    if (words == nullptr) {
      auto* fresh = new std::atomic<uint64_t>[kChunkBits / 64];
      for (uint64_t i = 0; i < kChunkBits / 64; ++i) fresh[i].store(0, std::memory_order_relaxed);
      if (slot.compare_exchange_strong(words, fresh, std::memory_order_acq_rel)) {
        words = fresh;
      } else {
        delete[] fresh;
      }
    }
    const uint64_t b = s % kChunkBits;
    const uint64_t m = 1ull << (b % 64);
    return (words[b / 64].fetch_or(m, std::memory_order_relaxed) & m) != 0;
  }

 private:
  std::vector<std::atomic<std::atomic<uint64_t>*>> chunks_;
};

struct Tally {
  std::atomic<uint64_t> executed{0};    // ops seen executed (once or more)
  std::atomic<uint64_t> duplicated{0};  // executions of an op already executed
  std::atomic<uint64_t> reordered{0};   // an op executed before an earlier op of the same queue
  std::atomic<uint64_t> misdirected{0}; // wrong producer for the queue, wrong slot, bad payload
  std::atomic<uint64_t> unsubmitted{0}; // executed but never recorded as submitted (checked at the end)
  std::mutex mu;
  std::string first_error;
  void note(const std::string& e) {
    std::lock_guard<std::mutex> g(mu);
    if (first_error.empty()) first_error = e;
  }
};

void account(Tally& t, SeenBits& seen, uint32_t q, uint32_t owner, uint64_t tag, int64_t* last_seq);

// ---- rings: a channel wrapper that checks every descriptor a worker posts ----------------------------
struct RingCheck {
  const Setup* su = nullptr;
  Tally* tally = nullptr;
  SeenBits* seen = nullptr;
  std::vector<uint64_t> consumed;   // per ring: descriptors posted (its worker only)
  std::vector<int64_t> last_seq;    // per ring
  std::vector<uint64_t> shadow;     // per destination slot: the last value posted to it
  std::atomic<uint64_t> retired{0};
};
// The rings target's backend: `inner` wrapped so every descriptor a worker posts is checked.
std::unique_ptr<proxy::Backend> make_checking_backend(std::unique_ptr<proxy::Backend> inner, RingCheck* check);

// ---- producer processes: start, kill, restart ---------------------------------------------------------
class Producers {
 public:
  Producers(const Setup& su, uint64_t seed, double aim) : su_(su), pids_(su.producers, -1), rng_(seed ^ 0xabcdef), aim_(aim) {}
  ~Producers() { stop_all(); }
  void start(uint32_t p);
  void start_all();
  // SIGKILL a random producer, reap it, start its successor. Returns false if one had died on its own.
  bool kill_one(std::string* error);
  // A producer that exited while it should be running is an error (it should only ever be killed).
  bool reap_unexpected(std::string* error);
  // Graceful end: the stop flag is set; wait, and kill whatever does not exit within 5 s.
  void stop_all();
  uint64_t kills = 0, restarts = 0, aimed = 0;

 private:
  const Setup& su_;
  std::vector<pid_t> pids_;
  std::mt19937_64 rng_;
  double aim_;
};

struct RunParams {
  bool engine = true;
  double duration_s = 10;
  uint32_t producers = 2, queues = 2, workers = 1, depth = 256, max_batch = 8, engine_threads = 1;
  double kill_every_ms = 100;
  double aim = 0.5;
  uint64_t dwell_ns = 1000;
  uint64_t seed = 1;
  uint32_t window_ms = 1000;
  int inject = 0;
};

struct Outcome {
  uint64_t submitted = 0, executed = 0, lost = 0, duplicated = 0, reordered = 0, misdirected = 0, unsubmitted = 0;
  uint64_t kills = 0, restarts = 0, aimed = 0, rolled_forward = 0, dropped = 0, incarnations = 0;
  double seconds = 0;
  std::vector<double> window_rates;  // Mops/s per window
  std::string error;
};

// Main loop shared by both targets: producers, killer, rate windows. `progress` reads the ops done.
void soak_loop(const RunParams& rp, const Setup& su, Producers& procs, const std::function<uint64_t()>& progress,
               const std::function<std::string()>& consumer_error, Outcome* out);
// Per-producer totals from the logs, then lost / unsubmitted from the seen bits.
void settle(const Setup& su, SeenBits& seen, Tally& t, Outcome* out);
// The producers' configuration for a run, with its zeroed shared block (freed by the caller).
std::unique_ptr<Setup> make_setup(const RunParams& rp, bool engine);
// Queue q's published position: the next WQE index (engine) or ticket (rings) its producer logged.
uint64_t published_of(const Setup& su, uint32_t q);
// The first QP whose verified count is behind what its producer published, or -1 when none is.
int64_t first_unverified(const Setup& su);
// The run's error: the soak loop's own, else the drain's, else the engine's count against what the
// producers published, else the verifier's first finding.
void conclude(Outcome* out, const std::string& drain_error, const softnic::Counters& c, uint64_t published,
              Tally& tally);

// The two targets; `timeout_ms` bounds the final drain (at least 5 s).
Outcome run_engine(const RunParams& rp, int timeout_ms);
Outcome run_rings(const RunParams& rp, int timeout_ms);

}  // namespace gicomm::soak
