// The soak's producer processes: shared memory, the durable log and its recovery, the producer
// loop, and the parent's start / kill / restart of them.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "gicomm/mlx5/host_post.h"
#include "soak/soak.h"

namespace gicomm::soak {

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
static void remap_in_place(void* p, size_t bytes, bool shared) {
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

void SharedRegions::share(void* p, size_t bytes) {
  remap_in_place(p, bytes, true);
  regions.emplace_back(p, bytes);
}
SharedRegions::~SharedRegions() {
  for (auto& r : regions) {
    try {
      remap_in_place(r.first, r.second, false);
    } catch (...) {
    }
  }
}

namespace {

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
}  // namespace


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
[[noreturn]] static void producer_main(const Setup& su, uint32_t p) {
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

// ---- producer processes: start, kill, restart ---------------------------------------------------------
void Producers::start(uint32_t p) {
  const pid_t pid = fork();
  if (pid < 0) throw PointFailure(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) producer_main(su_, p);
  pids_[p] = pid;
}

void Producers::start_all() {
  for (uint32_t p = 0; p < su_.producers; ++p) start(p);
}

bool Producers::kill_one(std::string* error) {
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

bool Producers::reap_unexpected(std::string* error) {
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

void Producers::stop_all() {
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

}  // namespace gicomm::soak
