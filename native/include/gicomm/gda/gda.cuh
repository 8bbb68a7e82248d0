// mini-gda: the GPU-initiated submission path on mlx5 formats (device side).
//
// Queues: each QP has a send queue (ring of 64-byte WQEBBs), a doorbell record, an 8-byte doorbell
// and a collapsed CQ (one CQE that the NIC overwrites, as NVSHMEM IBGDA's cc=1 CQ). Every WQE asks
// for a CQE unless the caller's signal policy says otherwise, so the single CQE's wqe_counter is
// the completion frontier.
//
// Submission modes (all templated on an ordering policy from gicomm/order.cuh):
//   ThreadQp          one thread owns the QP: no atomics; batch B WQEs, one doorbell.
//   put_locked        QP shared; a spin lock per batch (lock, write, ring, unlock).
//   put_handoff       QP shared; atomicAdd reserves slots, the WQEs are written in parallel, then
//                     each submitter waits for its turn (ready_head) to ring, in order, and hands
//                     the turn to the next (NVSHMEM's ready-head CAS, without the batching rule).
//   put_warp          a warp reserves 32 consecutive slots once, lanes build in lockstep, one lane
//                     rings once (cooperative publication, NVSHMEM's warp path).
//   HybridThreadQp    the GPU writes WQEs and the dbrec; a host thread rings (gda/hybrid.h).
// Batching: ThreadQp/HybridThreadQp ring once per `last_of_batch`; put_locked/put_handoff take an
// array of ops and ring once for it; put_warp rings once per warp (up to 32 WQEs).
// Completion: quiet_qp (the QP used) or quiet_all (every QP of the context).
// Every spin (slot, lock, hand-off, CQ) is bounded by ctx.timeout_ns and reports the QP with the
// expected and last-seen counters into ErrorReport, then returns false; callers stop.
#pragma once

#include <cstdint>
#include <cstdio>

#include "gicomm/common/hd.h"
#include "gicomm/mlx5/cqe.h"
#include "gicomm/mlx5/doorbell.h"
#include "gicomm/mlx5/queue.h"
#include "gicomm/mlx5/wqe.h"
#include "gicomm/order.cuh"

namespace gicomm::gda {

enum class WaitSite : int { none = 0, slot = 1, lock = 2, handoff = 3, cq = 4, error_cqe = 5, peer = 6 };

GICOMM_HD const char* wait_site_name(int s) {
  switch (s) {
    case 1: return "SQ slot (cons_head)";
    case 2: return "doorbell lock";
    case 3: return "hand-off (ready_head)";
    case 4: return "CQ poll (wqe_counter)";
    case 5: return "error CQE";
    case 6: return "peer flag";
    default: return "none";
  }
}

// First failure of a kernel (device memory; the host copies it after the kernel, which always ends
// because every wait is bounded).
struct ErrorReport {
  int code;  // WaitSite of the first failure, 0 when none
  uint32_t qp;
  uint32_t qpn;
  uint32_t syndrome;
  unsigned long long expected;
  unsigned long long last_seen;
};

// One QP as mini-gda sees it (in GPU memory).
struct DeviceQp {
  mlx5::SqDesc sq;
  mlx5::Cqe64* cqe;  // the collapsed CQ's single entry
  uint32_t index;
  uint32_t lock;
  uint32_t last_wqebbs;           // WQEBBs of the newest WQE (0 or 1: one; shared modes post one-WQEBB WQEs)
  unsigned long long resv_head;   // next WQEBB to reserve (shared modes)
  unsigned long long ready_head;  // WQEBBs rung, in order (hand-off, warp)
  unsigned long long cons_head;   // WQEBBs known complete
};

struct Context {
  DeviceQp* qps;
  uint32_t num_qps;
  uint32_t signal_every;  // 1: every WQE signaled (default)
  unsigned long long timeout_ns;
  ErrorReport* err;
};

// A put of one message.
struct PutOp {
  uint64_t raddr;
  uint32_t rkey;
  uint32_t lkey;
  uint64_t laddr;    // pointer payload
  uint32_t length;
  bool inline_data;  // payload inline: `value` (length 8) or bytes at laddr (length <= kMaxInlineRc)
  uint64_t value;
};

#if defined(__CUDACC__)

__device__ __forceinline__ bool failed(const Context& ctx) {
  return *reinterpret_cast<volatile int*>(&ctx.err->code) != 0;
}

inline __device__ __noinline__ void report(const Context& ctx, WaitSite site, uint32_t qp_index, uint32_t qpn,
                                           unsigned long long expected, unsigned long long seen, uint32_t syndrome = 0) {
  if (atomicCAS(&ctx.err->code, 0, static_cast<int>(site)) == 0) {
    ctx.err->qp = qp_index;
    ctx.err->qpn = qpn;
    ctx.err->syndrome = syndrome;
    ctx.err->expected = expected;
    ctx.err->last_seen = seen;
    __threadfence_system();
    printf("[mini-gda] %s on QP %u (qpn 0x%x): expected %llu, last seen %llu, syndrome 0x%x\n",
           wait_site_name(static_cast<int>(site)), qp_index, qpn, expected, seen, syndrome);
  }
}
__device__ __forceinline__ void report(const Context& ctx, WaitSite site, const DeviceQp& qp,
                                       unsigned long long expected, unsigned long long seen, uint32_t syndrome = 0) {
  report(ctx, site, qp.index, qp.sq.qpn, expected, seen, syndrome);
}

// What a completion wait needs of a QP, held in registers by per-thread submitters (re-loading
// it from global memory after each acquire fence would cost an L2 round trip per op).
struct CqView {
  const mlx5::Cqe64* cqe;
  uint32_t index;
  uint32_t qpn;
};
__device__ __forceinline__ CqView cq_view(const DeviceQp& qp) { return CqView{qp.cqe, qp.index, qp.sq.qpn}; }

// Reads the collapsed CQE once. Returns the completion frontier (WQEBBs complete) it proves, a lower
// bound (mlx5::frontier_of_cqe), relative to `base` (a frontier known to be at or before it), or
// reports an error CQE. Waits for everything posted use mlx5::completion_target.
__device__ __forceinline__ bool read_frontier(const Context& ctx, const CqView& v, unsigned long long base,
                                              unsigned long long* frontier) {
  const uint32_t tail = order::ld_relaxed_sys_u32(&v.cqe->w[15]);
  const uint8_t opcode = mlx5::op_own_opcode(mlx5::tail_op_own(tail));
  if (opcode == mlx5::kCqeInvalid) {
    *frontier = base;
    return true;
  }
  const uint16_t counter = mlx5::tail_wqe_counter(tail);
  if (opcode == mlx5::kCqeReqErr) {
    const uint32_t word = order::ld_relaxed_sys_u32(&v.cqe->w[13]);
    report(ctx, WaitSite::error_cqe, v.index, v.qpn, base, counter, word >> 24);
    return false;
  }
  *frontier = mlx5::frontier_of_cqe(base, counter);
  return true;
}

// Spins until at least `target` WQEBBs of the QP are complete; `cons` is the caller's view of the
// frontier (updated). Shared QPs (shared_cons != nullptr) publish the frontier with atomicMax.
__device__ __forceinline__ bool wait_complete(const Context& ctx, const CqView& v, unsigned long long* shared_cons,
                                              unsigned long long* cons, unsigned long long target, WaitSite site) {
  if (*cons >= target) return true;
  const uint64_t start = order::globaltimer_ns();
  for (uint32_t spin = 0;; ++spin) {
    unsigned long long f = 0;
    if (shared_cons) *cons = max(*cons, *reinterpret_cast<volatile unsigned long long*>(shared_cons));
    if (!read_frontier(ctx, v, *cons, &f)) return false;
    if (f > *cons) {
      *cons = f;
      if (shared_cons) atomicMax(shared_cons, f);
    }
    if (*cons >= target) return true;
    if ((spin & 63) == 63) {
      if (failed(ctx)) return false;
      if (order::globaltimer_ns() - start > ctx.timeout_ns) {
        report(ctx, site, v.index, v.qpn, target, *cons);
        return false;
      }
    }
  }
}
template <bool kShared>
__device__ __forceinline__ bool wait_complete(const Context& ctx, DeviceQp& qp, unsigned long long* cons,
                                              unsigned long long target, WaitSite site) {
  return wait_complete(ctx, cq_view(qp), kShared ? &qp.cons_head : nullptr, cons, target, site);
}

// Writes the WQE of `op` into the send queue at WQEBB `pi`; returns its ds and sets the doorbell
// value. Inline payloads longer than 8 B are streamed segment by segment (no local-memory image).
__device__ __forceinline__ uint32_t write_put(const mlx5::SqDesc& sq, uint32_t pi, const mlx5::WqeHeader& h,
                                              const PutOp& op, uint64_t* doorbell) {
  if (op.inline_data && op.length != 8) {
    mlx5::Seg16 ctrl;
    const uint32_t ds = mlx5::store_rdma_write_inline(sq.buf, sq.wqe_cnt, pi, h, op.raddr, op.rkey,
                                                      reinterpret_cast<const void*>(op.laddr), op.length, &ctrl);
    *doorbell = mlx5::doorbell_value(ctrl);
    return ds;
  }
  mlx5::WqeImage img;  // constant-indexed here: registers
  const uint32_t ds = op.inline_data ? mlx5::build_rdma_write_inline_u64(img, h, op.raddr, op.rkey, op.value)
                                     : mlx5::build_rdma_write(img, h, op.raddr, op.rkey, op.laddr, op.lkey, op.length);
  mlx5::store_wqe(sq.buf, sq.wqe_cnt, pi, img, ds);
  *doorbell = mlx5::doorbell_value(img.seg[0]);
  return ds;
}

__device__ __forceinline__ bool signaled_at(const Context& ctx, unsigned long long idx) {
  return ctx.signal_every <= 1 || ((idx + 1) % ctx.signal_every) == 0;
}

// The doorbell sequence after the WQE stores: dbrec then the 8-byte doorbell, ordered by Order.
template <class Order>
__device__ __forceinline__ void ring(const mlx5::SqDesc& sq, unsigned long long next_pi, uint64_t doorbell) {
  Order::before_dbrec();
  Order::store_dbrec(&sq.dbrec[mlx5::kSndDbr], mlx5::sq_dbrec_value(static_cast<uint32_t>(next_pi)));
  Order::before_doorbell();
  Order::store_doorbell(sq.doorbell, doorbell);
}
template <class Order>
__device__ __forceinline__ void ring(const DeviceQp& qp, unsigned long long next_pi, uint64_t doorbell) {
  ring<Order>(qp.sq, next_pi, doorbell);
}

// ---- per-thread submission ----------------------------------------------------------------------------
// The QP's producer state lives in registers; flush() writes it back (for quiet_all and reuse).
struct ThreadQp {
  DeviceQp* home;
  mlx5::SqDesc sq;  // register copy of the descriptor
  CqView cq;
  unsigned long long pi;
  unsigned long long cons;
  uint64_t pending_doorbell;
  uint32_t last_wqebbs;  // of the newest WQE: quiet waits for its CQE (mlx5::completion_target)
  bool pending;

  __device__ explicit ThreadQp(DeviceQp* q)
      : home(q), sq(q->sq), cq(cq_view(*q)), pi(q->resv_head), cons(q->cons_head), pending_doorbell(0),
        last_wqebbs(q->last_wqebbs), pending(false) {}
  __device__ void flush() {
    home->resv_head = pi;
    home->ready_head = pi;
    home->cons_head = cons;
    home->last_wqebbs = last_wqebbs;
  }

  // Writes one WQE (no doorbell). `signaled` < 0: the context's policy.
  __device__ __forceinline__ bool post(const Context& ctx, const PutOp& op, int signaled = -1) {
    if (pi + mlx5::kMaxWqeBBs - cons > sq.wqe_cnt &&
        !wait_complete(ctx, cq, nullptr, &cons, pi + mlx5::kMaxWqeBBs - sq.wqe_cnt, WaitSite::slot))
      return false;
    mlx5::WqeHeader h;
    h.pi = static_cast<uint16_t>(pi);
    h.qpn = sq.qpn;
    h.signaled = signaled < 0 ? signaled_at(ctx, pi) : signaled != 0;
    const uint32_t ds = write_put(sq, static_cast<uint32_t>(pi), h, op, &pending_doorbell);
    pending = true;
    last_wqebbs = mlx5::wqebbs_of_ds(ds);
    pi += last_wqebbs;
    return true;
  }
  template <class Order>
  __device__ __forceinline__ void ring_pending() {
    if (!pending) return;
    ring<Order>(sq, pi, pending_doorbell);
    pending = false;
  }
  // Put with a doorbell every `batch` WQEs: call for each op with its position in the batch.
  template <class Order>
  __device__ __forceinline__ bool put(const Context& ctx, const PutOp& op, bool last_of_batch) {
    if (!post(ctx, op)) return false;
    if (last_of_batch) ring_pending<Order>();
    return true;
  }
  // Everything posted is complete once the newest WQE's CQE is seen (in-order completion).
  __device__ __forceinline__ bool quiet(const Context& ctx) {
    if (!wait_complete(ctx, cq, nullptr, &cons, mlx5::completion_target(pi, last_wqebbs), WaitSite::cq)) return false;
    cons = pi;
    return true;
  }
};

// ---- shared-queue submission ----------------------------------------------------------------------------
__device__ __forceinline__ bool lock_qp(const Context& ctx, DeviceQp& qp) {
  const uint64_t start = order::globaltimer_ns();
  for (uint32_t spin = 0; atomicCAS(&qp.lock, 0u, 1u) != 0u; ++spin) {
    if ((spin & 63) == 63) {
      if (failed(ctx)) return false;
      if (order::globaltimer_ns() - start > ctx.timeout_ns) {
        report(ctx, WaitSite::lock, qp, 0, *reinterpret_cast<volatile uint32_t*>(&qp.lock));
        return false;
      }
    }
  }
  __threadfence();  // acquire: see the previous holder's resv_head and WQEs
  return true;
}
__device__ __forceinline__ void unlock_qp(DeviceQp& qp) {
  __threadfence();
  atomicExch(&qp.lock, 0u);
}

// Writes `n` ops (ops[i]) at consecutive slots starting at `first` (slots already reserved).
__device__ __forceinline__ uint64_t write_ops(const Context& ctx, DeviceQp& qp, unsigned long long first,
                                              const PutOp* ops, uint32_t n) {
  uint64_t doorbell = 0;
  for (uint32_t i = 0; i < n; ++i) {
    mlx5::WqeHeader h;
    h.pi = static_cast<uint16_t>(first + i);
    h.qpn = qp.sq.qpn;
    h.signaled = signaled_at(ctx, first + i);
    write_put(qp.sq, static_cast<uint32_t>(first + i), h, ops[i], &doorbell);
  }
  return doorbell;
}

// Shared QP, a lock per doorbell batch. Ops must be single-WQEBB (RC write, inline <= 28 B).
template <class Order>
__device__ bool put_locked(const Context& ctx, DeviceQp& qp, const PutOp* ops, uint32_t n) {
  if (!lock_qp(ctx, qp)) return false;
  const unsigned long long first = qp.resv_head;
  unsigned long long cons = qp.cons_head;
  bool ok = wait_complete<false>(ctx, qp, &cons, first + n > qp.sq.wqe_cnt ? first + n - qp.sq.wqe_cnt : 0,
                                 WaitSite::slot);
  if (ok) {
    qp.cons_head = cons;
    const uint64_t db = write_ops(ctx, qp, first, ops, n);
    qp.resv_head = first + n;
    qp.ready_head = first + n;
    ring<Order>(qp, first + n, db);
  }
  unlock_qp(qp);
  return ok;
}

// Shared QP, reservation by atomicAdd and in-order hand-off of the doorbell.
template <class Order>
__device__ bool put_handoff(const Context& ctx, DeviceQp& qp, const PutOp* ops, uint32_t n) {
  const unsigned long long first = atomicAdd(&qp.resv_head, static_cast<unsigned long long>(n));
  unsigned long long cons = *reinterpret_cast<volatile unsigned long long*>(&qp.cons_head);
  if (first + n > qp.sq.wqe_cnt &&
      !wait_complete<true>(ctx, qp, &cons, first + n - qp.sq.wqe_cnt, WaitSite::slot))
    return false;
  const uint64_t db = write_ops(ctx, qp, first, ops, n);
  // Wait for our turn: every earlier reservation has rung.
  const uint64_t start = order::globaltimer_ns();
  for (uint32_t spin = 0; *reinterpret_cast<volatile unsigned long long*>(&qp.ready_head) != first; ++spin) {
    if ((spin & 63) == 63) {
      if (failed(ctx)) return false;
      if (order::globaltimer_ns() - start > ctx.timeout_ns) {
        report(ctx, WaitSite::handoff, qp, first, *reinterpret_cast<volatile unsigned long long*>(&qp.ready_head));
        return false;
      }
    }
  }
  ring<Order>(qp, first + n, db);
  // Hand the turn over after our doorbell (release: the next ringer's doorbell comes after ours).
  __threadfence();
  atomicExch(&qp.ready_head, first + n);
  return true;
}

// Warp-cooperative publication: every active lane contributes one op; one reservation, one
// doorbell. Warps sharing a QP ring in reservation order through ready_head.
template <class Order>
__device__ bool put_warp(const Context& ctx, DeviceQp& qp, const PutOp& op) {
  const unsigned mask = __activemask();
  const int lane = threadIdx.x & 31;
  const int leader = __ffs(mask) - 1;
  const uint32_t n = __popc(mask);
  const uint32_t rank = __popc(mask & ((1u << lane) - 1));
  unsigned long long first = 0;
  if (lane == leader) first = atomicAdd(&qp.resv_head, static_cast<unsigned long long>(n));
  first = __shfl_sync(mask, first, leader);
  int ok = 1;
  if (lane == leader) {
    unsigned long long cons = *reinterpret_cast<volatile unsigned long long*>(&qp.cons_head);
    if (first + n > qp.sq.wqe_cnt)
      ok = wait_complete<true>(ctx, qp, &cons, first + n - qp.sq.wqe_cnt, WaitSite::slot) ? 1 : 0;
  }
  ok = __shfl_sync(mask, ok, leader);
  if (!ok) return false;
  mlx5::WqeHeader h;
  h.pi = static_cast<uint16_t>(first + rank);
  h.qpn = qp.sq.qpn;
  h.signaled = signaled_at(ctx, first + rank);
  uint64_t my_db = 0;
  write_put(qp.sq, static_cast<uint32_t>(first + rank), h, op, &my_db);
  const int last = 31 - __clz(mask);
  const uint64_t db = __shfl_sync(mask, my_db, last);
  // Each lane's WQE stores must be ordered before the leader's doorbell: the warp barrier plus the
  // ordering policy's fence in the leader (a gpu-scope fence is cumulative over what the warp
  // barrier made visible to the leader).
  __syncwarp(mask);
  if (lane == leader) {
    const uint64_t start = order::globaltimer_ns();
    for (uint32_t spin = 0; *reinterpret_cast<volatile unsigned long long*>(&qp.ready_head) != first; ++spin) {
      if ((spin & 63) == 63) {
        if (failed(ctx)) {
          ok = 0;
          break;
        }
        if (order::globaltimer_ns() - start > ctx.timeout_ns) {
          report(ctx, WaitSite::handoff, qp, first, *reinterpret_cast<volatile unsigned long long*>(&qp.ready_head));
          ok = 0;
          break;
        }
      }
    }
    if (ok) {
      ring<Order>(qp, first + n, db);
      __threadfence();
      atomicExch(&qp.ready_head, first + n);
    }
  }
  ok = __shfl_sync(mask, ok, leader);
  return ok != 0;
}

// Hybrid: the GPU writes the WQEs and publishes the dbrec with a system-scope release; a host
// thread (gda/hybrid.h) watches the dbrec and rings the doorbell. Per-thread QP ownership.
struct HybridThreadQp {
  ThreadQp t;
  __device__ explicit HybridThreadQp(DeviceQp* q) : t(q) {}
  __device__ __forceinline__ bool put(const Context& ctx, const PutOp& op, bool last_of_batch) {
    if (!t.post(ctx, op)) return false;
    if (last_of_batch) {
      order::fence_acq_rel_sys();
      order::st_release_sys_u32(&t.sq.dbrec[mlx5::kSndDbr], mlx5::sq_dbrec_value(static_cast<uint32_t>(t.pi)));
      t.pending = false;
    }
    return true;
  }
};

// ---- completion -------------------------------------------------------------------------------------------
// Used-QP completion: everything reserved on this QP so far.
__device__ __forceinline__ bool quiet_qp(const Context& ctx, DeviceQp& qp) {
  unsigned long long cons = *reinterpret_cast<volatile unsigned long long*>(&qp.cons_head);
  const unsigned long long end = *reinterpret_cast<volatile unsigned long long*>(&qp.resv_head);
  const uint32_t last = *reinterpret_cast<volatile uint32_t*>(&qp.last_wqebbs);
  if (!wait_complete<true>(ctx, qp, &cons, mlx5::completion_target(end, last), WaitSite::cq)) return false;
  atomicMax(&qp.cons_head, end);
  return true;
}

// All-QP completion: every QP of the context (what a library quiet without QP tracking does).
__device__ __forceinline__ bool quiet_all(const Context& ctx) {
  for (uint32_t i = 0; i < ctx.num_qps; ++i)
    if (!quiet_qp(ctx, ctx.qps[i])) return false;
  return true;
}

#endif  // __CUDACC__

}  // namespace gicomm::gda
