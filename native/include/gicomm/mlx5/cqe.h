// mlx5_cqe64 decode (consumers) and encode (the softnic, which plays the NIC), __host__ __device__.
//
// Byte offsets follow struct mlx5_cqe64 / struct mlx5_err_cqe in rdma-core's mlx5dv.h:
//   36 imm_inval_pkey (BE32)  44 byte_cnt (BE32)  54 vendor_err_synd  55 syndrome (error CQE)
//   56 sop_drop_qpn / s_wqe_opcode_qpn (BE32: opcode<<24 | qpn)  60 wqe_counter (BE16)
//   62 signature  63 op_own (opcode<<4 | se<<1 | owner)
// The last 4 bytes (wqe_counter, signature, op_own) are one aligned 32-bit word, so a consumer
// sees a CQE's counter and owner bit in a single load, and the producer publishes a CQE by storing
// that word last.
#pragma once

#include <cstdint>

#include "gicomm/common/hd.h"

namespace gicomm::mlx5 {

constexpr uint8_t kCqeReq = 0;         // MLX5_CQE_REQ
constexpr uint8_t kCqeRespWrImm = 1;   // MLX5_CQE_RESP_WR_IMM
constexpr uint8_t kCqeReqErr = 13;     // MLX5_CQE_REQ_ERR
constexpr uint8_t kCqeRespErr = 14;    // MLX5_CQE_RESP_ERR
constexpr uint8_t kCqeInvalid = 15;    // MLX5_CQE_INVALID
constexpr uint8_t kCqeOwnerMask = 1;   // MLX5_CQE_OWNER_MASK

// Error syndromes (MLX5_CQE_SYNDROME_*).
constexpr uint8_t kSyndromeLocalLength = 0x01;
constexpr uint8_t kSyndromeLocalQpOp = 0x02;
constexpr uint8_t kSyndromeLocalProt = 0x04;
constexpr uint8_t kSyndromeWrFlush = 0x05;
constexpr uint8_t kSyndromeLocalAccess = 0x11;
constexpr uint8_t kSyndromeRemoteInvalReq = 0x12;
constexpr uint8_t kSyndromeRemoteAccess = 0x13;
constexpr uint8_t kSyndromeRemoteOp = 0x14;

constexpr uint32_t kCqDbrecConsumer = 0;  // CQ doorbell record word 0: BE32 consumer index (24 bits)

struct alignas(64) Cqe64 {
  uint32_t w[16];
};
static_assert(sizeof(Cqe64) == 64, "mlx5_cqe64 is 64 bytes");

// Byte offsets into a CQE.
constexpr int kCqeOffImm = 36;
constexpr int kCqeOffByteCnt = 44;
constexpr int kCqeOffVendorSyndrome = 54;
constexpr int kCqeOffSyndrome = 55;
constexpr int kCqeOffQpn = 56;
constexpr int kCqeOffWqeCounter = 60;
constexpr int kCqeOffOpOwn = 63;

struct CqeFields {
  uint8_t opcode;        // op_own >> 4
  uint8_t owner;         // op_own & 1
  uint16_t wqe_counter;  // index of the (last) WQE this CQE completes
  uint32_t qpn;          // low 24 bits of sop_drop_qpn
  uint8_t wqe_opcode;    // top byte of sop_drop_qpn / s_wqe_opcode_qpn
  uint8_t syndrome;      // error CQEs only
  uint8_t vendor_syndrome;
  uint32_t byte_cnt;
  uint32_t imm;  // host order
};

// The last word (bytes 60..63) as loaded little-endian.
GICOMM_HD uint16_t tail_wqe_counter(uint32_t tail) { return from_be16(static_cast<uint16_t>(tail & 0xffff)); }
GICOMM_HD uint8_t tail_op_own(uint32_t tail) { return static_cast<uint8_t>(tail >> 24); }
GICOMM_HD uint8_t op_own_opcode(uint8_t op_own) { return op_own >> 4; }
GICOMM_HD uint8_t op_own_owner(uint8_t op_own) { return op_own & kCqeOwnerMask; }

GICOMM_HD CqeFields decode_cqe(const Cqe64& c) {
  const uint8_t* b = reinterpret_cast<const uint8_t*>(&c);
  CqeFields f;
  const uint32_t tail = c.w[15];
  f.opcode = op_own_opcode(tail_op_own(tail));
  f.owner = op_own_owner(tail_op_own(tail));
  f.wqe_counter = tail_wqe_counter(tail);
  const uint32_t sop = from_be32(c.w[kCqeOffQpn / 4]);
  f.qpn = sop & 0xffffff;
  f.wqe_opcode = static_cast<uint8_t>(sop >> 24);
  f.syndrome = b[kCqeOffSyndrome];
  f.vendor_syndrome = b[kCqeOffVendorSyndrome];
  f.byte_cnt = from_be32(c.w[kCqeOffByteCnt / 4]);
  f.imm = from_be32(c.w[kCqeOffImm / 4]);
  return f;
}

// The owner bit a valid CQE at consumer index `ci` carries in a CQ of `cqe_cnt` entries (power of
// two): it flips on every pass over the ring, as in rdma-core's get_sw_cqe().
GICOMM_HD uint8_t expected_owner(uint32_t ci, uint32_t cqe_cnt) { return (ci & cqe_cnt) ? 1 : 0; }

// True when the CQE at index `ci` has been written by the NIC for this pass.
GICOMM_HD bool cqe_ready(uint8_t op_own, uint32_t ci, uint32_t cqe_cnt) {
  return op_own_opcode(op_own) != kCqeInvalid && op_own_owner(op_own) == expected_owner(ci, cqe_cnt);
}

// Fresh CQ memory: every entry invalid with owner 0, so nothing looks ready on the first pass and
// first-pass entries (owner 0) look stale on the second.
GICOMM_HD void init_cqe(Cqe64& c) {
  for (int i = 0; i < 15; ++i) c.w[i] = 0;
  c.w[15] = static_cast<uint32_t>(kCqeInvalid << 4) << 24;
}

// Producer side. Builds a CQE in `c` except its last word, which encode_* return; the caller
// stores the body, orders it, and then stores the returned tail word to publish the CQE.
GICOMM_HD uint32_t encode_req_cqe(Cqe64& c, uint16_t wqe_counter, uint32_t qpn, uint8_t wqe_opcode,
                                  uint32_t byte_cnt, uint8_t owner) {
  for (int i = 0; i < 15; ++i) c.w[i] = 0;
  c.w[kCqeOffByteCnt / 4] = to_be32(byte_cnt);
  c.w[kCqeOffQpn / 4] = to_be32((static_cast<uint32_t>(wqe_opcode) << 24) | (qpn & 0xffffff));
  return static_cast<uint32_t>(to_be16(wqe_counter)) |
         (static_cast<uint32_t>((kCqeReq << 4) | (owner & 1)) << 24);
}

GICOMM_HD uint32_t encode_err_cqe(Cqe64& c, uint16_t wqe_counter, uint32_t qpn, uint8_t wqe_opcode,
                                  uint8_t syndrome, uint8_t vendor_syndrome, uint8_t owner) {
  for (int i = 0; i < 15; ++i) c.w[i] = 0;
  // bytes 52..55: rsvd, rsvd, vendor_err_synd, syndrome
  c.w[52 / 4] = (static_cast<uint32_t>(vendor_syndrome) << 16) | (static_cast<uint32_t>(syndrome) << 24);
  c.w[kCqeOffQpn / 4] = to_be32((static_cast<uint32_t>(wqe_opcode) << 24) | (qpn & 0xffffff));
  return static_cast<uint32_t>(to_be16(wqe_counter)) |
         (static_cast<uint32_t>((kCqeReqErr << 4) | (owner & 1)) << 24);
}

// CQ doorbell record value for consumer index `ci` (24 bits, big-endian).
GICOMM_HD uint32_t cq_dbrec_value(uint32_t ci) { return to_be32(ci & 0xffffff); }

}  // namespace gicomm::mlx5
