// Host-thread producer and consumer helpers (mini-proxy, CPU tests, the hybrid ringer).
//
// Ordering follows rdma-core's post_send_db: WQE stores, a release fence (udma_to_device_barrier),
// the dbrec store, another release fence (mmio_wc_start), then the 8-byte doorbell store. On x86
// the fences only stop the compiler; on a real UAR mapped write-combining an sfence would also be
// needed after the doorbell (mmio_flush_writes); the mlx5 backend does that itself.
#pragma once

#include <atomic>
#include <cstdint>

#include "gicomm/mlx5/cqe.h"
#include "gicomm/mlx5/doorbell.h"
#include "gicomm/mlx5/queue.h"
#include "gicomm/mlx5/wqe.h"

namespace gicomm::mlx5 {

inline void host_store_relaxed_u32(uint32_t* p, uint32_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}
inline void host_store_relaxed_u64(uint64_t* p, uint64_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

// Publishes WQEs up to (not including) `next_pi` and rings with the ctrl segment of the last one.
inline void host_ring_doorbell(const SqDesc& sq, uint32_t next_pi, uint64_t doorbell) {
  std::atomic_thread_fence(std::memory_order_release);
  host_store_relaxed_u32(&sq.dbrec[kSndDbr], sq_dbrec_value(next_pi));
  std::atomic_thread_fence(std::memory_order_release);
  __atomic_store_n(sq.doorbell, doorbell, __ATOMIC_RELEASE);
}

// A single-threaded producer for one SQ: keeps the producer index, copies WQEs into the ring.
// Not thread-safe: one producer per SqDesc (share a QP between threads with your own lock).
class HostSq {
 public:
  HostSq() = default;
  explicit HostSq(const SqDesc& sq) : sq_(sq) {}

  const SqDesc& desc() const { return sq_; }
  uint32_t pi() const { return pi_; }  // next free WQEBB (unwrapped, 32-bit)
  WqeHeader header(bool signaled) const {
    WqeHeader h;
    h.pi = static_cast<uint16_t>(pi_);
    h.qpn = sq_.qpn;
    h.signaled = signaled;
    return h;
  }
  // Copies a built WQE of `ds` segments at the current pi and advances it. Returns its index.
  uint32_t push(const WqeImage& img, uint32_t ds) {
    const uint32_t at = pi_;
    store_wqe(sq_.buf, sq_.wqe_cnt, at, img, ds);
    last_doorbell_ = doorbell_value(img.seg[0]);
    pi_ += wqebbs_of_ds(ds);
    return at;
  }
  // Rings for everything pushed so far (a batch of one or more WQEs).
  void ring() { host_ring_doorbell(sq_, pi_, last_doorbell_); }

 private:
  SqDesc sq_{};
  uint32_t pi_ = 0;
  uint64_t last_doorbell_ = 0;
};

// Consumer of one CQ (non-collapsed). poll() returns true and fills `out` when the next CQE is
// there; it updates the CQ doorbell record as it consumes, like mlx5_poll_cq.
class HostCq {
 public:
  HostCq() = default;
  explicit HostCq(const CqDesc& cq) : cq_(cq) {}
  bool poll(CqeFields* out) {
    Cqe64* c = cqe_at(cq_, ci_);
    const uint32_t tail = __atomic_load_n(&c->w[15], __ATOMIC_ACQUIRE);
    if (!cqe_ready(tail_op_own(tail), ci_, cq_.cqe_cnt)) return false;
    *out = decode_cqe(*c);
    ++ci_;
    __atomic_store_n(&cq_.dbrec[kCqDbrecConsumer], cq_dbrec_value(ci_), __ATOMIC_RELEASE);
    return true;
  }
  uint32_t ci() const { return ci_; }

 private:
  CqDesc cq_{};
  uint32_t ci_ = 0;
};

}  // namespace gicomm::mlx5
