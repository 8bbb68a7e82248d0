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

}  // namespace gicomm::mlx5
