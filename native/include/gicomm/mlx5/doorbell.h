// Doorbell record and doorbell values, __host__ __device__.
//
// The mlx5 submission sequence (rdma-core providers/mlx5/qp.c post_send_db) is:
//   1. WQEs visible  2. dbrec[MLX5_SND_DBR] = BE32(pi & 0xffff)  3. 8-byte store of the first 8 bytes
//   of the last WQE's ctrl segment to the UAR doorbell.
// These helpers only compute the values; who stores them, with which ordering, is the caller's
// policy (gicomm/order.cuh on the GPU, std::atomic fences on the host).
#pragma once

#include <cstdint>

#include "gicomm/common/hd.h"
#include "gicomm/mlx5/wqe.h"

namespace gicomm::mlx5 {

// Send doorbell-record word: big-endian 16-bit producer index (next free WQEBB).
GICOMM_HD uint32_t sq_dbrec_value(uint32_t next_pi) { return to_be32(next_pi & 0xffff); }
GICOMM_HD uint16_t sq_dbrec_pi(uint32_t dbrec_word) { return static_cast<uint16_t>(from_be32(dbrec_word) & 0xffff); }

// The 8-byte doorbell: the memory image of ctrl bytes 0..7 (opmod_idx_opcode, qpn_ds) as one
// little-endian 64-bit value, so a single 64-bit store puts the same bytes on the bus.
GICOMM_HD uint64_t doorbell_value(const Seg16& ctrl) {
  return static_cast<uint64_t>(ctrl.w[0]) | (static_cast<uint64_t>(ctrl.w[1]) << 32);
}

// Same value without a built ctrl segment (hybrid mode, host ringers): WQE index and QP number of
// the last WQE posted, with its opcode and ds.
GICOMM_HD uint64_t doorbell_value(uint16_t wqe_index, uint32_t qpn, uint8_t opcode, uint8_t ds) {
  const uint32_t w0 = to_be32((static_cast<uint32_t>(wqe_index) << 8) | opcode);
  const uint32_t w1 = to_be32((qpn << 8) | ds);
  return static_cast<uint64_t>(w0) | (static_cast<uint64_t>(w1) << 32);
}

GICOMM_HD uint16_t doorbell_wqe_index(uint64_t v) {
  return static_cast<uint16_t>((from_be32(static_cast<uint32_t>(v)) >> 8) & 0xffff);
}
GICOMM_HD uint32_t doorbell_qpn(uint64_t v) { return from_be32(static_cast<uint32_t>(v >> 32)) >> 8; }

}  // namespace gicomm::mlx5
