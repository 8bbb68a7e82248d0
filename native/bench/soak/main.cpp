// gicomm-bench-soak: the reliability soak of issue 10 item 6 (docs/soak.md is the full description).
//
// --experiment soak, point params:
//   target (engine|rings), duration_s, producers, qps (engine) or rings (rings), workers (rings:
//   pool workers), kill_every_ms (mean of the exponential interval between two kills), seed,
//   depth (SQ WQEBBs / ring slots, power of two, default 256), max_batch (ops per publication,
//   1..16, default 8), window_ms (rate window, default 1000), engine_threads (default 1)
//
// Producers are forked processes. Everything they write lives in MAP_SHARED memory: their durable
// progress log (ProducerLog), and the queues they write into:
//   target=engine: the softnic QPs' SQ ring, doorbell record and doorbell pages. The softnic has no
//     placement hook taking a caller's pointer, so after create_qp the parent re-maps those
//     page-aligned, page-sized allocations in place as MAP_SHARED (contents copied), and maps them
//     back private before the SoftNic frees them. The CQs, the engine state and the cpu engine stay
//     in the parent. Each op is an atomic fetch-add of tag(producer, seq) on a per-WQE-slot word.
//   target=rings: the mini-proxy rings (RingView: slots, head, done) are allocated MAP_SHARED by
//     us; producers use enqueue_tuned (one producer per ring); the WorkerPool (softnic backend,
//     cpu engine) runs in the parent. Each op is an inline 8-byte write of tag(producer, seq).
// A killer thread SIGKILLs a random producer at exponential intervals and restarts it at once;
// the new process first recovers from the log (roll forward what was published, drop what was not).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.h"
#include "gicomm/mlx5/host_post.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/ring.h"
#include "gicomm/proxy/softnic_backend.h"
#include "gicomm/softnic/softnic.h"

using namespace gicomm;
using gicomm::bench::PointFailure;
using gicomm::bench::Record;

namespace {

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

// ---- shared memory ----------------------------------------------------------------------------------
void* shm_alloc(size_t bytes) {
  const size_t rounded = (bytes + 4095) & ~size_t(4095);
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw PointFailure(std::string("mmap shared: ") + std::strerror(errno));
  return p;
}
void shm_free(void* p, size_t bytes) {
  if (p) munmap(p, (bytes + 4095) & ~size_t(4095));
}

// Re-map a page-aligned region in place, keeping its contents: shared (so forked producers write the
// same pages the parent's engine reads) or back to private (before its owner frees it).
void remap_in_place(void* p, size_t bytes, bool shared) {
  const size_t rounded = (bytes + 4095) & ~size_t(4095);
  if (reinterpret_cast<uintptr_t>(p) % 4096 != 0)
    throw PointFailure("softnic queue memory is not page-aligned: cannot share it with producer processes");
  std::vector<uint8_t> keep(rounded);
  std::memcpy(keep.data(), p, rounded);
  void* q = mmap(p, rounded, PROT_READ | PROT_WRITE, (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS | MAP_FIXED,
                 -1, 0);
  if (q != p) throw PointFailure(std::string("mmap fixed: ") + std::strerror(errno));
  std::memcpy(p, keep.data(), rounded);
}

// Maps the shared softnic queue pages back to private memory when the point ends, on every path
// (the SoftNic frees them with free(); they must not stay shared with later producer processes).
struct SharedRegions {
  std::vector<std::pair<void*, size_t>> regions;
  void share(void* p, size_t bytes) {
    remap_in_place(p, bytes, true);
    regions.emplace_back(p, bytes);
  }
  ~SharedRegions() {
    for (auto& r : regions) {
      try {
        remap_in_place(r.first, r.second, false);
      } catch (...) {
      }
    }
  }
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

// Busy pause of a producer inside a batch: a slow producer (a GPU warp's stores cross PCIe one by
// one), and a window in which the killer's aimed kills land mid-batch.
inline void dwell(uint64_t ns) {
  if (ns == 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

inline uint64_t xorshift(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Resolve a batch in flight when the previous process died. Idempotent (absolute assignments), so a
// kill during recovery is recovered by the next process in the same way. Also run by the parent at
// the end for producers that are dead at that moment.
void recover(const Setup& su, uint32_t p) {
  ProducerLog& L = su.sh->log[p];
  const uint32_t n = ld(&L.intent_count);
  if (n == 0) return;
  const uint32_t k = L.intent_queue;
  const uint32_t q = su.queue_of(p, k);
  uint32_t published = 0;
  if (su.engine) {
    // Publication point: the 8-byte doorbell naming the batch's last WQE (the engine reads nothing
    // else). The previous doorbell names intent_pos - 1, so the two cannot be confused.
    const uint64_t db = ld(su.sq[q].doorbell);
    const bool rung = mlx5::doorbell_qpn(db) == su.sq[q].qpn &&
                      mlx5::doorbell_wqe_index(db) == uint16_t(L.intent_pos + n - 1);
    published = rung ? n : 0;
  } else {
    // Publication point: each descriptor's 16-byte store carrying its ticket's tag. Stores go in
    // ticket order, so the published part is a prefix; the slot keeps the tag until this producer
    // writes the ticket one lap later.
    const proxy::RingView& r = su.ring[q];
    while (published < n) {
      const uint64_t t = L.intent_pos + published;
      const proxy::Desc d = proxy::load16(&r.slots[t & (r.capacity - 1)]);
      if (d.seq != proxy::tag_of(t) || d.value != tag_of_op(p, L.intent_seq + published)) break;
      ++published;
    }
  }
  if (su.inject == 3) published = n;  // self-test: a recovery that trusts the intent blindly
  if (published > 0) {
    st(&L.queue_pos[k], L.intent_pos + published);
    st(&L.committed, L.intent_seq + published);
    st(&L.batches, L.batches + 1);
    st(&L.rolled_forward, L.rolled_forward + 1);
  }
  if (published < n) st(&L.dropped, L.dropped + 1);
  st(&L.intent_count, 0u);
}

// The producer process. Uses no heap (it is forked from a multithreaded parent) and ends with _exit.
[[noreturn]] void producer_main(const Setup& su, uint32_t p) {
  ProducerLog& L = su.sh->log[p];
  const uint64_t inc = __atomic_add_fetch(&L.incarnations, 1, __ATOMIC_ACQ_REL);
  if (getppid() != su.parent) _exit(0);
  recover(su, p);
  uint64_t rng = (su.seed * 0x9e3779b97f4a7c15ull) ^ (uint64_t(p + 1) << 32) ^ inc ^ 0x5bd1e995ull;
  if (rng == 0) rng = 1;
  const uint32_t nq = su.owned(p);
  while (ld(&su.sh->stop) == 0) {
    const uint32_t k = static_cast<uint32_t>(L.batches % nq);
    const uint32_t q = su.queue_of(p, k);
    const uint32_t n = 1 + static_cast<uint32_t>(xorshift(rng) % su.max_batch);
    const uint64_t pos = L.queue_pos[k];
    const uint64_t seq = L.committed;
    // Flow control: room for the whole batch (engine: verified WQEs; rings: the worker's head).
    bool room = false;
    for (uint32_t spins = 0; ld(&su.sh->stop) == 0; ++spins) {
      const uint64_t freed = su.engine ? ld(&su.sh->credit[q]) : ld(su.ring[q].head);
      if (pos + n - freed <= su.depth) {
        room = true;
        break;
      }
      if (spins > 64) sched_yield();
      if ((spins & 255) == 255 && getppid() != su.parent) _exit(0);
    }
    if (!room) break;
    if ((L.batches & 4095) == 0 && getppid() != su.parent) _exit(0);
    // Intent first, then the queue stores, then the publication, then the commit.
    L.intent_seq = seq;
    L.intent_pos = pos;
    L.intent_queue = k;
    st(&L.intent_count, n);
    if (su.engine) {
      const mlx5::SqDesc& sq = su.sq[q];
      mlx5::WqeImage img;
      for (uint32_t i = 0; i < n; ++i) {
        const uint64_t at = pos + i;
        mlx5::WqeHeader h;
        h.pi = static_cast<uint16_t>(at);
        h.qpn = sq.qpn;
        h.signaled = true;
        dwell(su.dwell_ns);
        const uint64_t slot = uint64_t(q) * su.depth + (at & (su.depth - 1));
        const uint32_t ds = mlx5::build_atomic_fetch_add(img, h, su.dst_addr + 8 * slot, su.dst_key,
                                                         tag_of_op(p, seq + i), su.old_addr + 8 * slot, su.old_key);
        mlx5::store_wqe(sq.buf, sq.wqe_cnt, static_cast<uint32_t>(at), img, ds);
      }
      dwell(su.dwell_ns);
      // The publication point: dbrec, then the doorbell naming the last WQE (host_post.h order).
      mlx5::host_ring_doorbell(sq, static_cast<uint32_t>(pos + n), mlx5::doorbell_value(img.seg[0]));
      dwell(su.dwell_ns);  // published, not yet committed: the window recovery must roll forward
    } else {
      const proxy::RingView& r = su.ring[q];
      proxy::TunedProducer tp{pos, ld(r.head)};
      for (uint32_t i = 0; i < n; ++i) {
        const uint64_t t = pos + i;
        dwell(su.dwell_ns);
        const uint32_t slot = q * su.depth + static_cast<uint32_t>(t & (su.depth - 1));
        // One 16-byte store per descriptor: each is its own publication point.
        proxy::enqueue_tuned(r, tp, tag_of_op(p, seq + i), proxy::make_info(proxy::Op::write_inline, slot, false), 0,
                             nullptr);
      }
      dwell(su.dwell_ns);
    }
    st(&L.queue_pos[k], pos + n);
    // Self-tests of the verifier: record an op that was never published (lose), or publish the same
    // sequence numbers again (duplicate), once every 997 batches.
    const bool fault = su.inject != 0 && L.batches % 997 == 996;
    st(&L.committed, seq + n + (fault && su.inject == 1 ? 1 : 0) - (fault && su.inject == 2 ? n : 0));
    st(&L.batches, L.batches + 1);
    st(&L.intent_count, 0u);
  }
  _exit(0);
}

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

// Per-queue check of one executed op: owner, per-queue order, exactly once.
void account(Tally& t, SeenBits& seen, uint32_t q, uint32_t owner, uint64_t tag, int64_t* last_seq) {
  const uint32_t p = tag_producer(tag);
  if (tag == 0 || p != owner) {
    t.misdirected++;
    t.note("queue " + std::to_string(q) + ": payload 0x" + [&] {
      char b[32];
      std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(tag));
      return std::string(b);
    }() + " is not an op of its producer " + std::to_string(owner));
    return;
  }
  const uint64_t s = tag_seq(tag);
  if (static_cast<int64_t>(s) <= *last_seq) {
    t.reordered++;
    t.note("queue " + std::to_string(q) + ": op (" + std::to_string(p) + ", " + std::to_string(s) +
           ") executed after op " + std::to_string(*last_seq));
  } else {
    *last_seq = static_cast<int64_t>(s);
  }
  if (seen.test_and_set(p, s)) {
    t.duplicated++;
    t.note("op (" + std::to_string(p) + ", " + std::to_string(s) + ") executed twice");
  } else {
    t.executed++;
  }
}

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

class CheckingChannel : public proxy::Channel {
 public:
  CheckingChannel(std::unique_ptr<proxy::Channel> inner, RingCheck* c) : inner_(std::move(inner)), c_(c) {}
  uint32_t room() const override { return inner_->room(); }
  bool post(const proxy::Desc* d, uint32_t n, std::string* error) override {
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t slot = proxy::info_slot(d[i].info);
      const uint32_t r = slot / c_->su->depth;
      if (r >= c_->su->queues || proxy::info_op(d[i].info) != proxy::Op::write_inline) {
        c_->tally->misdirected++;
        c_->tally->note("descriptor with slot " + std::to_string(slot) + " names no ring");
        continue;
      }
      const uint64_t t = c_->consumed[r]++;
      if (slot != r * c_->su->depth + (t & (c_->su->depth - 1))) {
        c_->tally->misdirected++;
        c_->tally->note("ring " + std::to_string(r) + ": ticket " + std::to_string(t) + " carries slot " +
                        std::to_string(slot));
      }
      account(*c_->tally, *c_->seen, r, r % c_->su->producers, d[i].value, &c_->last_seq[r]);
      c_->shadow[slot] = d[i].value;
    }
    return inner_->post(d, n, error);
  }
  int64_t poll(std::string* error) override {
    const int64_t k = inner_->poll(error);
    if (k > 0) c_->retired.fetch_add(uint64_t(k), std::memory_order_relaxed);
    return k;
  }

 private:
  std::unique_ptr<proxy::Channel> inner_;
  RingCheck* c_;
};

class CheckingBackend : public proxy::Backend {
 public:
  CheckingBackend(std::unique_ptr<proxy::Backend> inner, RingCheck* c) : inner_(std::move(inner)), c_(c) {}
  const char* name() const override { return inner_->name(); }
  std::unique_ptr<proxy::Channel> open(uint32_t worker, std::string* error) override {
    auto ch = inner_->open(worker, error);
    if (!ch) return nullptr;
    return std::make_unique<CheckingChannel>(std::move(ch), c_);
  }

 private:
  std::unique_ptr<proxy::Backend> inner_;
  RingCheck* c_;
};

// ---- producer processes: start, kill, restart ---------------------------------------------------------
class Producers {
 public:
  Producers(const Setup& su, uint64_t seed, double aim) : su_(su), pids_(su.producers, -1), rng_(seed ^ 0xabcdef), aim_(aim) {}
  ~Producers() { stop_all(); }
  void start(uint32_t p) {
    const pid_t pid = fork();
    if (pid < 0) throw PointFailure(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) producer_main(su_, p);
    pids_[p] = pid;
  }
  void start_all() {
    for (uint32_t p = 0; p < su_.producers; ++p) start(p);
  }
  // SIGKILL a random producer, reap it, start its successor. Returns false if one had died on its own.
  bool kill_one(std::string* error) {
    const uint32_t p = static_cast<uint32_t>(rng_() % su_.producers);
    if (!reap_unexpected(error)) return false;
    // An aimed kill waits (up to 20 ms) until the producer has a batch in flight, then kills at once;
    // the others kill wherever the producer happens to be (mostly waiting for room).
    if (std::uniform_real_distribution<double>(0, 1)(rng_) < aim_) {
      ++aimed;
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
      while (ld(&su_.sh->log[p].intent_count) == 0 && std::chrono::steady_clock::now() < until) {
      }
    }
    ::kill(pids_[p], SIGKILL);
    int status = 0;
    waitpid(pids_[p], &status, 0);
    pids_[p] = -1;
    ++kills;
    start(p);
    ++restarts;
    return true;
  }
  // A producer that exited while it should be running is an error (it should only ever be killed).
  bool reap_unexpected(std::string* error) {
    for (uint32_t p = 0; p < su_.producers; ++p) {
      int status = 0;
      if (pids_[p] > 0 && waitpid(pids_[p], &status, WNOHANG) == pids_[p]) {
        pids_[p] = -1;
        *error = "producer " + std::to_string(p) + " died on its own (status " + std::to_string(status) + ")";
        return false;
      }
    }
    return true;
  }
  // Graceful end: the stop flag is set; wait, and kill whatever does not exit within 5 s.
  void stop_all() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (uint32_t p = 0; p < pids_.size(); ++p) {
      if (pids_[p] <= 0) continue;
      int status = 0;
      while (waitpid(pids_[p], &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          ::kill(pids_[p], SIGKILL);
          waitpid(pids_[p], &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      pids_[p] = -1;
    }
  }
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
               const std::function<std::string()>& consumer_error, Outcome* out) {
  std::atomic<bool> end{false};
  std::atomic<bool> killer_failed{false};
  std::string killer_error;  // written by the killer before it sets killer_failed
  std::thread killer([&] {
    std::mt19937_64 rng(rp.seed * 7919 + 17);
    std::exponential_distribution<double> gap(1.0 / std::max(rp.kill_every_ms, 0.001));
    while (!end.load()) {
      const auto next = std::chrono::steady_clock::now() + std::chrono::microseconds(int64_t(gap(rng) * 1000));
      while (!end.load() && std::chrono::steady_clock::now() < next) std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (end.load()) break;
      if (!procs.kill_one(&killer_error)) {
        killer_failed.store(true, std::memory_order_release);
        break;
      }
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  const auto stop_at = t0 + std::chrono::microseconds(int64_t(rp.duration_s * 1e6));
  uint64_t last = progress();
  auto wstart = t0;
  while (std::chrono::steady_clock::now() < stop_at) {
    const auto wend = std::min(wstart + std::chrono::milliseconds(rp.window_ms), stop_at);
    std::this_thread::sleep_until(wend);
    const uint64_t now_ops = progress();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - wstart).count();
    if (secs > 0.5 * rp.window_ms / 1000.0) out->window_rates.push_back(double(now_ops - last) / secs / 1e6);
    last = now_ops;
    wstart = std::chrono::steady_clock::now();
    if (killer_failed.load(std::memory_order_acquire) || !consumer_error().empty()) break;
  }
  end.store(true);
  killer.join();
  st(&su.sh->stop, 1u);
  procs.stop_all();
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out->kills = procs.kills;
  out->restarts = procs.restarts;
  out->aimed = procs.aimed;
  if (!killer_error.empty()) out->error = killer_error;
  // Producers killed just before the end (or that did not exit) leave a batch in flight: resolve it
  // exactly as a successor process would.
  for (uint32_t p = 0; p < su.producers; ++p) recover(su, p);
}

// Per-producer totals from the logs, then lost / unsubmitted from the seen bits.
void settle(const Setup& su, SeenBits& seen, Tally& t, Outcome* out) {
  for (uint32_t p = 0; p < su.producers; ++p) {
    const ProducerLog& L = su.sh->log[p];
    out->submitted += L.committed;
    out->rolled_forward += L.rolled_forward;
    out->dropped += L.dropped;
    out->incarnations += L.incarnations;
    // Every submitted op must be marked: test_and_set on an unmarked bit means it never executed.
    for (uint64_t s = 0; s < L.committed; ++s)
      if (!seen.test_and_set(p, s)) {
        if (out->lost == 0) t.note("op (" + std::to_string(p) + ", " + std::to_string(s) + ") submitted, never executed");
        out->lost++;
      }
  }
  out->executed = t.executed.load();
  out->duplicated = t.duplicated.load();
  out->reordered = t.reordered.load();
  out->misdirected = t.misdirected.load();
  // executed counts distinct ops; those beyond what was submitted were never recorded as submitted.
  const uint64_t matched = out->submitted - out->lost;
  if (out->executed > matched) {
    out->unsubmitted = out->executed - matched;
    t.note(std::to_string(out->unsubmitted) + " ops executed that no producer recorded as submitted");
  }
}

// The producers' configuration for a run, with its zeroed shared block (freed by the caller).
std::unique_ptr<Setup> make_setup(const RunParams& rp, bool engine) {
  auto su = std::make_unique<Setup>();
  su->engine = engine;
  su->producers = rp.producers;
  su->queues = rp.queues;
  su->depth = rp.depth;
  su->max_batch = rp.max_batch;
  su->seed = rp.seed;
  su->inject = rp.inject;
  su->dwell_ns = rp.dwell_ns;
  su->parent = getpid();
  su->sh = static_cast<Shared*>(shm_alloc(sizeof(Shared)));
  std::memset(static_cast<void*>(su->sh), 0, sizeof(Shared));
  return su;
}

// Queue q's published position: the next WQE index (engine) or ticket (rings) its producer logged.
uint64_t published_of(const Setup& su, uint32_t q) { return su.sh->log[q % su.producers].queue_pos[q / su.producers]; }

// The first QP whose verified count is behind what its producer published, or -1 when none is.
int64_t first_unverified(const Setup& su) {
  for (uint32_t q = 0; q < su.queues; ++q)
    if (ld(&su.sh->credit[q]) < published_of(su, q)) return q;
  return -1;
}

// The run's error: the soak loop's own, else the drain's, else the engine's count against what the
// producers published, else the verifier's first finding.
void conclude(Outcome* out, const std::string& drain_error, const softnic::Counters& c, uint64_t published,
              Tally& tally) {
  if (out->error.empty()) out->error = drain_error;
  if (out->error.empty() && (c.errors != 0 || c.wqes != published))
    out->error = "engine executed " + std::to_string(c.wqes) + " WQEs with " + std::to_string(c.errors) +
                 " errors; producers published " + std::to_string(published);
  if (out->error.empty()) {
    std::lock_guard<std::mutex> g(tally.mu);
    out->error = tally.first_error;
  }
}

// ---- target=engine -------------------------------------------------------------------------------------
Outcome run_engine(const RunParams& rp, const bench::Options& o) {
  Outcome out;
  auto su = make_setup(rp, true);
  const size_t words = size_t(rp.queues) * rp.depth;
  // Destination words (fetch-add targets) and fetched old values: parent memory only (the engine
  // and the verifier touch them; producers only name their addresses).
  std::vector<uint64_t> dst(words, 0), old(words, 0);
  softnic::SoftNic nic;
  const auto dmr = nic.register_mr(dst.data(), words * 8, softnic::kAccessRemoteAtomic | softnic::kAccessRemoteWrite);
  const auto omr = nic.register_mr(old.data(), words * 8, softnic::kAccessLocalWrite);
  su->dst_addr = dmr.addr;
  su->dst_key = dmr.rkey;
  su->old_addr = omr.addr;
  su->old_key = omr.lkey;
  softnic::QueueConfig qc;
  qc.sq_wqebbs = rp.depth;
  qc.cq_entries = rp.depth;  // every WQE signaled; at most depth outstanding (flow control by credit)
  SharedRegions shared;      // declared after nic: unshared before the SoftNic frees the queues
  for (uint32_t q = 0; q < rp.queues; ++q) {
    nic.create_qp(qc);
    su->sq[q] = nic.sq(q);
    shared.share(su->sq[q].buf, size_t(rp.depth) * mlx5::kSendWqeBB);
    shared.share(su->sq[q].dbrec, 64);
    shared.share(su->sq[q].doorbell, 64);
  }
  SeenBits seen(rp.producers);
  Tally tally;
  softnic::CpuEngine engine(nic, static_cast<int>(rp.engine_threads));
  engine.start();
  // Verifier: consumes every CQE, checks the executed op and frees its slot (credit) for the producer.
  std::atomic<bool> vstop{false};
  std::atomic<uint64_t> verified_total{0};
  std::vector<uint64_t> vpos(rp.queues, 0);
  std::thread verifier([&] {
    std::vector<mlx5::HostCq> cqs;
    for (uint32_t q = 0; q < rp.queues; ++q) cqs.emplace_back(nic.cq(q));
    std::vector<int64_t> last_seq(rp.queues, -1);
    uint32_t idle = 0;
    for (;;) {
      const bool stopping = vstop.load(std::memory_order_acquire);
      uint64_t got = 0;
      for (uint32_t q = 0; q < rp.queues; ++q) {
        mlx5::CqeFields c;
        while (cqs[q].poll(&c)) {
          ++got;
          if (c.opcode != mlx5::kCqeReq) {
            tally.misdirected++;
            tally.note("QP " + std::to_string(q) + ": error CQE, syndrome " + std::to_string(c.syndrome) +
                       " at WQE " + std::to_string(c.wqe_counter));
          }
          if (c.wqe_counter != static_cast<uint16_t>(vpos[q])) {
            tally.reordered++;
            tally.note("QP " + std::to_string(q) + ": CQE for WQE " + std::to_string(c.wqe_counter) + ", expected " +
                       std::to_string(static_cast<uint16_t>(vpos[q])));
          }
          const size_t i = size_t(q) * rp.depth + (vpos[q] & (rp.depth - 1));
          const uint64_t v = __atomic_load_n(&dst[i], __ATOMIC_ACQUIRE);
          const uint64_t was = __atomic_load_n(&old[i], __ATOMIC_ACQUIRE);
          if (v == 0) {
            // A completion with no effect: the op ran nowhere (counted lost in settle()).
            tally.note("QP " + std::to_string(q) + ": WQE " + std::to_string(vpos[q]) + " completed with no effect");
          } else {
            if (was != 0) {
              tally.duplicated++;
              tally.note("QP " + std::to_string(q) + ": slot held a value before its op ran");
            }
            account(tally, seen, q, q % rp.producers, v, &last_seq[q]);
          }
          dst[i] = 0;
          old[i] = 0;
          ++vpos[q];
          st(&su->sh->credit[q], vpos[q]);
          verified_total.fetch_add(1, std::memory_order_relaxed);
        }
      }
      if (got == 0) {
        if (stopping) break;
        if (++idle > 64) std::this_thread::yield();
      } else {
        idle = 0;
      }
    }
  });
  JoinGuard vguard{verifier, vstop};
  {
    Producers procs(*su, rp.seed, rp.aim);
    procs.start_all();
    soak_loop(rp, *su, procs, [&] { return verified_total.load(std::memory_order_relaxed); },
              [&] { std::lock_guard<std::mutex> g(tally.mu); return tally.first_error; }, &out);
  }
  // Drain: every published WQE must complete and be verified.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(o.timeout_ms, 5000));
  std::string drain_error;
  while (first_unverified(*su) >= 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      const int64_t q = first_unverified(*su);
      if (q >= 0)
        drain_error = "drain timed out: QP " + std::to_string(q) + " verified " + std::to_string(ld(&su->sh->credit[q])) +
                      " of " + std::to_string(published_of(*su, uint32_t(q))) + " published WQEs";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  vstop.store(true, std::memory_order_release);
  verifier.join();
  engine.stop();
  const softnic::Counters c = engine.counters();
  settle(*su, seen, tally, &out);
  uint64_t published = 0;
  for (uint32_t q = 0; q < rp.queues; ++q) published += published_of(*su, q);
  conclude(&out, drain_error, c, published, tally);
  shm_free(su->sh, sizeof(Shared));
  return out;
}

// ---- target=rings --------------------------------------------------------------------------------------
Outcome run_rings(const RunParams& rp, const bench::Options& o) {
  Outcome out;
  auto su = make_setup(rp, false);
  const size_t slots_bytes = size_t(rp.queues) * rp.depth * sizeof(proxy::Desc);
  const size_t ctr_bytes = size_t(rp.queues) * sizeof(proxy::RingCounters);
  auto* slots = static_cast<proxy::Desc*>(shm_alloc(slots_bytes));
  auto* ctrs = static_cast<proxy::RingCounters*>(shm_alloc(ctr_bytes));
  std::vector<proxy::RingView> views(rp.queues);
  for (uint32_t r = 0; r < rp.queues; ++r) {
    views[r] = proxy::RingView{slots + size_t(r) * rp.depth, &ctrs[r].head, &ctrs[r].done, &ctrs[r].tail, rp.depth, r};
    su->ring[r] = views[r];
  }
  const size_t words = size_t(rp.queues) * rp.depth;
  std::vector<uint64_t> dst(words, 0);
  softnic::SoftNic nic;
  const auto dmr = nic.register_mr(dst.data(), words * 8, softnic::kAccessRemoteWrite);
  softnic::CpuEngine engine(nic, static_cast<int>(rp.engine_threads));
  engine.start();
  proxy::SoftnicTarget tgt;
  tgt.remote_addr = dmr.addr;
  tgt.rkey = dmr.rkey;
  tgt.sq_wqebbs = 256;
  SeenBits seen(rp.producers);
  Tally tally;
  RingCheck check;
  check.su = su.get();
  check.tally = &tally;
  check.seen = &seen;
  check.consumed.assign(rp.queues, 0);
  check.last_seq.assign(rp.queues, -1);
  check.shadow.assign(words, 0);
  CheckingBackend backend(proxy::make_softnic_backend(nic, tgt), &check);
  proxy::PoolConfig pc;
  pc.workers = rp.workers;
  pc.batch = 8;
  pc.numa_node = -1;
  pc.yield_when_idle = true;
  pc.stall_timeout_ns = uint64_t(std::max(o.timeout_ms, 5000)) * 1000000ull;
  std::string err;
  auto pool = proxy::WorkerPool::create(pc, views, backend, nullptr, &err);
  if (!pool) throw PointFailure("worker pool: " + err);
  if (!pool->start(false, &err)) throw PointFailure("worker pool start: " + err);
  {
    Producers procs(*su, rp.seed, rp.aim);
    procs.start_all();
    soak_loop(rp, *su, procs, [&] { return check.retired.load(std::memory_order_relaxed); },
              [&] { return pool->failed() ? pool->error() : std::string(); }, &out);
  }
  std::vector<uint64_t> expected(rp.queues);
  uint64_t published = 0;
  for (uint32_t r = 0; r < rp.queues; ++r) {
    expected[r] = published_of(*su, r);
    published += expected[r];
  }
  std::string drain_error;
  if (!pool->stop(&expected, uint64_t(std::max(o.timeout_ms, 5000)) * 1000000ull, &drain_error) && drain_error.empty())
    drain_error = "worker pool drain failed";
  if (pool->failed() && drain_error.empty()) drain_error = pool->error();
  engine.stop();
  const softnic::Counters c = engine.counters();
  // Destinations: each ring's last lap of slots holds the value of the ticket posted there.
  uint64_t dest_bad = 0;
  for (uint32_t r = 0; r < rp.queues; ++r)
    for (uint32_t i = 0; i < rp.depth; ++i) {
      const size_t w = size_t(r) * rp.depth + i;
      if (dst[w] != check.shadow[w]) {
        if (dest_bad++ == 0)
          tally.note("ring " + std::to_string(r) + " slot " + std::to_string(i) + ": destination holds " +
                     std::to_string(dst[w]) + ", last posted " + std::to_string(check.shadow[w]));
      }
    }
  tally.misdirected += dest_bad;
  settle(*su, seen, tally, &out);
  conclude(&out, drain_error, c, published, tally);
  pool.reset();
  shm_free(slots, slots_bytes);
  shm_free(ctrs, ctr_bytes);
  shm_free(su->sh, sizeof(Shared));
  return out;
}

bench::Stats scalar(double v) {
  bench::Stats s;
  s.n = 1;
  s.p50 = s.p90 = s.p99 = s.min = s.max = s.mean = v;
  return s;
}

std::vector<Record> soak_point(const bench::Point& p, const bench::Options& o) {
  RunParams rp;
  const std::string target = p.params.get_string("target", "engine");
  if (target != "engine" && target != "rings") throw PointFailure("target must be engine or rings, got " + target);
  rp.engine = target == "engine";
  rp.duration_s = p.params.get_double("duration_s", 10);
  rp.producers = static_cast<uint32_t>(p.params.get_int("producers", 4));
  rp.queues = static_cast<uint32_t>(rp.engine ? p.params.get_int("qps", rp.producers) : p.params.get_int("rings", rp.producers));
  rp.workers = static_cast<uint32_t>(p.params.get_int("workers", 1));
  rp.depth = static_cast<uint32_t>(p.params.get_int("depth", 256));
  rp.max_batch = static_cast<uint32_t>(p.params.get_int("max_batch", 8));
  rp.engine_threads = static_cast<uint32_t>(p.params.get_int("engine_threads", 1));
  rp.kill_every_ms = p.params.get_double("kill_every_ms", 100);
  rp.seed = static_cast<uint64_t>(p.params.get_int("seed", 1));
  rp.aim = p.params.get_double("aim", 0.5);
  rp.dwell_ns = static_cast<uint64_t>(p.params.get_int("dwell_ns", 1000));
  rp.window_ms = static_cast<uint32_t>(p.params.get_int("window_ms", 1000));
  if (!(rp.duration_s > 0) || rp.duration_s > 86400) throw PointFailure("duration_s must be in (0, 86400]");
  if (rp.producers < 1 || rp.producers > kMaxProducers) throw PointFailure("producers must be 1..64");
  if (rp.queues < rp.producers || rp.queues > kMaxQueues || rp.queues > rp.producers * kMaxQueuesPerProducer)
    throw PointFailure("qps/rings must be in [producers, min(256, 16 * producers)]");
  if (!rp.engine && (rp.workers < 1 || rp.workers > proxy::kMaxWorkers || rp.workers > rp.queues))
    throw PointFailure("workers must be 1..8 and <= rings");
  if (!proxy::is_pow2(rp.depth) || rp.depth < 16 || rp.depth > 4096) throw PointFailure("depth must be a power of two in 16..4096");
  if (rp.max_batch < 1 || rp.max_batch > kMaxOpBatch || rp.max_batch > rp.depth) throw PointFailure("max_batch must be 1..16");
  if (rp.engine_threads < 1 || rp.engine_threads > 8) throw PointFailure("engine_threads must be 1..8");
  if (!(rp.kill_every_ms > 0)) throw PointFailure("kill_every_ms must be > 0");
  if (!(rp.aim >= 0 && rp.aim <= 1)) throw PointFailure("aim must be in [0, 1]");
  if (rp.dwell_ns > 1000000) throw PointFailure("dwell_ns must be <= 1000000");
  if (rp.window_ms < 10) throw PointFailure("window_ms must be >= 10");
  // inject: a deliberate fault, to show the verifier catches it (never in the experiment config).
  const std::string inject = p.params.get_string("inject", "none");
  if (inject == "lose") rp.inject = 1;
  else if (inject == "duplicate") rp.inject = 2;
  else if (inject == "blind_recovery") rp.inject = 3;
  else if (inject != "none") throw PointFailure("inject must be none, lose, duplicate or blind_recovery");

  const Outcome out = rp.engine ? run_engine(rp, o) : run_rings(rp, o);
  const bool broken = out.lost || out.duplicated || out.reordered || out.misdirected || out.unsubmitted || !out.error.empty();
  std::string error;
  if (broken) {
    error = "soak invariant broken (target " + target + "): lost " + std::to_string(out.lost) + ", duplicated " +
            std::to_string(out.duplicated) + ", reordered " + std::to_string(out.reordered) + ", misdirected " +
            std::to_string(out.misdirected) + ", unsubmitted " + std::to_string(out.unsubmitted) + " of " +
            std::to_string(out.submitted) + " submitted ops; first: " + (out.error.empty() ? "-" : out.error);
  }
  const std::string transport = rp.engine ? "softnic" : "mini-proxy";
  std::vector<Record> recs;
  auto add = [&](const std::string& metric, const std::string& unit, const bench::Stats& s) {
    Record r = Record::ok(metric, unit, s);
    r.transport = transport;
    r.nic_backend = "softnic-cpu";
    if (broken) {
      r.status = "failed";
      r.error = error;
    }
    recs.push_back(r);
  };
  add("ops_total", "count", scalar(double(out.submitted)));
  add("executed", "count", scalar(double(out.executed)));
  add("lost", "count", scalar(double(out.lost)));
  add("duplicated", "count", scalar(double(out.duplicated)));
  add("reordered", "count", scalar(double(out.reordered)));
  add("misdirected", "count", scalar(double(out.misdirected + out.unsubmitted)));
  add("kills", "count", scalar(double(out.kills)));
  add("restarts", "count", scalar(double(out.restarts)));
  add("aimed_kills", "count", scalar(double(out.aimed)));
  add("recovered_forward", "count", scalar(double(out.rolled_forward)));
  add("recovered_dropped", "count", scalar(double(out.dropped)));
  add("elapsed_s", "s", scalar(out.seconds));
  if (!out.window_rates.empty()) {
    add("msg_rate", "Mmsg/s", bench::compute_stats(out.window_rates));
    recs.back().samples = out.window_rates;
  } else {
    add("msg_rate", "Mmsg/s", scalar(out.seconds > 0 ? double(out.executed) / out.seconds / 1e6 : 0));
  }
  std::fprintf(stderr,
               "[gicomm] soak %s: %.1f s, ops %llu, kills %llu, restarts %llu, lost %llu, duplicated %llu, reordered %llu%s%s\n",
               target.c_str(), out.seconds, static_cast<unsigned long long>(out.submitted),
               static_cast<unsigned long long>(out.kills), static_cast<unsigned long long>(out.restarts),
               static_cast<unsigned long long>(out.lost), static_cast<unsigned long long>(out.duplicated),
               static_cast<unsigned long long>(out.reordered), broken ? " FAILED: " : "", broken ? error.c_str() : "");
  return recs;
}

}  // namespace

int main(int argc, char** argv) {
  bench::DriverInfo info{"gicomm-bench-soak", "softnic", "softnic-cpu"};
  return bench::run_driver(argc, argv, info, [](const bench::Point& p, const bench::Options& o) {
    if (o.experiment != "soak") throw PointFailure("gicomm-bench-soak runs experiment soak only");
    return soak_point(p, o);
  });
}
