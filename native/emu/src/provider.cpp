// The emulated mlx5 provider's data path: ibv_post_send builds mlx5 send WQEs in the QP's send
// queue with gicomm's encoders (the same bytes mini-gda's GPU threads write) and rings the QP's
// doorbell; ibv_post_recv writes receive WQEs and the receive doorbell record; ibv_poll_cq reads
// mlx5 CQEs (owner bit, wqe_counter) and turns them into ibv_wc. Error returns follow the mlx5
// provider: ENOMEM for a full queue, too many SGEs, an inline payload above the QP's limit, or a
// send before the QP reached RTS; EINVAL for an unknown opcode or a receive posted in RESET.
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <infiniband/mlx5dv.h>

#include <cstddef>

#include "gicomm/mlx5/host_post.h"
#include "verbs_objects.h"

namespace gicomm::emu {

namespace {

namespace sn_ = gicomm::softnic;
// The formats the emulation adds beside gicomm/mlx5 (whose encoders tests/mlx5 compares with
// rdma-core's): held to rdma-core's mlx5dv.h here, where both are in view.
static_assert(offsetof(mlx5_cqe64, flags_rqpn) == 24, "flags_rqpn (the responder's source QP) is at byte 24");
static_assert(offsetof(mlx5_cqe64, imm_inval_pkey) == mlx5::kCqeOffImm && offsetof(mlx5_cqe64, byte_cnt) == mlx5::kCqeOffByteCnt,
              "CQE immediate and byte count offsets");
static_assert(sn_::kOpcodeSendImm == MLX5_OPCODE_SEND_IMM, "MLX5_OPCODE_SEND_IMM");
static_assert(sn_::kCqeRespSend == MLX5_CQE_RESP_SEND && sn_::kCqeRespSendImm == MLX5_CQE_RESP_SEND_IMM &&
                  mlx5::kCqeRespWrImm == MLX5_CQE_RESP_WR_IMM && mlx5::kCqeRespErr == MLX5_CQE_RESP_ERR,
              "responder CQE opcodes");
static_assert(sn_::kSyndromeBadResp == MLX5_CQE_SYNDROME_BAD_RESP_ERR &&
                  sn_::kSyndromeTransportRetryExc == MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR &&
                  sn_::kSyndromeRnrRetryExc == MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR &&
                  sn_::kSyndromeRemoteAborted == MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR,
              "error CQE syndromes");
static_assert(MLX5_INVALID_LKEY == 0x100 && MLX5_RCV_DBR == mlx5::kRcvDbr && MLX5_SND_DBR == mlx5::kSndDbr,
              "receive-list end marker and doorbell record slots");

using namespace gicomm::mlx5;
namespace sn = gicomm::softnic;

bool opcode_of(ibv_wr_opcode op, uint8_t* out) {
  switch (op) {
    case IBV_WR_RDMA_WRITE: *out = kOpcodeRdmaWrite; return true;
    case IBV_WR_RDMA_WRITE_WITH_IMM: *out = kOpcodeRdmaWriteImm; return true;
    case IBV_WR_SEND: *out = kOpcodeSend; return true;
    case IBV_WR_SEND_WITH_IMM: *out = sn::kOpcodeSendImm; return true;
    case IBV_WR_RDMA_READ: *out = kOpcodeRdmaRead; return true;
    case IBV_WR_ATOMIC_CMP_AND_SWP: *out = kOpcodeAtomicCs; return true;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: *out = kOpcodeAtomicFa; return true;
    default: return false;
  }
}

ibv_wc_status status_of(uint8_t syndrome) {
  switch (syndrome) {
    case kSyndromeLocalLength: return IBV_WC_LOC_LEN_ERR;
    case kSyndromeLocalQpOp: return IBV_WC_LOC_QP_OP_ERR;
    case kSyndromeLocalProt: return IBV_WC_LOC_PROT_ERR;
    case kSyndromeWrFlush: return IBV_WC_WR_FLUSH_ERR;
    case 0x06: return IBV_WC_MW_BIND_ERR;
    case sn::kSyndromeBadResp: return IBV_WC_BAD_RESP_ERR;
    case kSyndromeLocalAccess: return IBV_WC_LOC_ACCESS_ERR;
    case kSyndromeRemoteInvalReq: return IBV_WC_REM_INV_REQ_ERR;
    case kSyndromeRemoteAccess: return IBV_WC_REM_ACCESS_ERR;
    case kSyndromeRemoteOp: return IBV_WC_REM_OP_ERR;
    case sn::kSyndromeTransportRetryExc: return IBV_WC_RETRY_EXC_ERR;
    case sn::kSyndromeRnrRetryExc: return IBV_WC_RNR_RETRY_EXC_ERR;
    case sn::kSyndromeRemoteAborted: return IBV_WC_REM_ABORT_ERR;
    default: return IBV_WC_GENERAL_ERR;
  }
}

ibv_wc_opcode wc_opcode_of(uint8_t wqe_opcode) {
  switch (wqe_opcode) {
    case kOpcodeRdmaWrite:
    case kOpcodeRdmaWriteImm: return IBV_WC_RDMA_WRITE;
    case kOpcodeRdmaRead: return IBV_WC_RDMA_READ;
    case kOpcodeAtomicCs: return IBV_WC_COMP_SWAP;
    case kOpcodeAtomicFa: return IBV_WC_FETCH_ADD;
    default: return IBV_WC_SEND;
  }
}

int post_error(int err, ibv_send_wr* wr, ibv_send_wr** bad, const Qp& q, const std::string& why) {
  *bad = wr;
  return fail(err, "ibv_post_send", "QP " + hex(q.qpn) + " WR " + std::to_string(wr->wr_id), why);
}

// A receive WQE of `stride` bytes (a QP's receive queue or an SRQ): the non-empty SGEs, then an
// entry of MLX5_INVALID_LKEY ending the list when the WQE has room for one, as mlx5 writes it.
void write_recv_sges(uint8_t* wqe, uint32_t stride, const ibv_recv_wr& wr) {
  auto* seg = reinterpret_cast<Seg16*>(wqe);
  uint32_t j = 0;
  for (int i = 0; i < wr.num_sge; ++i)
    if (wr.sg_list[i].length != 0) set_data_seg(seg[j++], wr.sg_list[i].length, wr.sg_list[i].lkey, wr.sg_list[i].addr);
  if (j < stride / 16) set_data_seg(seg[j], 0, 0x100, 0);
}

}  // namespace

int provider_post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad) {
  VQp* v = vqp(ibqp);
  Qp& q = v->core;
  std::lock_guard<std::mutex> lock(q.post_mu);
  uint32_t posted = 0;
  uint64_t doorbell = 0;
  for (; wr != nullptr; wr = wr->next) {
    uint8_t opcode = 0;
    if (!opcode_of(wr->opcode, &opcode))
      return post_error(EINVAL, wr, bad, q, "opcode " + std::to_string(wr->opcode) + " is not emulated (write, write with immediate, send, send with immediate, read, compare-swap, fetch-add)");
    if (!v->sq_enabled)
      return post_error(ENOMEM, wr, bad, q, "the QP has not reached RTS (state " + std::to_string(q.state.load()) + ")");
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q.max_send_sge)
      return post_error(ENOMEM, wr, bad, q, std::to_string(wr->num_sge) + " SGEs, the QP takes " + std::to_string(q.max_send_sge));
    WqeImage img;
    uint32_t n = 1;
    const bool rdma = opcode == kOpcodeRdmaWrite || opcode == kOpcodeRdmaWriteImm || opcode == kOpcodeRdmaRead;
    const bool atomic = opcode == kOpcodeAtomicCs || opcode == kOpcodeAtomicFa;
    if (rdma) set_raddr_seg(img.seg[n++], wr->wr.rdma.remote_addr, wr->wr.rdma.rkey);
    if (atomic) {
      if (wr->num_sge < 1) return post_error(EINVAL, wr, bad, q, "an atomic needs one 8-byte SGE for the old value");
      set_raddr_seg(img.seg[n++], wr->wr.atomic.remote_addr, wr->wr.atomic.rkey);
      if (opcode == kOpcodeAtomicCs) {
        set_atomic_seg(img.seg[n++], wr->wr.atomic.swap, wr->wr.atomic.compare_add);
      } else {
        set_atomic_seg(img.seg[n++], wr->wr.atomic.compare_add, 0);
      }
      set_data_seg(img.seg[n++], 8, wr->sg_list[0].lkey, wr->sg_list[0].addr);
    } else if ((wr->send_flags & IBV_SEND_INLINE) && opcode != kOpcodeRdmaRead) {
      uint8_t payload[kMaxInline];
      uint32_t len = 0;
      for (int i = 0; i < wr->num_sge; ++i) {
        if (len + wr->sg_list[i].length > q.max_inline)
          return post_error(ENOMEM, wr, bad, q, "inline payload above the QP's max_inline_data " + std::to_string(q.max_inline));
        std::memcpy(payload + len, reinterpret_cast<const void*>(wr->sg_list[i].addr), wr->sg_list[i].length);
        len += wr->sg_list[i].length;
      }
      if (len > 0) {
        set_inline_seg(&img.seg[n], payload, len);
        n += inline_seg_ds(len);
      }
    } else {
      for (int i = 0; i < wr->num_sge; ++i)
        if (wr->sg_list[i].length != 0)  // zero-length entries are left out, as mlx5 does
          set_data_seg(img.seg[n++], wr->sg_list[i].length, wr->sg_list[i].lkey, wr->sg_list[i].addr);
    }
    const uint32_t nbb = wqebbs_of_ds(n);
    const uint32_t tail = __atomic_load_n(&q.sq_tail, __ATOMIC_ACQUIRE);
    if (q.sq.wqe_cnt == 0 || q.sq_head - tail + nbb > q.sq.wqe_cnt)
      return post_error(ENOMEM, wr, bad, q, "send queue full (" + std::to_string(q.sq_head - tail) + " of " + std::to_string(q.sq.wqe_cnt) + " WQEBBs outstanding)");
    uint8_t fm_ce_se = 0;
    if ((wr->send_flags & IBV_SEND_SIGNALED) || q.sq_sig_all) fm_ce_se |= kCtrlCqUpdate;
    if (wr->send_flags & IBV_SEND_SOLICITED) fm_ce_se |= kCtrlSolicited;
    if (wr->send_flags & IBV_SEND_FENCE) fm_ce_se |= kCtrlFence;
    const bool imm = opcode == kOpcodeRdmaWriteImm || opcode == sn::kOpcodeSendImm;
    set_ctrl_seg(img.seg[0], static_cast<uint16_t>(q.sq_head), opcode, 0, q.qpn, fm_ce_se, static_cast<uint8_t>(n), 0,
                 imm ? wr->imm_data : 0);
    store_wqe(q.sq.buf, q.sq.wqe_cnt, q.sq_head, img, n);
    const uint32_t slot = q.sq_head & (q.sq.wqe_cnt - 1);
    q.sq_wrid[slot] = wr->wr_id;
    q.sq_wqe_head[slot] = q.sq_head + nbb;
    q.sq_head += nbb;
    doorbell = doorbell_value(img.seg[0]);
    ++posted;
  }
  if (posted != 0) host_ring_doorbell(q.sq, q.sq_head, doorbell);
  return 0;
}

int provider_post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Qp& q = vqp(ibqp)->core;
  std::lock_guard<std::mutex> lock(q.post_mu);
  uint32_t posted = 0;
  for (; wr != nullptr; wr = wr->next) {
    auto error = [&](int err, const std::string& why) {
      *bad = wr;
      return fail(err, "ibv_post_recv", "QP " + hex(q.qpn) + " WR " + std::to_string(wr->wr_id), why);
    };
    if (q.state.load() == IBV_QPS_RESET) return error(EINVAL, "the QP is in RESET");
    if (q.srq != nullptr) return error(EINVAL, "the QP receives from SRQ " + hex(q.srq->srqn) + " (use ibv_post_srq_recv)");
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q.max_recv_sge)
      return error(EINVAL, std::to_string(wr->num_sge) + " SGEs, the QP takes " + std::to_string(q.max_recv_sge));
    const uint32_t tail = __atomic_load_n(&q.rq_tail, __ATOMIC_ACQUIRE);
    if (q.rq_wqe_cnt == 0 || q.rq_head - tail + 1 > q.rq_wqe_cnt)
      return error(ENOMEM, "receive queue full (" + std::to_string(q.rq_head - tail) + " of " + std::to_string(q.rq_wqe_cnt) + ")");
    const uint32_t slot = q.rq_head & (q.rq_wqe_cnt - 1);
    write_recv_sges(q.rq_buf + size_t(slot) * q.rq_stride, q.rq_stride, *wr);
    q.rq_wrid[slot] = wr->wr_id;
    ++q.rq_head;
    ++posted;
  }
  if (posted != 0) {
    std::atomic_thread_fence(std::memory_order_release);
    __atomic_store_n(&q.sq.dbrec[kRcvDbr], to_be32(q.rq_head & 0xffff), __ATOMIC_RELEASE);
  }
  return 0;
}

int provider_post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Srq& q = srq_of(ibsrq)[0];
  std::lock_guard<std::mutex> lock(q.post_mu);
  for (; wr != nullptr; wr = wr->next) {
    auto error = [&](int err, const std::string& why) {
      *bad = wr;
      return fail(err, "ibv_post_srq_recv", "SRQ " + hex(q.srqn) + " WR " + std::to_string(wr->wr_id), why);
    };
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > q.max_sge)
      return error(EINVAL, std::to_string(wr->num_sge) + " SGEs, the SRQ takes " + std::to_string(q.max_sge));
    const uint32_t tail = q.tail.load(std::memory_order_acquire);
    if (q.head - tail + 1 > q.wqe_cnt - 1)
      return error(ENOMEM, "SRQ full (" + std::to_string(q.head - tail) + " of " + std::to_string(q.wqe_cnt - 1) + ")");
    const uint32_t slot = q.head & (q.wqe_cnt - 1);
    write_recv_sges(q.buf + size_t(slot) * q.stride, q.stride, *wr);
    q.wrid[slot] = wr->wr_id;
    ++q.head;
    __atomic_store_n(&q.dbrec[0], q.head, __ATOMIC_RELEASE);  // published WQE by WQE: the engine may take it now
  }
  return 0;
}

int provider_poll_cq(ibv_cq* ibcq, int n, ibv_wc* wc) {
  Cq& cq = vcq(ibcq)->core;
  std::lock_guard<std::mutex> lock(cq.poll_mu);
  int got = 0;
  for (; got < n; ++got) {
    Cqe64* c = cq.buf + (cq.ci & (cq.cqe_cnt - 1));
    const uint32_t tail = __atomic_load_n(&c->w[15], __ATOMIC_ACQUIRE);
    if (!cqe_ready(tail_op_own(tail), cq.ci, cq.cqe_cnt)) break;
    const CqeFields f = decode_cqe(*c);
    ibv_wc& w = wc[got];
    std::memset(&w, 0, sizeof w);
    w.qp_num = f.qpn;
    w.vendor_err = f.vendor_syndrome;
    w.byte_len = f.byte_cnt;
    Qp* q = cq.nic->qp(f.qpn);
    const bool requester = f.opcode == kCqeReq || f.opcode == kCqeReqErr;
    if (requester) {
      w.status = f.opcode == kCqeReq ? IBV_WC_SUCCESS : status_of(f.syndrome);
      w.opcode = wc_opcode_of(f.wqe_opcode);
      if (q != nullptr && q->sq.wqe_cnt != 0) {
        const uint32_t slot = f.wqe_counter & (q->sq.wqe_cnt - 1);
        w.wr_id = q->sq_wrid[slot];
        __atomic_store_n(&q->sq_tail, q->sq_wqe_head[slot], __ATOMIC_RELEASE);
      }
    } else {
      w.status = f.opcode == kCqeRespErr ? status_of(f.syndrome) : IBV_WC_SUCCESS;
      w.opcode = f.opcode == kCqeRespWrImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
      if (f.opcode == kCqeRespWrImm || f.opcode == sn::kCqeRespSendImm) {
        w.wc_flags |= IBV_WC_WITH_IMM;
        w.imm_data = c->w[kCqeOffImm / 4];  // big-endian, as the verbs API hands it over
      }
      w.src_qp = from_be32(c->w[24 / 4]) & 0xffffff;
      if (q != nullptr && q->srq != nullptr) {
        Srq& srq = *q->srq;
        w.wr_id = srq.wrid[f.wqe_counter & (srq.wqe_cnt - 1)];
        srq.tail.fetch_add(1, std::memory_order_acq_rel);
      } else if (q != nullptr && q->rq_wqe_cnt != 0) {
        w.wr_id = q->rq_wrid[f.wqe_counter & (q->rq_wqe_cnt - 1)];
        __atomic_fetch_add(&q->rq_tail, 1u, __ATOMIC_ACQ_REL);
      }
    }
    ++cq.ci;
  }
  if (got != 0) __atomic_store_n(&cq.dbrec[kCqDbrecConsumer], cq_dbrec_value(cq.ci), __ATOMIC_RELEASE);
  return got;
}

int provider_req_notify_cq(ibv_cq* ibcq, int solicited_only) {
  Cq& cq = vcq(ibcq)->core;
  if (cq.notify_fd < 0) return fail(EINVAL, "ibv_req_notify_cq", "CQ " + hex(cq.cqn), "the CQ has no completion channel");
  std::lock_guard<std::mutex> lock(registry().mu);
  cq.armed.store(solicited_only ? 2 : 1, std::memory_order_release);
  // Completions already waiting past the consumer index raise the event at once (as the arm
  // doorbell, which carries the consumer index, does on mlx5).
  const uint32_t ci = from_be32(__atomic_load_n(&cq.dbrec[kCqDbrecConsumer], __ATOMIC_ACQUIRE)) & 0xffffff;
  if (!solicited_only && ((cq.pi - ci) & 0xffffff) != 0) {
    cq.armed.store(0);
    ibv_cq* handle = cq.ibv;
    if (write(cq.notify_fd, &handle, sizeof handle) != static_cast<ssize_t>(sizeof handle))
      return fail(EAGAIN, "ibv_req_notify_cq", "CQ " + hex(cq.cqn), "event channel full");
  }
  return 0;
}

}  // namespace gicomm::emu
