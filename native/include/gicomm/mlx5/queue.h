// Queue descriptors shared by every producer (GPU mini-gda, host mini-proxy, tests) and every
// consumer (softnic engines, a real ConnectX). Plain pointers into whichever memory holds the queue
// (GPU memory, pinned host memory, a UAR page), so the same struct works on the host and the GPU.
#pragma once

#include <cstdint>

#include "gicomm/common/hd.h"
#include "gicomm/mlx5/cqe.h"
#include "gicomm/mlx5/wqe.h"

namespace gicomm::mlx5 {

// One send queue as its producer sees it.
struct SqDesc {
  uint8_t* buf = nullptr;        // ring of wqe_cnt WQEBBs of 64 bytes
  uint32_t wqe_cnt = 0;          // power of two
  uint32_t qpn = 0;              // 24-bit QP number (goes into every ctrl segment and the doorbell)
  uint32_t* dbrec = nullptr;     // doorbell record, 2 words; dbrec[kSndDbr] = BE32(next pi & 0xffff)
  uint64_t* doorbell = nullptr;  // 8-byte doorbell: a UAR page (mlx5) or a word the softnic polls
};

// One completion queue as its consumer sees it.
struct CqDesc {
  Cqe64* buf = nullptr;      // ring of cqe_cnt CQEs (1 entry when collapsed)
  uint32_t cqe_cnt = 0;      // power of two
  uint32_t* dbrec = nullptr; // dbrec[kCqDbrecConsumer] = BE32(consumer index)
  bool collapsed = false;    // every CQE lands in entry 0 (mlx5 cc=1, what NVSHMEM IBGDA uses)
};

GICOMM_HD Cqe64* cqe_at(const CqDesc& cq, uint32_t ci) {
  return cq.collapsed ? cq.buf : cq.buf + (ci & (cq.cqe_cnt - 1));
}

// The completion frontier (WQEBBs complete, unwrapped) that a requester CQE implies.
//   base     a frontier already known (a WQE boundary at or before the true one)
//   counter  the CQE's wqe_counter: the index of the completed WQE's *first* WQEBB
//   ctrl     the ctrl segment read from that WQE's ring slot after the CQE was seen
// A WQE spans 1..4 WQEBBs, so the frontier is counter + the WQE's size, which only its ctrl
// segment (ds) tells. The slot cannot have been reused by this reader's producer (it only reuses
// slots behind the frontier), but a producer that learned a later frontier from another reader of
// the same CQ may have: a ctrl segment whose index is not `counter` is a newer WQE, and then one
// WQEBB (a frontier known to be reached) is the safe answer.
GICOMM_HD unsigned long long frontier_after_cqe(unsigned long long base, uint16_t counter, const Seg16& ctrl) {
  const int16_t ahead = static_cast<int16_t>(static_cast<uint16_t>(counter - static_cast<uint16_t>(base)));
  if (ahead < 0) return base;  // the CQE names a WQE already known complete
  const CtrlFields c = decode_ctrl(ctrl);
  const uint32_t nbb = (c.wqe_index == counter && c.ds >= 1 && c.ds <= kMaxDs) ? wqebbs_of_ds(c.ds) : 1;
  return base + static_cast<unsigned long long>(ahead) + nbb;
}

}  // namespace gicomm::mlx5
