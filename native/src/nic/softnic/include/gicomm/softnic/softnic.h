// softnic: a software model of a ConnectX send path that consumes the real mlx5 formats.
//
// Usage (host, mini-proxy or tests):
//   gicomm::softnic::SoftNic nic;                        // tables: memory regions, QPs, DCTs
//   auto mr = nic.register_mr(buf, bytes, kAccessLocalWrite | kAccessRemoteWrite);  // mr.lkey == mr.rkey
//   gicomm::softnic::QueueConfig qc;                     // depths, where queues/doorbells live
//   uint32_t qp = nic.create_qp(qc);                     // index; nic.sq(qp)/nic.cq(qp) are the descriptors
//   gicomm::softnic::CpuEngine engine(nic, /*threads=*/2);  engine.start();
//   gicomm::mlx5::HostSq sq(nic.sq(qp)); HostCq cq(nic.cq(qp));   // gicomm/mlx5/host_post.h
//   ... build WQEs with gicomm/mlx5/wqe.h, sq.push(img, ds), sq.ring(), cq.poll(&cqe) ...
//   engine.stop();
//
// The engine polls every QP's own 8-byte doorbell word (independent doorbells). A doorbell
// carrying WQE index i makes the engine execute every WQE from its consumer index up to and
// including i, reading them from the SQ ring as a NIC's DMA read would. Each WQE is checked
// (opcode, ds, WQE index in the ctrl segment, lkey/rkey, bounds, access) and executed: RDMA write
// (pointer or inline), write with immediate, atomic fetch-add, NOP; RC or DC (the DC address
// vector's DCT number and key are checked against registered DCTs). A signaled WQE yields one
// requester CQE (wqe_counter = its index); unsignaled ones none. A bad WQE yields an error CQE
// (MLX5_CQE_REQ_ERR with the syndrome) whether signaled or not, the QP enters the error state, and
// every later WQE is flushed with an error CQE (syndrome WR_FLUSH_ERR), as a ConnectX does.
//
// Remote memory is the same address space (one process; GPU buffers through peer access for the
// gpu engine). Atomics operate on the remote 8-byte word in host byte order (the mlx5 "host
// endianness" atomic mode); the old value lands in the local buffer in host order.
//
// QPs may be created while an engine runs; memory regions too (the table grows under a lock on
// the host; the gpu engine takes a snapshot at start()).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gicomm/mlx5/cqe.h"
#include "gicomm/mlx5/queue.h"
#include "gicomm/softnic/core.h"

namespace gicomm::softnic {

// Where a queue, doorbell or buffer lives.
struct MemoryPlace {
  enum class Kind { host_aligned, host_pinned, device };
  Kind kind = Kind::host_aligned;
  int device = 0;  // for Kind::device
  static MemoryPlace host() { return {Kind::host_aligned, 0}; }
  static MemoryPlace pinned() { return {Kind::host_pinned, 0}; }
  static MemoryPlace gpu(int dev) { return {Kind::device, dev}; }
};

// Allocation that the SoftNic frees; pinned and device kinds need a CUDA build (else throw).
// Pinned memory is mapped and portable: with unified addressing its pointer is valid on every GPU.
void* allocate(MemoryPlace place, size_t bytes);
void release(MemoryPlace place, void* p);
// Zero (device: cudaMemset) and, for CQ buffers, mark every CQE invalid.
void fill_bytes(MemoryPlace place, void* p, uint8_t value, size_t bytes);
void copy_to(MemoryPlace place, void* dst, const void* src, size_t bytes);
void copy_from(MemoryPlace place, void* dst, const void* src, size_t bytes);  // src lives in `place`
bool cuda_available();

struct QueueConfig {
  uint32_t sq_wqebbs = 1024;   // power of two
  uint32_t cq_entries = 1024;  // power of two, >= the signaled WQEs that can be outstanding
  bool collapsed_cq = false;   // all CQEs into entry 0 (NVSHMEM IBGDA's cc=1 CQ)
  bool dc = false;             // DC initiator (WQEs carry an address vector)
  MemoryPlace queues = MemoryPlace::host();     // SQ ring, dbrecs, CQ
  MemoryPlace doorbells = MemoryPlace::host();  // the 8-byte doorbell word the engine polls
  bool dbrec_pinned = false;  // doorbell records in pinned host memory (hybrid mode: a host thread reads them)
};

struct MemoryRegionHandle {
  uint32_t lkey = 0;
  uint32_t rkey = 0;  // equal to lkey, as mlx5 mkeys are
  uint64_t addr = 0;
  uint64_t length = 0;
};


class SoftNic {
 public:
  SoftNic();
  ~SoftNic();
  SoftNic(const SoftNic&) = delete;
  SoftNic& operator=(const SoftNic&) = delete;

  MemoryRegionHandle register_mr(void* addr, uint64_t length, uint32_t access);
  // DC target: WQEs whose AV names this DCT number and key are accepted.
  uint32_t create_dct(uint64_t dc_key);

  // Creates a QP with its own SQ, CQ, dbrecs and doorbell. Returns its index (0, 1, ...); its
  // 24-bit QP number is qpn_of(index).
  uint32_t create_qp(const QueueConfig& cfg);
  uint32_t num_qps() const { return num_qps_.load(std::memory_order_acquire); }
  static uint32_t qpn_of(uint32_t index) { return 0x100u + index; }

  const mlx5::SqDesc& sq(uint32_t qp) const { return qp_at(qp)->sq; }
  const mlx5::CqDesc& cq(uint32_t qp) const { return qp_at(qp)->cq; }
  const QueueConfig& config(uint32_t qp) const { return qp_at(qp)->cfg; }

  // Engine side (used by CpuEngine/GpuEngine; stable for other engines too).
  static constexpr uint32_t kMaxQps = 4096;
  static constexpr uint32_t kMaxMrs = 4096;
  QpState* qp_state(uint32_t qp) { return &qp_at(qp)->state; }
  // Snapshot of the key tables (the gpu engine copies it to the device).
  Tables tables_snapshot() const;
  const Tables& tables() const { return tables_; }  // host engine: read under no lock (append-only)

 private:
  struct QpOwned {
    QueueConfig cfg;
    mlx5::SqDesc sq;
    mlx5::CqDesc cq;
    QpState state;
    void* sq_mem = nullptr;
    void* cq_mem = nullptr;
    void* dbrec_mem = nullptr;
    void* db_mem = nullptr;
  };
  QpOwned* qp_at(uint32_t qp) const {
    if (qp >= num_qps()) throw std::out_of_range("softnic: no QP " + std::to_string(qp));
    return qps_[qp].get();
  }
  std::mutex mu_;
  // Fixed capacity so engine threads can index it while create_qp appends.
  std::unique_ptr<std::unique_ptr<QpOwned>[]> qps_;
  std::atomic<uint32_t> num_qps_{0};
  Tables tables_{};
  std::unique_ptr<MrEntry[]> mr_storage_;
  std::unique_ptr<DctEntry[]> dct_storage_;
};

// Host threads polling doorbells. Thread t serves QPs with index % threads == t.
class CpuEngine {
 public:
  // `cpus`: where the threads run (thread t pinned to cpus[t % cpus.size()]); empty: unpinned.
  CpuEngine(SoftNic& nic, int threads, std::vector<int> cpus = {});
  ~CpuEngine();  // stops
  // Starts the threads; throws std::runtime_error (naming the cpu) when one cannot be pinned.
  void start();
  void stop();
  Counters counters() const;  // sum over threads (read after stop() for exact values)
  // WQEs executed so far, read while the engine runs (each thread publishes its count after every
  // WQE): how a measurement follows the engine's progress without polling every CQ.
  uint64_t executed() const;
  const std::vector<int>& cpus() const { return cpus_; }

 private:
  // Each thread's counters on cache lines of their own: threads updating neighbouring counters
  // would bounce one line between their cores on every WQE.
  struct alignas(64) ThreadCounters {
    Counters c;                          // the thread's own (read by others only after stop())
    std::atomic<uint64_t> executed{0};   // c.wqes, published for executed()
  };
  void run(int tid);
  SoftNic& nic_;
  int threads_;
  std::vector<int> cpus_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
  std::vector<ThreadCounters> per_thread_;
};

}  // namespace gicomm::softnic
