// mlx5 PRM command layouts: every field, opcode and constant that the DEVX backend (devx.cpp)
// writes and the emulated device (native/emu) parses, in one table.
//
// Fields are big-endian bit fields addressed by bit offset and width, as struct
// mlx5_ifc_<struct>_bits in the Linux kernel's include/linux/mlx5/mlx5_ifc.h lays them out (one u8
// per bit, so offsetof gives the bit offset and sizeof the width). The table is an X-macro so a
// test can compile it against the kernel header and compare every entry (native/emu/tests, which
// fetches the header from Debian's linux-headers-*-common package at test time):
//   GICOMM_PRM_FIELD(s, f, off, bits)  the kernel names s.f: offsetof/sizeof must match
//   GICOMM_PRM_DEVX(s, f, off, bits)   a DEVX-only field (umem ids and offsets) the kernel header
//                                      leaves reserved; rdma-core names it. Checked to lie inside
//                                      reserved bits of the kernel's struct.
//   GICOMM_PRM_CONST(name, kernel_name, value)      an enum value of mlx5_ifc.h
//   GICOMM_PRM_STATUS(name, kernel_name, value)     a command status of mlx5/device.h
#pragma once

#include <cstdint>
#include <cstring>

#include "gicomm/common/hd.h"

// clang-format off
#define GICOMM_PRM_FIELDS(F, D)                                  \
  /* command headers (every *_in starts with opcode/uid/op_mod, every *_out with status/syndrome) */ \
  F(query_hca_cap_in, opcode, 0x0, 16)                           \
  F(query_hca_cap_in, op_mod, 0x30, 16)                          \
  F(query_hca_cap_in, other_function, 0x40, 1)                   \
  F(query_hca_cap_out, status, 0x0, 8)                           \
  F(query_hca_cap_out, syndrome, 0x20, 32)                       \
  F(query_hca_cap_out, capability, 0x80, 0x8000)                 \
  /* general device capabilities (QUERY_HCA_CAP op_mod 0) */   \
  F(cmd_hca_cap, vhca_id, 0x30, 16)                              \
  F(cmd_hca_cap, log_max_srq_sz, 0x80, 8)                        \
  F(cmd_hca_cap, log_max_qp_sz, 0x88, 8)                         \
  F(cmd_hca_cap, log_max_qp, 0x9b, 5)                            \
  F(cmd_hca_cap, log_max_srq, 0xab, 5)                           \
  F(cmd_hca_cap, log_max_cq_sz, 0xc8, 8)                         \
  F(cmd_hca_cap, log_max_cq, 0xdb, 5)                            \
  F(cmd_hca_cap, log_max_mkey, 0xea, 6)                          \
  F(cmd_hca_cap, log_max_ra_req_dc, 0x12a, 6)                    \
  F(cmd_hca_cap, log_max_ra_res_dc, 0x13a, 6)                    \
  F(cmd_hca_cap, log_max_ra_req_qp, 0x14a, 6)                    \
  F(cmd_hca_cap, log_max_ra_res_qp, 0x15a, 6)                    \
  F(cmd_hca_cap, port_type, 0x1b6, 2)                            \
  F(cmd_hca_cap, num_ports, 0x1b8, 8)                            \
  F(cmd_hca_cap, log_max_msg, 0x1c3, 5)                          \
  F(cmd_hca_cap, cqe_version, 0x1fc, 4)                          \
  F(cmd_hca_cap, compact_address_vector, 0x200, 1)               \
  F(cmd_hca_cap, dct, 0x21a, 1)                                  \
  F(cmd_hca_cap, roce, 0x21d, 1)                                 \
  F(cmd_hca_cap, atomic, 0x21e, 1)                               \
  F(cmd_hca_cap, uar_4k, 0x240, 1)                               \
  F(cmd_hca_cap, uar_sz, 0x24a, 6)                               \
  F(cmd_hca_cap, log_pg_sz, 0x258, 8)                            \
  F(cmd_hca_cap, bf, 0x260, 1)                                   \
  F(cmd_hca_cap, log_bf_reg_size, 0x26b, 5)                      \
  F(cmd_hca_cap, max_wqe_sz_sq, 0x290, 16)                       \
  F(cmd_hca_cap, max_wqe_sz_rq, 0x2b0, 16)                       \
  F(cmd_hca_cap, max_wqe_sz_sq_dc, 0x2d0, 16)                    \
  F(cmd_hca_cap, log_max_pd, 0x32b, 5)                           \
  F(cmd_hca_cap, sq_ts_format, 0x440, 2)                         \
  F(cmd_hca_cap, rq_ts_format, 0x442, 2)                         \
  /* atomic capabilities (QUERY_HCA_CAP op_mod 3 << 1) */      \
  F(atomic_caps, atomic_req_8B_endianness_mode, 0x40, 2)         \
  F(atomic_caps, supported_atomic_req_8B_endianness_mode_1, 0x46, 1) \
  F(atomic_caps, atomic_operations, 0x90, 16)                    \
  F(atomic_caps, atomic_size_qp, 0xb0, 16)                       \
  F(atomic_caps, atomic_size_dc, 0xd0, 16)                       \
  /* CREATE_CQ / DESTROY_CQ */                                   \
  F(create_cq_in, opcode, 0x0, 16)                               \
  F(create_cq_in, op_mod, 0x30, 16)                              \
  F(create_cq_in, cq_context, 0x80, 0x200)                       \
  D(create_cq_in, cq_umem_offset, 0x280, 64)                     \
  D(create_cq_in, cq_umem_id, 0x2c0, 32)                         \
  F(create_cq_in, cq_umem_valid, 0x2e0, 1)                       \
  F(create_cq_out, status, 0x0, 8)                               \
  F(create_cq_out, syndrome, 0x20, 32)                           \
  F(create_cq_out, cqn, 0x48, 24)                                \
  F(destroy_cq_in, opcode, 0x0, 16)                              \
  F(destroy_cq_in, cqn, 0x48, 24)                                \
  F(cqc, status, 0x0, 4)                                         \
  F(cqc, dbr_umem_valid, 0x6, 1)                                 \
  F(cqc, cqe_sz, 0x8, 3)                                         \
  F(cqc, cc, 0xb, 1)                                             \
  F(cqc, oi, 0xe, 1)                                             \
  D(cqc, dbr_umem_id, 0x20, 32)                                  \
  F(cqc, page_offset, 0x54, 6)                                   \
  F(cqc, log_cq_size, 0x63, 5)                                   \
  F(cqc, uar_page, 0x68, 24)                                     \
  F(cqc, c_eqn_or_apu_element, 0xa0, 32)                         \
  F(cqc, log_page_size, 0xc3, 5)                                 \
  F(cqc, dbr_addr, 0x1c0, 64)                                    \
  /* CREATE_QP / DESTROY_QP / QUERY_QP */                        \
  F(create_qp_in, opcode, 0x0, 16)                               \
  F(create_qp_in, op_mod, 0x30, 16)                              \
  F(create_qp_in, opt_param_mask, 0x80, 32)                      \
  F(create_qp_in, qpc, 0xc0, 0x740)                              \
  F(create_qp_in, wq_umem_offset, 0x800, 64)                     \
  F(create_qp_in, wq_umem_id, 0x840, 32)                         \
  F(create_qp_in, wq_umem_valid, 0x860, 1)                       \
  F(create_qp_out, status, 0x0, 8)                               \
  F(create_qp_out, syndrome, 0x20, 32)                           \
  F(create_qp_out, qpn, 0x48, 24)                                \
  F(destroy_qp_in, opcode, 0x0, 16)                              \
  F(destroy_qp_in, qpn, 0x48, 24)                                \
  F(query_qp_in, opcode, 0x0, 16)                                \
  F(query_qp_in, qpn, 0x48, 24)                                  \
  F(query_qp_out, status, 0x0, 8)                                \
  F(query_qp_out, syndrome, 0x20, 32)                            \
  F(query_qp_out, qpc, 0xc0, 0x740)                              \
  /* QP state transitions (same layout for each) */             \
  F(rst2init_qp_in, opcode, 0x0, 16)                             \
  F(rst2init_qp_in, qpn, 0x48, 24)                               \
  F(rst2init_qp_in, opt_param_mask, 0x80, 32)                    \
  F(rst2init_qp_in, qpc, 0xc0, 0x740)                            \
  F(rst2init_qp_out, status, 0x0, 8)                             \
  F(rst2init_qp_out, syndrome, 0x20, 32)                         \
  F(init2rtr_qp_in, opcode, 0x0, 16)                             \
  F(init2rtr_qp_in, qpn, 0x48, 24)                               \
  F(init2rtr_qp_in, opt_param_mask, 0x80, 32)                    \
  F(init2rtr_qp_in, qpc, 0xc0, 0x740)                            \
  F(rtr2rts_qp_in, opcode, 0x0, 16)                              \
  F(rtr2rts_qp_in, qpn, 0x48, 24)                                \
  F(rtr2rts_qp_in, opt_param_mask, 0x80, 32)                     \
  F(rtr2rts_qp_in, qpc, 0xc0, 0x740)                             \
  F(rts2rts_qp_in, opcode, 0x0, 16)                              \
  F(rts2rts_qp_in, qpn, 0x48, 24)                                \
  F(rts2rts_qp_in, qpc, 0xc0, 0x740)                             \
  F(qp_2err_in, opcode, 0x0, 16)                                 \
  F(qp_2err_in, qpn, 0x48, 24)                                   \
  F(qp_2rst_in, opcode, 0x0, 16)                                 \
  F(qp_2rst_in, qpn, 0x48, 24)                                   \
  /* QP context */                                               \
  F(qpc, state, 0x0, 4)                                          \
  F(qpc, st, 0x8, 8)                                             \
  F(qpc, pm_state, 0x13, 2)                                      \
  F(qpc, pd, 0x28, 24)                                           \
  F(qpc, mtu, 0x40, 3)                                           \
  F(qpc, log_msg_max, 0x43, 5)                                   \
  F(qpc, log_rq_size, 0x49, 4)                                   \
  F(qpc, log_rq_stride, 0x4d, 3)                                 \
  F(qpc, no_sq, 0x50, 1)                                         \
  F(qpc, log_sq_size, 0x51, 4)                                   \
  F(qpc, ts_format, 0x58, 2)                                     \
  F(qpc, counter_set_id, 0x60, 8)                                \
  F(qpc, uar_page, 0x68, 24)                                     \
  F(qpc, user_index, 0x88, 24)                                   \
  F(qpc, log_page_size, 0xa3, 5)                                 \
  F(qpc, remote_qpn, 0xa8, 24)                                   \
  F(qpc, primary_address_path, 0xc0, 0x160)                      \
  F(qpc, log_ack_req_freq, 0x380, 4)                             \
  F(qpc, log_sra_max, 0x388, 3)                                  \
  F(qpc, retry_count, 0x38d, 3)                                  \
  F(qpc, rnr_retry, 0x390, 3)                                    \
  F(qpc, next_send_psn, 0x3c8, 24)                               \
  F(qpc, cqn_snd, 0x3e8, 24)                                     \
  F(qpc, log_rra_max, 0x488, 3)                                  \
  F(qpc, atomic_mode, 0x48c, 4)                                  \
  F(qpc, rre, 0x490, 1)                                          \
  F(qpc, rwe, 0x491, 1)                                          \
  F(qpc, rae, 0x492, 1)                                          \
  F(qpc, page_offset, 0x494, 6)                                  \
  F(qpc, min_rnr_nak, 0x4a3, 5)                                  \
  F(qpc, next_rcv_psn, 0x4a8, 24)                                \
  F(qpc, cqn_rcv, 0x4e8, 24)                                     \
  F(qpc, dbr_addr, 0x500, 64)                                    \
  F(qpc, rq_type, 0x565, 3)                                      \
  F(qpc, srqn_rmpn_xrqn, 0x568, 24)                              \
  F(qpc, cs_req, 0x630, 8)                                       \
  F(qpc, cs_res, 0x638, 8)                                       \
  F(qpc, dc_access_key, 0x640, 64)                               \
  F(qpc, dbr_umem_valid, 0x683, 1)                               \
  D(qpc, dbr_umem_id, 0x720, 32)                                 \
  /* address path (inside the QP context) */                    \
  F(ads, pkey_index, 0x10, 16)                                   \
  F(ads, grh, 0x28, 1)                                           \
  F(ads, mlid, 0x29, 7)                                          \
  F(ads, rlid, 0x30, 16)                                         \
  F(ads, ack_timeout, 0x40, 5)                                   \
  F(ads, src_addr_index, 0x48, 8)                                \
  F(ads, stat_rate, 0x54, 4)                                     \
  F(ads, hop_limit, 0x58, 8)                                     \
  F(ads, tclass, 0x64, 8)                                        \
  F(ads, flow_label, 0x6c, 20)                                   \
  F(ads, rgid_rip, 0x80, 128)                                    \
  F(ads, dscp, 0x10a, 6)                                         \
  F(ads, udp_sport, 0x110, 16)                                   \
  F(ads, eth_prio, 0x121, 3)                                     \
  F(ads, sl, 0x124, 4)                                           \
  F(ads, vhca_port_num, 0x128, 8)                                \
  F(ads, rmac_47_32, 0x130, 16)                                  \
  F(ads, rmac_31_0, 0x140, 32)                                   \
  /* CREATE_DCT / DESTROY_DCT / QUERY_DCT and the DC target context (dctc) */ \
  F(create_dct_in, opcode, 0x0, 16)                              \
  F(create_dct_in, op_mod, 0x30, 16)                             \
  F(create_dct_in, dct_context_entry, 0x80, 0x200)               \
  F(create_dct_out, status, 0x0, 8)                              \
  F(create_dct_out, syndrome, 0x20, 32)                          \
  F(create_dct_out, dctn, 0x48, 24)                              \
  F(destroy_dct_in, opcode, 0x0, 16)                             \
  F(destroy_dct_in, dctn, 0x48, 24)                              \
  F(query_dct_in, opcode, 0x0, 16)                               \
  F(query_dct_in, dctn, 0x48, 24)                                \
  F(query_dct_out, status, 0x0, 8)                               \
  F(query_dct_out, dct_context_entry, 0x80, 0x200)               \
  F(dctc, state, 0x4, 4)                                         \
  F(dctc, user_index, 0x28, 24)                                  \
  F(dctc, cqn, 0x48, 24)                                         \
  F(dctc, counter_set_id, 0x60, 8)                               \
  F(dctc, atomic_mode, 0x68, 4)                                  \
  F(dctc, rre, 0x6c, 1)                                          \
  F(dctc, rwe, 0x6d, 1)                                          \
  F(dctc, rae, 0x6e, 1)                                          \
  F(dctc, cs_res, 0x88, 8)                                       \
  F(dctc, min_rnr_nak, 0x93, 5)                                  \
  F(dctc, srqn_xrqn, 0xa8, 24)                                   \
  F(dctc, pd, 0xc8, 24)                                          \
  F(dctc, tclass, 0xe0, 8)                                       \
  F(dctc, flow_label, 0xec, 20)                                  \
  F(dctc, dc_access_key, 0x100, 64)                              \
  F(dctc, mtu, 0x145, 3)                                         \
  F(dctc, port, 0x148, 8)                                        \
  F(dctc, pkey_index, 0x150, 16)                                 \
  F(dctc, my_addr_index, 0x168, 8)                               \
  F(dctc, hop_limit, 0x178, 8)

#define GICOMM_PRM_CONSTANTS(C)                                        \
  C(kOpQueryHcaCap, MLX5_CMD_OP_QUERY_HCA_CAP, 0x100)                  \
  C(kOpCreateCq, MLX5_CMD_OP_CREATE_CQ, 0x400)                         \
  C(kOpDestroyCq, MLX5_CMD_OP_DESTROY_CQ, 0x401)                       \
  C(kOpCreateQp, MLX5_CMD_OP_CREATE_QP, 0x500)                         \
  C(kOpDestroyQp, MLX5_CMD_OP_DESTROY_QP, 0x501)                       \
  C(kOpRst2InitQp, MLX5_CMD_OP_RST2INIT_QP, 0x502)                     \
  C(kOpInit2RtrQp, MLX5_CMD_OP_INIT2RTR_QP, 0x503)                     \
  C(kOpRtr2RtsQp, MLX5_CMD_OP_RTR2RTS_QP, 0x504)                       \
  C(kOpRts2RtsQp, MLX5_CMD_OP_RTS2RTS_QP, 0x505)                       \
  C(kOp2ErrQp, MLX5_CMD_OP_2ERR_QP, 0x507)                             \
  C(kOp2RstQp, MLX5_CMD_OP_2RST_QP, 0x50a)                             \
  C(kOpQueryQp, MLX5_CMD_OP_QUERY_QP, 0x50b)                           \
  C(kOpInit2InitQp, MLX5_CMD_OP_INIT2INIT_QP, 0x50e)                   \
  C(kOpCreateDct, MLX5_CMD_OP_CREATE_DCT, 0x710)                       \
  C(kOpDestroyDct, MLX5_CMD_OP_DESTROY_DCT, 0x711)                     \
  C(kOpQueryDct, MLX5_CMD_OP_QUERY_DCT, 0x713)                         \
  C(kOpAllocPd, MLX5_CMD_OP_ALLOC_PD, 0x800)                           \
  C(kCapOpModGeneral, MLX5_SET_HCA_CAP_OP_MOD_GENERAL_DEVICE, 0x0)     \
  C(kCapOpModAtomic, MLX5_SET_HCA_CAP_OP_MOD_ATOMIC, 0x3)              \
  C(kQpStateRst, MLX5_QPC_STATE_RST, 0x0)                              \
  C(kQpStateInit, MLX5_QPC_STATE_INIT, 0x1)                            \
  C(kQpStateRtr, MLX5_QPC_STATE_RTR, 0x2)                              \
  C(kQpStateRts, MLX5_QPC_STATE_RTS, 0x3)                              \
  C(kQpStateSqer, MLX5_QPC_STATE_SQER, 0x4)                            \
  C(kQpStateErr, MLX5_QPC_STATE_ERR, 0x6)                              \
  C(kQpStateSqd, MLX5_QPC_STATE_SQD, 0x7)                              \
  C(kQpStRc, MLX5_QPC_ST_RC, 0x0)                                      \
  C(kQpStUc, MLX5_QPC_ST_UC, 0x1)                                      \
  C(kQpStUd, MLX5_QPC_ST_UD, 0x2)                                      \
  C(kQpStDci, MLX5_QPC_ST_DCI, 0x5)                                    \
  C(kPmStateMigrated, MLX5_QPC_PM_STATE_MIGRATED, 0x3)                 \
  C(kQpcAtomicModeUpTo8B, MLX5_QPC_ATOMIC_MODE_UP_TO_8B, 0x3)          \
  C(kDctStateActive, MLX5_DCTC_STATE_ACTIVE, 0x0)                      \
  C(kAtomicSizeQp4, MLX5_ATOMIC_CAPS_ATOMIC_SIZE_QP_4_BYTES, 0x4)      \
  C(kAtomicSizeQp8, MLX5_ATOMIC_CAPS_ATOMIC_SIZE_QP_8_BYTES, 0x8)      \
  C(kAtomicSizeDc4, MLX5_ATOMIC_CAPS_ATOMIC_SIZE_DC_4_BYTES, 0x4)      \
  C(kAtomicSizeDc8, MLX5_ATOMIC_CAPS_ATOMIC_SIZE_DC_8_BYTES, 0x8)      \
  C(kMtu256, MLX5_QPC_MTU_256_BYTES, 0x1)                              \
  C(kMtu4096, MLX5_QPC_MTU_4K_BYTES, 0x5)                              \
  C(kTimestampFreeRunning, MLX5_TIMESTAMP_FORMAT_FREE_RUNNING, 0x0)    \
  C(kTimestampDefault, MLX5_TIMESTAMP_FORMAT_DEFAULT, 0x1)             \
  C(kTimestampRealTime, MLX5_TIMESTAMP_FORMAT_REAL_TIME, 0x2)          \
  C(kPortTypeIb, MLX5_CAP_PORT_TYPE_IB, 0x0)                           \
  C(kPortTypeEth, MLX5_CAP_PORT_TYPE_ETH, 0x1)

#define GICOMM_PRM_STATUSES(S)                                   \
  S(kStatusOk, MLX5_CMD_STAT_OK, 0x0)                            \
  S(kStatusIntErr, MLX5_CMD_STAT_INT_ERR, 0x1)                   \
  S(kStatusBadOp, MLX5_CMD_STAT_BAD_OP_ERR, 0x2)                 \
  S(kStatusBadParam, MLX5_CMD_STAT_BAD_PARAM_ERR, 0x3)           \
  S(kStatusBadSysState, MLX5_CMD_STAT_BAD_SYS_STATE_ERR, 0x4)    \
  S(kStatusBadRes, MLX5_CMD_STAT_BAD_RES_ERR, 0x5)               \
  S(kStatusLimit, MLX5_CMD_STAT_LIM_ERR, 0x8)                    \
  S(kStatusBadResState, MLX5_CMD_STAT_BAD_RES_STATE_ERR, 0x9)    \
  S(kStatusIndex, MLX5_CMD_STAT_IX_ERR, 0xa)                     \
  S(kStatusNoRes, MLX5_CMD_STAT_NO_RES_ERR, 0xf)                 \
  S(kStatusBadQpState, MLX5_CMD_STAT_BAD_QP_STATE_ERR, 0x10)     \
  S(kStatusBadInputLen, MLX5_CMD_STAT_BAD_INP_LEN_ERR, 0x50)     \
  S(kStatusBadOutputLen, MLX5_CMD_STAT_BAD_OUTP_LEN_ERR, 0x51)
// clang-format on

namespace gicomm::mlx5dev::prm {

struct Field {
  uint32_t off;   // bit offset from the start of the struct
  uint32_t bits;  // width in bits
  constexpr Field at(uint32_t base) const { return Field{base + off, bits}; }
};

#define GICOMM_PRM_DEFINE_FIELD(s, f, o, b) \
  namespace s {                             \
  constexpr Field f{o, b};                  \
  }
GICOMM_PRM_FIELDS(GICOMM_PRM_DEFINE_FIELD, GICOMM_PRM_DEFINE_FIELD)
#undef GICOMM_PRM_DEFINE_FIELD

#define GICOMM_PRM_DEFINE_CONST(name, kernel, value) constexpr uint32_t name = value;
GICOMM_PRM_CONSTANTS(GICOMM_PRM_DEFINE_CONST)
GICOMM_PRM_STATUSES(GICOMM_PRM_DEFINE_CONST)
#undef GICOMM_PRM_DEFINE_CONST

// Sizes of the command mailboxes (bits): every *_in/_out above, from mlx5_ifc.h.
constexpr uint32_t kHdrOutBits = 0x80;     // status, syndrome and the first output word
constexpr uint32_t kQpCmdInBits = 0x880;   // create_qp_in (without pas), the *2*_qp_in commands
constexpr uint32_t kCqCmdInBits = 0x880;   // create_cq_in (without pas)
constexpr uint32_t kQueryHcaCapOutBits = 0x80 + 0x8000;
constexpr uint32_t kQueryQpOutBits = 0x880;
constexpr uint32_t kShortInBits = 0x80;    // destroy_*, 2err, 2rst, query_qp_in, query_hca_cap_in
constexpr uint32_t kDctCmdInBits = 0x280;  // create_dct_in
constexpr uint32_t kQueryDctOutBits = 0x280;
constexpr uint32_t kCreateDctOutBits = 0x80;

// rq_type of the QP context: a receive queue of its own, a shared receive queue (srqn_rmpn_xrqn
// names it), or none (zero-length). The kernel header has no enum for these PRM values.
constexpr uint32_t kRqTypeRegular = 0;
constexpr uint32_t kRqTypeSrq = 1;
constexpr uint32_t kRqTypeZeroLength = 3;

// Atomic capability bits (atomic_operations) and argument sizes (atomic_size_qp/dc: bit = bytes).
constexpr uint32_t kAtomicOpCompareSwap = 1u << 0;
constexpr uint32_t kAtomicOpFetchAdd = 1u << 1;
constexpr uint32_t kAtomicOpMaskedCompareSwap = 1u << 2;
constexpr uint32_t kAtomicOpMaskedFetchAdd = 1u << 3;

// ---- access -----------------------------------------------------------------------------------
// Big-endian 32-bit words, fields MSB-first within each word (as the kernel's MLX5_SET/GET).
inline uint32_t get(const void* base, Field f) {
  const uint8_t* b = static_cast<const uint8_t*>(base) + (f.off / 32) * 4;
  uint32_t be;
  std::memcpy(&be, b, 4);
  const uint32_t word = from_be32(be);
  if (f.bits == 32) return word;
  const uint32_t shift = 32 - (f.off % 32) - f.bits;
  return (word >> shift) & ((1u << f.bits) - 1);
}
inline void set(void* base, Field f, uint32_t value) {
  uint8_t* b = static_cast<uint8_t*>(base) + (f.off / 32) * 4;
  uint32_t be;
  std::memcpy(&be, b, 4);
  uint32_t word = from_be32(be);
  if (f.bits == 32) {
    word = value;
  } else {
    const uint32_t shift = 32 - (f.off % 32) - f.bits;
    const uint32_t mask = ((1u << f.bits) - 1) << shift;
    word = (word & ~mask) | ((value << shift) & mask);
  }
  be = to_be32(word);
  std::memcpy(b, &be, 4);
}
// 64-bit fields (two words, high word first).
inline uint64_t get64(const void* base, Field f) {
  return (static_cast<uint64_t>(get(base, Field{f.off, 32})) << 32) | get(base, Field{f.off + 32, 32});
}
inline void set64(void* base, Field f, uint64_t value) {
  set(base, Field{f.off, 32}, static_cast<uint32_t>(value >> 32));
  set(base, Field{f.off + 32, 32}, static_cast<uint32_t>(value));
}
// Byte-aligned byte arrays (rgid_rip): copied as they appear on the wire.
inline void set_bytes(void* base, Field f, const uint8_t* src, uint32_t n) {
  std::memcpy(static_cast<uint8_t*>(base) + f.off / 8, src, n);
}
inline void get_bytes(const void* base, Field f, uint8_t* dst, uint32_t n) {
  std::memcpy(dst, static_cast<const uint8_t*>(base) + f.off / 8, n);
}

// Byte count of a mailbox of `bits`.
constexpr uint32_t bytes_of(uint32_t bits) { return bits / 8; }

}  // namespace gicomm::mlx5dev::prm
