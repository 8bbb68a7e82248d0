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

// Completion frontiers (WQEBBs complete, unwrapped) from a collapsed CQ.
// A requester CQE names its WQE by the index of the WQE's *first* WQEBB (wqe_counter), and a WQE
// spans 1..4 WQEBBs, so a CQE proves only that counter + 1 WQEBBs are complete: a lower bound,
// exact for one-WQEBB WQEs. `base` is a frontier already known (returned when the CQE names a WQE
// at or before it).
GICOMM_HD unsigned long long frontier_of_cqe(unsigned long long base, uint16_t counter) {
  const int16_t ahead = static_cast<int16_t>(static_cast<uint16_t>(counter - static_cast<uint16_t>(base)));
  return ahead >= 0 ? base + static_cast<unsigned long long>(ahead) + 1 : base;
}
// The frontier to wait for so that everything up to `end` is complete, when the newest WQE (the
// one ending at `end`) spans `last_wqebbs`: its first WQEBB. The producer knows the size of what it
// posted, so no read of the send queue is needed (a NIC reports the newest WQE last).
GICOMM_HD unsigned long long completion_target(unsigned long long end, uint32_t last_wqebbs) {
  return last_wqebbs > 1 ? end - last_wqebbs + 1 : end;
}

}  // namespace gicomm::mlx5
