// SoftNic tables and queue creation; the cpu engine.
#include "gicomm/softnic/softnic.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>
#include <random>
#include <vector>

#include "gicomm/common/affinity.h"
#include "gicomm/mlx5/doorbell.h"

namespace gicomm::softnic {

using namespace gicomm::mlx5;

SoftNic::SoftNic()
    : qps_(new std::unique_ptr<QpOwned>[kMaxQps]),
      mr_storage_(new MrEntry[kMaxMrs]),
      dct_storage_(new DctEntry[kMaxQps]) {
  tables_.mrs = mr_storage_.get();
  tables_.dcts = dct_storage_.get();
}

SoftNic::~SoftNic() {
  for (uint32_t i = 0; i < num_qps(); ++i) {
    QpOwned& q = *qps_[i];
    release(q.cfg.queues, q.sq_mem);
    release(q.cfg.queues, q.cq_mem);
    release(q.cfg.dbrec_pinned ? MemoryPlace::pinned() : q.cfg.queues, q.dbrec_mem);
    release(q.cfg.doorbells, q.db_mem);
  }
}

MemoryRegionHandle SoftNic::register_mr(void* addr, uint64_t length, uint32_t access) {
  std::lock_guard<std::mutex> lock(mu_);
  if (tables_.num_mrs >= kMaxMrs) throw std::runtime_error("softnic: memory region table full");
  const uint32_t index = tables_.num_mrs;
  // An 8-bit tag varies per index so a key off by one index does not validate by accident.
  const uint32_t tag = (index * 0x9du + 0x5bu) & 0xffu;
  MrEntry e{reinterpret_cast<uint64_t>(addr), length, (index << 8) | tag, access};
  mr_storage_[index] = e;
  // Publish the entry before the count (engines read without the lock).
  __atomic_store_n(&tables_.num_mrs, index + 1, __ATOMIC_RELEASE);
  return MemoryRegionHandle{e.key, e.key, e.addr, e.length};
}

uint32_t SoftNic::create_dct(uint64_t dc_key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (tables_.num_dcts >= kMaxQps) throw std::runtime_error("softnic: DCT table full");
  const uint32_t index = tables_.num_dcts;
  dct_storage_[index] = DctEntry{0x800000u + index, 0, dc_key};
  __atomic_store_n(&tables_.num_dcts, index + 1, __ATOMIC_RELEASE);
  return 0x800000u + index;
}

Tables SoftNic::tables_snapshot() const {
  Tables t = tables_;
  t.num_mrs = __atomic_load_n(&tables_.num_mrs, __ATOMIC_ACQUIRE);
  t.num_dcts = __atomic_load_n(&tables_.num_dcts, __ATOMIC_ACQUIRE);
  return t;
}

static bool is_pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

uint32_t SoftNic::create_qp(const QueueConfig& cfg) {
  if (!is_pow2(cfg.sq_wqebbs) || !is_pow2(cfg.cq_entries) || cfg.sq_wqebbs > 32768)
    throw std::invalid_argument("softnic: SQ and CQ depths must be powers of two, SQ <= 32768");
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t index = num_qps_.load(std::memory_order_relaxed);
  if (index >= kMaxQps) throw std::runtime_error("softnic: QP table full");
  auto q = std::make_unique<QpOwned>();
  q->cfg = cfg;
  const uint32_t cqes = cfg.collapsed_cq ? 1 : cfg.cq_entries;
  q->sq_mem = allocate(cfg.queues, size_t(cfg.sq_wqebbs) * kSendWqeBB);
  q->cq_mem = allocate(cfg.queues, size_t(cqes) * sizeof(Cqe64));
  const MemoryPlace dbrec_place = cfg.dbrec_pinned ? MemoryPlace::pinned() : cfg.queues;
  q->dbrec_mem = allocate(dbrec_place, 64);  // SQ dbrec (2 words) then CQ dbrec (2 words)
  q->db_mem = allocate(cfg.doorbells, 64);
  fill_bytes(cfg.queues, q->sq_mem, 0, size_t(cfg.sq_wqebbs) * kSendWqeBB);
  fill_bytes(dbrec_place, q->dbrec_mem, 0, 64);
  std::vector<Cqe64> fresh(cqes);
  for (auto& c : fresh) init_cqe(c);
  copy_to(cfg.queues, q->cq_mem, fresh.data(), fresh.size() * sizeof(Cqe64));
  // The doorbell starts at WQE index 0xffff (one before the first WQE): nothing to do yet.
  const uint64_t idle = doorbell_value(0xffff, qpn_of(index), 0, 0);
  copy_to(cfg.doorbells, q->db_mem, &idle, sizeof(idle));

  q->sq.buf = static_cast<uint8_t*>(q->sq_mem);
  q->sq.wqe_cnt = cfg.sq_wqebbs;
  q->sq.qpn = qpn_of(index);
  q->sq.dbrec = static_cast<uint32_t*>(q->dbrec_mem);
  q->sq.doorbell = static_cast<uint64_t*>(q->db_mem);
  q->cq.buf = static_cast<Cqe64*>(q->cq_mem);
  q->cq.cqe_cnt = cqes;
  q->cq.dbrec = static_cast<uint32_t*>(q->dbrec_mem) + 2;
  q->cq.collapsed = cfg.collapsed_cq;
  q->state.sq = q->sq;
  q->state.cq = q->cq;
  q->state.last_doorbell = idle;
  q->state.dc = cfg.dc ? 1 : 0;
  qps_[index] = std::move(q);
  num_qps_.store(index + 1, std::memory_order_release);
  return index;
}

// ---- cpu engine -------------------------------------------------------------------------------------

namespace {

struct HostMem {
  void copy(void* dst, const void* src, uint32_t bytes) { std::memcpy(dst, src, bytes); }
  void fetch_add(uint64_t* p, uint64_t add, void* old) {
    const uint64_t v = __atomic_fetch_add(p, add, __ATOMIC_RELAXED);
    std::memcpy(old, &v, 8);
  }
  void read_wqebb(Seg16* dst, const uint8_t* src) { std::memcpy(dst, src, kSendWqeBB); }
  void acquire() { std::atomic_thread_fence(std::memory_order_acquire); }
  void publish_cqe(Cqe64* dst, const Cqe64& body, uint32_t tail) {
    std::memcpy(dst, &body, 60);
    __atomic_store_n(&dst->w[15], tail, __ATOMIC_RELEASE);
  }
};

// Executes everything the QP's doorbell asks for: every WQE from the consumer index up to and
// including the WQE index the doorbell carries. Returns the number of WQEs executed. `executed`
// gets ctr.wqes after each WQE (a relaxed store: a plain move on x86).
uint32_t service_qp(QpState& q, const SoftNic& nic, Counters& ctr, std::atomic<uint64_t>& executed) {
  const uint64_t db = __atomic_load_n(q.sq.doorbell, __ATOMIC_ACQUIRE);
  if (db == q.last_doorbell) return 0;
  // Key tables as of this doorbell: a region or DCT registered before the ring must be seen.
  const Tables tables = nic.tables_snapshot();
  q.last_doorbell = db;
  if (doorbell_qpn(db) != q.sq.qpn) return 0;  // a doorbell for another QP on this page: ignore it
  const uint16_t db_index = doorbell_wqe_index(db);
  uint32_t done = 0;
  HostMem mem;
  while (idx16_at_or_after(db_index, static_cast<uint16_t>(q.ci))) {
    service_one_wqe(q, tables, mem, ctr);
    executed.store(ctr.wqes, std::memory_order_relaxed);
    ++done;
  }
  return done;
}

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

CpuEngine::CpuEngine(SoftNic& nic, int threads, std::vector<int> cpus)
    : nic_(nic), threads_(threads), cpus_(std::move(cpus)), per_thread_(threads) {
  if (threads < 1) throw std::invalid_argument("softnic: cpu engine needs at least one thread");
  for (int c : cpus_)
    if (c < 0 || c >= CPU_SETSIZE) throw std::invalid_argument("softnic: cpu engine: no cpu " + std::to_string(c));
}

CpuEngine::~CpuEngine() { stop(); }

void CpuEngine::start() {
  if (!workers_.empty()) return;
  stop_.store(false);
  for (int t = 0; t < threads_; ++t) {
    workers_.emplace_back([this, t] { run(t); });
    if (cpus_.empty()) continue;
    const int cpu = cpus_[static_cast<size_t>(t) % cpus_.size()];
    const int rc = pin_thread(workers_.back().native_handle(), cpu);
    if (rc != 0) {
      stop();
      throw std::runtime_error("softnic: cpu engine thread " + std::to_string(t) + " cannot run on cpu " +
                               std::to_string(cpu) + ": " + std::strerror(rc));
    }
  }
}

void CpuEngine::stop() {
  stop_.store(true);
  for (auto& w : workers_) w.join();
  workers_.clear();
}

Counters CpuEngine::counters() const {
  Counters sum;
  for (const auto& t : per_thread_) sum += t.c;
  return sum;
}

uint64_t CpuEngine::executed() const {
  uint64_t n = 0;
  for (const auto& t : per_thread_) n += t.executed.load(std::memory_order_relaxed);
  return n;
}

void CpuEngine::run(int tid) {
  Counters& ctr = per_thread_[tid].c;
  std::atomic<uint64_t>& executed = per_thread_[tid].executed;
  uint32_t idle_rounds = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint32_t n = nic_.num_qps();
    uint32_t work = 0;
    for (uint32_t qp = static_cast<uint32_t>(tid); qp < n; qp += static_cast<uint32_t>(threads_))
      work += service_qp(*nic_.qp_state(qp), nic_, ctr, executed);
    if (work == 0) {
      // Stay hot while traffic is recent; yield the core after a long idle stretch so CI with
      // two cores is not starved by idle engine threads.
      if (++idle_rounds > 4096) {
        std::this_thread::yield();
      } else {
        cpu_relax();
      }
    } else {
      idle_rounds = 0;
    }
  }
  // Drain: execute anything rung before stop() was called.
  const uint32_t n = nic_.num_qps();
  for (uint32_t qp = static_cast<uint32_t>(tid); qp < n; qp += static_cast<uint32_t>(threads_))
    service_qp(*nic_.qp_state(qp), nic_, ctr, executed);
}

}  // namespace gicomm::softnic
