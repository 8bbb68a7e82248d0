// The engine: one thread per process that plays every emulated NIC of the process.
//
// Each pass (under the registry lock, so objects cannot vanish under it):
//   1. doorbells: each verbs QP's private register, and both BlueFlame registers of every DEVX UAR
//      page. A doorbell names a QP and the index of its last WQE; the QP's send queue is executed up
//      to it. Several DEVX QPs may share a UAR page, so a doorbell can be overwritten before the
//      engine reads it; whenever a page's register changes, the engine also reads the doorbell
//      record of every other QP on the page (written before its doorbell) so no ring is lost.
//   2. each QP in RTS (or ERR: flush) executes the WQEs rung: fetch (as a DMA read would), decode
//      and check with the softnic core, resolve the connected QP, perform the operation on the
//      responder's memory with the responder's keys, complete on both sides.
//   3. QPs in ERR flush their posted receives.
// A WQE that cannot proceed (receiver not ready, destination unreachable) blocks its QP on a timer,
// with the retry counts of the QP, as the RC transport would; the engine itself never waits.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "emu.h"
#include "gicomm/mlx5/doorbell.h"

namespace gicomm::emu {

namespace {

using namespace gicomm::mlx5;
namespace sn = gicomm::softnic;

// Heap-held and never destroyed: a process may exit with contexts open (and the engine running);
// the exit handler below stops it then, before CUDA and the C++ runtime tear down.
std::thread* g_thread = nullptr;
std::atomic<bool> g_stop{false};
bool g_running = false;

constexpr uint32_t kUarRegister[2] = {0x800, 0x900};  // the two BlueFlame doorbell registers
constexpr uint32_t kInvalidLkey = 0x100;              // MLX5_INVALID_LKEY: end of a receive list

// Per-attempt cap of the transport retry timer (4.096 us * 2^timeout), so an unreachable peer
// fails in bounded time even with long timeouts (timeout 0, "infinite" in the spec, included).
Clock::duration retry_wait(uint8_t timeout) {
  const uint32_t t = timeout == 0 ? 31 : timeout;
  const double us = 4.096 * static_cast<double>(1ull << std::min<uint32_t>(t, 31));
  const double capped = std::min(us, 250000.0);
  return std::chrono::microseconds(static_cast<int64_t>(capped));
}

// The responder's RNR NAK timer (IB spec encoding of min_rnr_timer).
Clock::duration rnr_wait(uint8_t code) {
  static const uint32_t us[32] = {655360, 10,    20,    30,    40,    60,    80,    120,   160,    240,   320,
                                  480,    640,   960,   1280,  1920,  2560,  3840,  5120,  7680,   10240, 15360,
                                  20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return std::chrono::microseconds(us[code & 31]);
}

// ---- completions ------------------------------------------------------------------------------------
// Writes one CQE (body, then the tail word that carries the owner bit) where the CQ lives. False
// when the CQ has overrun (the CQE is lost, the CQ is in error, a CQ_ERR event is posted).
bool push_cqe(Cq& cq, Cqe64& body, uint32_t tail, bool solicited) {
  if (cq.overrun) return false;
  if (!cq.collapsed && !cq.overrun_ignore) {
    const uint32_t ci = from_be32(mem_load32(&cq.dbrec[kCqDbrecConsumer], cq.loc)) & 0xffffff;
    if (((cq.pi - ci) & 0xffffff) >= cq.cqe_cnt) {
      cq.overrun = true;
      fail(ENOSPC, "engine", "CQ " + hex(cq.cqn) + " of " + cq.nic->spec().name,
           "completion queue overrun: " + std::to_string(cq.cqe_cnt) + " completions not yet polled; CQ in error");
      if (cq.ibv != nullptr) {  // DEVX CQs report through DEVX event channels, which are not emulated
        ibv_async_event ev{};
        ev.element.cq = cq.ibv;
        ev.event_type = IBV_EVENT_CQ_ERR;
        post_async_event(cq.ctx, ev);
      }
      return false;
    }
  }
  Cqe64* slot = cqe_at(CqDesc{cq.buf, cq.cqe_cnt, cq.dbrec, cq.collapsed}, cq.pi);
  if (cq.loc.is_device()) {
    mem_write(slot, &body, 60, cq.loc);
    mem_write(&slot->w[15], &tail, 4, cq.loc);
  } else {
    std::memcpy(slot, &body, 60);
    __atomic_store_n(&slot->w[15], tail, __ATOMIC_RELEASE);
  }
  ++cq.pi;
  const int armed = cq.armed.load(std::memory_order_acquire);
  if (armed != 0 && (armed == 1 || solicited) && cq.notify_fd >= 0) {
    cq.armed.store(0, std::memory_order_release);
    ibv_cq* handle = cq.ibv;
    if (write(cq.notify_fd, &handle, sizeof handle) != static_cast<ssize_t>(sizeof handle))
      fail(EAGAIN, "engine", "completion channel of CQ " + hex(cq.cqn), "event lost");
  }
  return true;
}

uint8_t owner_of(const Cq& cq) { return expected_owner(cq.pi, cq.collapsed ? 1 : cq.cqe_cnt); }

void complete_req(Qp& q, uint16_t index, uint8_t opcode, uint8_t syndrome, uint32_t byte_cnt) {
  if (q.send_cq == nullptr) return;
  Cqe64 body;
  const uint8_t owner = owner_of(*q.send_cq);
  const uint32_t tail = syndrome == 0 ? encode_req_cqe(body, index, q.qpn, opcode, byte_cnt, owner)
                                      : encode_err_cqe(body, index, q.qpn, opcode, syndrome, 0, owner);
  push_cqe(*q.send_cq, body, tail, false);
}

void complete_resp(Qp& r, uint16_t index, uint8_t cqe_opcode, uint32_t byte_cnt, uint32_t imm_raw, uint32_t src_qpn,
                   bool solicited) {
  if (r.recv_cq == nullptr) return;
  Cqe64 body;
  const uint32_t tail =
      sn::encode_resp_cqe(body, index, r.qpn, cqe_opcode, byte_cnt, imm_raw, src_qpn, owner_of(*r.recv_cq));
  push_cqe(*r.recv_cq, body, tail, solicited);
}

void complete_resp_err(Qp& r, uint16_t index, uint8_t syndrome) {
  if (r.recv_cq == nullptr) return;
  Cqe64 body;
  const uint32_t tail = sn::encode_resp_err_cqe(body, index, r.qpn, syndrome, owner_of(*r.recv_cq));
  push_cqe(*r.recv_cq, body, tail, false);
}

// The QP enters the error state; `event` (when >= 0) is the affiliated async event it raises.
void enter_error(Qp& q, int event, const std::string& why) {
  if (q.state.load() != IBV_QPS_ERR) {
    note("QP " + hex(q.qpn) + " of " + q.nic->spec().name + " enters ERR: " + why);
    q.state.store(IBV_QPS_ERR, std::memory_order_release);
  }
  q.blocked = q.retrying = q.rnr_waiting = false;
  if (event >= 0 && q.ibv != nullptr) {
    ibv_async_event ev{};
    ev.element.qp = q.ibv;
    ev.event_type = static_cast<ibv_event_type>(event);
    post_async_event(q.ctx, ev);
  }
}

// ---- receive queue --------------------------------------------------------------------------------
uint16_t rq_producer(const Qp& r) {
  if (r.rq_wqe_cnt == 0) return static_cast<uint16_t>(r.rq_ci);
  return static_cast<uint16_t>(from_be32(mem_load32(&r.sq.dbrec[kRcvDbr], r.dbrec_loc)) & 0xffff);
}

void flush_receives(Qp& r) {
  if (r.rq_wqe_cnt == 0) return;
  const uint16_t pi = rq_producer(r);
  while (static_cast<uint16_t>(r.rq_ci) != pi) {
    complete_resp_err(r, static_cast<uint16_t>(r.rq_ci), kSyndromeWrFlush);
    ++r.rq_ci;
  }
}

struct Span {
  uint8_t* ptr;
  Loc loc;
  uint64_t len;
};

// Copies the bytes of `src` spans into `dst` spans, in order (equal totals or dst shorter).
void copy_spans(const std::vector<Span>& dst, const std::vector<Span>& src) {
  size_t di = 0, si = 0;
  uint64_t doff = 0, soff = 0;
  while (di < dst.size() && si < src.size()) {
    const uint64_t n = std::min(dst[di].len - doff, src[si].len - soff);
    if (n > 0) mem_copy(dst[di].ptr + doff, dst[di].loc, src[si].ptr + soff, src[si].loc, n);
    doff += n;
    soff += n;
    if (doff == dst[di].len) ++di, doff = 0;
    if (soff == src[si].len) ++si, soff = 0;
  }
}

// The requester's local data of a decoded WQE (gather for write/send, scatter for read/atomic):
// keys checked in the requester's table and PD. 0 or LOCAL_PROT.
uint8_t local_spans(const Qp& q, const sn::SendWr& wr, std::vector<Span>* out) {
  const sn::Tables t = q.nic->tables();
  const uint8_t syn = sn::check_local_sges(t, wr);
  if (syn != 0) return syn;
  out->clear();
  if (wr.inline_data != nullptr) {
    out->push_back(Span{const_cast<uint8_t*>(wr.inline_data), Loc{}, wr.inline_len});
    return 0;
  }
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    const sn::Sge& s = wr.sge[i];
    if (s.length == 0) continue;
    const sn::MrEntry& e = t.mrs[s.lkey >> 8];
    const MrInfo& info = q.nic->mr_info(s.lkey);
    if (info.pdn != q.pdn) return kSyndromeLocalProt;
    out->push_back(Span{reinterpret_cast<uint8_t*>(q.nic->va_of(e, s.addr)), info.loc, s.length});
  }
  return 0;
}

// ---- routing ---------------------------------------------------------------------------------------
// The QP this QP is connected to, when it lives on an emulated device of this process. A destination
// elsewhere (another process or host) has no path yet: the requester sees transport retries.
Qp* route(const Qp& q) {
  const Registry& reg = registry();
  for (const auto& n : reg.nics) {
    if (!n) continue;
    const DeviceSpec& s = n->spec();
    bool match = false;
    if (q.ah.is_global) {
      for (const GidEntry& g : s.gids) match = match || std::memcmp(g.gid.raw, q.ah.grh.dgid.raw, 16) == 0;
    } else {
      match = !s.roce && s.lid == q.ah.dlid;
    }
    if (match) return n->qp(q.dest_qpn);
  }
  return nullptr;
}

bool responder_ready(const Qp& r) {
  const int s = r.state.load(std::memory_order_acquire);
  return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE;
}

// Outcome of the responder side of one WQE.
struct Response {
  uint8_t syndrome = 0;  // what the requester's CQE reports (0: ACK)
  bool rnr = false;      // receiver not ready: retry later
  uint64_t atomic_old = 0;
};

// The responder side of an RDMA write/read/atomic on r's memory; `data` is the requester's data
// (write source, read destination, atomic result buffer). A duplicate (a PSN the responder has
// already executed) is answered without executing it again: a write is only acknowledged, a read
// is read again, an atomic returns the word unchanged (a responder keeps the original result; the
// emulation returns what memory holds now).
Response respond_rdma(Qp& r, const Qp& q, const sn::SendWr& wr, const std::vector<Span>& data, bool duplicate = false) {
  Response res;
  const uint8_t op = wr.opcode;
  const uint32_t need_qp = op == kOpcodeRdmaRead ? IBV_ACCESS_REMOTE_READ
                           : sn::opcode_is_atomic(op) ? IBV_ACCESS_REMOTE_ATOMIC
                                                      : IBV_ACCESS_REMOTE_WRITE;
  const uint64_t length = sn::opcode_is_atomic(op) ? 8 : wr.length;
  const sn::MrEntry* e = nullptr;
  uint8_t syn = sn::check_remote_op(r.nic->tables(), op, wr.raddr, wr.rkey, length, &e);
  if (syn == 0 && length != 0) {
    if ((r.access & need_qp) == 0 || (e != nullptr && r.nic->mr_info(e->key).pdn != r.pdn))
      syn = kSyndromeRemoteAccess;
  }
  if (syn != 0) {
    res.syndrome = syn;
    enter_error(r, syn == kSyndromeRemoteAccess ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR,
                "responder rejected " + std::string(op == kOpcodeRdmaRead ? "an RDMA read" : sn::opcode_is_atomic(op) ? "an atomic" : "an RDMA write") +
                    " from QP " + hex(q.qpn) + " (rkey " + hex(wr.rkey) + ", address " + hex(wr.raddr) + ")");
    return res;
  }
  if (length == 0) return res;
  const MrInfo& info = r.nic->mr_info(e->key);
  uint8_t* remote = reinterpret_cast<uint8_t*>(r.nic->va_of(*e, wr.raddr));
  if (op == kOpcodeRdmaWrite || op == kOpcodeRdmaWriteImm) {
    if (!duplicate) copy_spans({Span{remote, info.loc, length}}, data);
  } else if (op == kOpcodeRdmaRead) {
    copy_spans(data, {Span{remote, info.loc, length}});
  } else if (duplicate) {
    mem_read(&res.atomic_old, remote, 8, info.loc);
  } else {
    res.atomic_old = mem_atomic(reinterpret_cast<uint64_t*>(remote), info.loc, op, wr.swap_add, wr.compare);
  }
  return res;
}

// Consumes r's next receive WQE for a send (scatter `data` into it) or a write with immediate.
Response respond_receive(Qp& r, const Qp& q, const sn::SendWr& wr, const std::vector<Span>& data) {
  Response res;
  if (r.rq_wqe_cnt == 0 || static_cast<uint16_t>(r.rq_ci) == rq_producer(r)) {
    res.rnr = true;  // no receive posted: RNR NAK
    return res;
  }
  const uint16_t index = static_cast<uint16_t>(r.rq_ci);
  const bool send = wr.opcode == kOpcodeSend || wr.opcode == sn::kOpcodeSendImm;
  const bool with_imm = wr.opcode != kOpcodeSend;
  if (send) {
    // The receive WQE: data segments up to the stride, ended early by MLX5_INVALID_LKEY.
    std::vector<Seg16> segs(r.rq_stride / 16);
    mem_read(segs.data(), r.rq_buf + size_t(r.rq_ci & (r.rq_wqe_cnt - 1)) * r.rq_stride, r.rq_stride, r.rq_loc);
    const sn::Tables t = r.nic->tables();
    std::vector<Span> dst;
    uint64_t room = 0;
    uint8_t local = 0;
    for (const Seg16& s : segs) {
      uint32_t len = 0, lkey = 0;
      const uint64_t addr = decode_data(s, &len, &lkey);
      if (lkey == kInvalidLkey) break;
      if (len == 0) continue;
      const sn::MrEntry* e = sn::check_key(t, lkey, addr, len, sn::kAccessLocalWrite);
      if (e == nullptr || r.nic->mr_info(lkey).pdn != r.pdn) {
        local = kSyndromeLocalProt;
        break;
      }
      dst.push_back(Span{reinterpret_cast<uint8_t*>(r.nic->va_of(*e, addr)), r.nic->mr_info(lkey).loc, len});
      room += len;
    }
    if (local == 0 && room < wr.length) local = kSyndromeLocalLength;
    if (local != 0) {
      ++r.rq_ci;
      complete_resp_err(r, index, local);
      enter_error(r, -1, "receive WQE " + std::to_string(index) + " cannot take the send from QP " + hex(q.qpn));
      res.syndrome = local == kSyndromeLocalLength ? kSyndromeRemoteInvalReq : kSyndromeRemoteOp;
      return res;
    }
    copy_spans(dst, data);
  }
  ++r.rq_ci;
  const uint8_t cqe_op = !send ? kCqeRespWrImm : with_imm ? sn::kCqeRespSendImm : sn::kCqeRespSend;
  const bool solicited = (wr.fm_ce_se & kCtrlSolicited) != 0;
  complete_resp(r, index, cqe_op, static_cast<uint32_t>(wr.length), with_imm ? wr.imm_raw : 0, q.qpn, solicited);
  return res;
}

// ---- PSNs -----------------------------------------------------------------------------------------
// Every request takes as many PSNs as it has packets at the path MTU (a read, as many as its
// response; an atomic, one). The responder executes only the PSN it expects: one it has already
// seen is a duplicate (re-acknowledged), a later one is a sequence error (the requester retries and
// gives up), as on the wire.
uint32_t packets(const Qp& q, const sn::SendWr& wr) {
  if (sn::opcode_is_atomic(wr.opcode)) return 1;
  const uint64_t mtu = q.path_mtu ? (uint64_t(128) << q.path_mtu) : 4096;
  return static_cast<uint32_t>(std::max<uint64_t>(1, (wr.length + mtu - 1) / mtu));
}
int32_t psn_diff(uint32_t a, uint32_t b) { return static_cast<int32_t>((a - b) << 8) >> 8; }  // 24-bit, signed

// ---- requester ------------------------------------------------------------------------------------
enum class Step { done, blocked };

// Fails the WQE at q.ci: error CQE (always, as a ConnectX does), QP to ERR.
void requester_error(Qp& q, uint16_t index, uint8_t opcode, uint8_t syndrome, uint32_t nbb, const std::string& why) {
  complete_req(q, index, opcode, syndrome, 0);
  q.ci += nbb;
  enter_error(q, -1, why);
}

Step execute_one(Qp& q) {
  WqeImage img;
  const uint16_t index = static_cast<uint16_t>(q.ci);
  mem_read(&img.seg[0], wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, q.ci), kSendWqeBB, q.sq_loc);
  CtrlFields c = decode_ctrl(img.seg[0]);
  // A ctrl segment with an older index: the doorbell overtook the WQE stores. Re-read a few times.
  for (int tries = 0; c.wqe_index != index && tries < sn::kStaleRetries; ++tries) {
    std::atomic_thread_fence(std::memory_order_acquire);
    mem_read(&img.seg[0], wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, q.ci), kSendWqeBB, q.sq_loc);
    c = decode_ctrl(img.seg[0]);
  }
  const bool well_formed = c.wqe_index == index && c.ds != 0 && c.ds <= kMaxDs && c.qpn == q.qpn;
  const uint32_t nbb = well_formed ? wqebbs_of_ds(c.ds) : 1;
  if (q.state.load() == IBV_QPS_ERR) {
    complete_req(q, index, c.opcode, kSyndromeWrFlush, 0);  // every WQE completes, signaled or not
    q.ci += nbb;
    return Step::done;
  }
  if (!well_formed) {
    requester_error(q, index, c.opcode, kSyndromeLocalQpOp, nbb,
                    "malformed WQE at index " + std::to_string(index) + " (ctrl index " + std::to_string(c.wqe_index) +
                        ", ds " + std::to_string(c.ds) + ", qpn " + hex(c.qpn) + ")");
    return Step::done;
  }
  for (uint32_t b = 1; b < nbb; ++b)
    mem_read(&img.seg[4 * b], wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, q.ci + b), kSendWqeBB, q.sq_loc);
  sn::SendWr wr;
  uint8_t syn = sn::decode_send_wqe(img, q.dci, &wr);
  const bool signaled = (wr.fm_ce_se & kCtrlCqUpdate) != 0;
  if (syn != 0) {
    requester_error(q, index, c.opcode, syn, nbb, "WQE " + std::to_string(index) + " cannot be decoded (opcode " + hex(c.opcode) + ")");
    return Step::done;
  }
  if (wr.opcode == kOpcodeNop) {
    if (signaled) complete_req(q, index, wr.opcode, 0, 0);
    q.ci += nbb;
    return Step::done;
  }
  std::vector<Span> local;
  syn = local_spans(q, wr, &local);
  if (syn != 0) {
    requester_error(q, index, wr.opcode, syn, nbb, "WQE " + std::to_string(index) + ": a local key does not cover its buffer");
    return Step::done;
  }
  Qp* r = route(q);
  const uint32_t npsn = packets(q, wr);
  const int32_t ahead = r != nullptr ? psn_diff(q.sq_psn, r->rq_psn) : 0;
  if (r == nullptr || !responder_ready(*r) || ahead > 0) {
    // Nobody answers: the transport retries (retry_cnt times, each after the ACK timeout).
    if (!q.retrying) {
      q.retrying = true;
      q.retries_left = q.retry_cnt;
    }
    if (q.retries_left == 0) {
      q.retrying = false;
      requester_error(q, index, wr.opcode, sn::kSyndromeTransportRetryExc, nbb,
                      "no answer from QP " + hex(q.dest_qpn) +
                          (r == nullptr       ? " (no such QP on a reachable device)"
                           : ahead > 0 ? " (PSN " + hex(q.sq_psn) + " is ahead of the " + hex(r->rq_psn) + " it expects)"
                                       : " (not ready to receive)"));
      return Step::done;
    }
    --q.retries_left;
    q.blocked = true;
    q.blocked_until = Clock::now() + retry_wait(q.timeout);
    return Step::blocked;
  }
  q.retrying = false;
  Response res;
  const bool two_sided = wr.opcode == kOpcodeSend || wr.opcode == sn::kOpcodeSendImm;
  if (ahead < 0) {
    // A duplicate: re-acknowledged, not executed again (no receive consumed, no data written).
    if (!two_sided) res = respond_rdma(*r, q, wr, local, true);
    if (res.syndrome == 0) {
      if (sn::opcode_is_atomic(wr.opcode)) copy_spans(local, {Span{reinterpret_cast<uint8_t*>(&res.atomic_old), Loc{}, 8}});
      if (signaled) complete_req(q, index, wr.opcode, 0, static_cast<uint32_t>(wr.length));
      q.sq_psn = (q.sq_psn + npsn) & 0xffffff;
      q.ci += nbb;
      return Step::done;
    }
  } else if (two_sided) {
    res = respond_receive(*r, q, wr, local);
  } else {
    if (wr.opcode == kOpcodeRdmaWriteImm && (r->rq_wqe_cnt == 0 || static_cast<uint16_t>(r->rq_ci) == rq_producer(*r))) {
      res.rnr = true;  // the immediate needs a receive: checked before any data moves
    } else {
      res = respond_rdma(*r, q, wr, local);
      if (res.syndrome == 0 && wr.opcode == kOpcodeRdmaWriteImm) res = respond_receive(*r, q, wr, local);
    }
  }
  if (res.rnr) {
    if (!q.rnr_waiting) {
      q.rnr_waiting = true;
      q.rnr_left = q.rnr_retry;
    }
    if (q.rnr_retry != 7) {  // 7: retry for ever
      if (q.rnr_left == 0) {
        q.rnr_waiting = false;
        requester_error(q, index, wr.opcode, sn::kSyndromeRnrRetryExc, nbb,
                        "QP " + hex(r->qpn) + " had no receive posted for WQE " + std::to_string(index));
        return Step::done;
      }
      --q.rnr_left;
    }
    q.blocked = true;
    q.blocked_until = Clock::now() + rnr_wait(r->min_rnr_timer);
    return Step::blocked;
  }
  q.rnr_waiting = false;
  if (res.syndrome != 0) {
    requester_error(q, index, wr.opcode, res.syndrome, nbb,
                    "QP " + hex(r->qpn) + " rejected WQE " + std::to_string(index) + " (syndrome " + hex(res.syndrome) + ")");
    return Step::done;
  }
  if (sn::opcode_is_atomic(wr.opcode)) copy_spans(local, {Span{reinterpret_cast<uint8_t*>(&res.atomic_old), Loc{}, 8}});
  if (signaled) complete_req(q, index, wr.opcode, 0, static_cast<uint32_t>(wr.length));
  r->rq_psn = (r->rq_psn + npsn) & 0xffffff;
  q.sq_psn = (q.sq_psn + npsn) & 0xffffff;
  q.ci += nbb;
  return Step::done;
}

// Executes the WQEs the doorbells asked for. Returns the number executed.
uint32_t service_send_queue(Qp& q) {
  const int state = q.state.load(std::memory_order_acquire);
  if (state != IBV_QPS_RTS && state != IBV_QPS_ERR) return 0;
  if (q.blocked) {
    if (Clock::now() < q.blocked_until) return 0;
    q.blocked = false;
  }
  uint32_t done = 0;
  while (q.has_rung && idx16_at_or_after(q.rung_to, static_cast<uint16_t>(q.ci))) {
    if (execute_one(q) == Step::blocked) break;
    ++done;
  }
  return done;
}

// A doorbell value `v` was seen for a QP: its send queue runs up to the WQE it names.
void ring(Qp& q, uint16_t last_index) {
  if (!q.has_rung || idx16_at_or_after(last_index, q.rung_to)) {
    q.rung_to = last_index;
    q.has_rung = true;
  }
}

uint32_t watch_doorbells(Registry& reg) {
  uint32_t seen = 0;
  for (Qp* q : reg.qps) {
    if (q->kind != QpKind::verbs) continue;
    const uint64_t v = __atomic_load_n(&q->private_doorbell, __ATOMIC_ACQUIRE);
    if (v == q->last_doorbell) continue;
    q->last_doorbell = v;
    if (doorbell_qpn(v) == q->qpn) {
      ring(*q, doorbell_wqe_index(v));
      ++seen;
    }
  }
  for (Uar* u : reg.uars) {
    if (u->qps.empty()) continue;
    bool changed = false;
    for (int w = 0; w < 2; ++w) {
      const uint64_t v = __atomic_load_n(reinterpret_cast<uint64_t*>(u->page + kUarRegister[w]), __ATOMIC_ACQUIRE);
      if (v == u->last[w]) continue;
      u->last[w] = v;
      changed = true;
      for (Qp* q : u->qps)
        if (q->qpn == doorbell_qpn(v)) ring(*q, doorbell_wqe_index(v));
    }
    if (!changed) continue;
    ++seen;
    // Doorbells of other QPs may have been overwritten on this page: their doorbell records tell.
    for (Qp* q : u->qps) {
      const int s = q->state.load(std::memory_order_acquire);
      if ((s != IBV_QPS_RTS && s != IBV_QPS_ERR) || q->sq.dbrec == nullptr) continue;
      const uint16_t pi = sq_dbrec_pi(mem_load32(&q->sq.dbrec[kSndDbr], q->dbrec_loc));
      if (pi != static_cast<uint16_t>(q->ci)) ring(*q, static_cast<uint16_t>(pi - 1));
    }
  }
  return seen;
}

uint32_t pass() {
  Registry& reg = registry();
  uint32_t work = watch_doorbells(reg);
  for (Qp* q : reg.qps) {
    work += service_send_queue(*q);
    if (q->state.load(std::memory_order_acquire) == IBV_QPS_ERR) flush_receives(*q);
  }
  return work;
}

void run() {
  auto last_work = Clock::now();
  while (!g_stop.load(std::memory_order_relaxed)) {
    uint32_t work = 0;
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      work = pass();
    }
    const auto now = Clock::now();
    if (work != 0) {
      last_work = now;
      continue;
    }
    // Hot for 200 us after the last work (latency), then yield, then sleep: an idle emulated NIC
    // must not eat a core of a two-core CI machine.
    const auto idle = now - last_work;
    if (idle < std::chrono::microseconds(200)) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else if (idle < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

}  // namespace

namespace {
void stop_at_exit() {
  std::thread* t = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    if (!g_running) return;
    g_running = false;
    g_stop.store(true);
    t = g_thread;
    g_thread = nullptr;
  }
  t->join();
  delete t;
}
}  // namespace

void engine_start() {
  if (g_running) return;
  static const bool registered = (std::atexit(stop_at_exit), true);
  (void)registered;
  g_stop.store(false);
  g_thread = new std::thread(run);
  g_running = true;
}

void engine_stop() {
  std::thread* t = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    if (!g_running || registry().open_contexts > 0) return;
    g_running = false;
    g_stop.store(true);
    t = g_thread;
    g_thread = nullptr;
  }
  if (t != nullptr) {
    t->join();
    delete t;
  }
}

void engine_kick() {
  std::lock_guard<std::mutex> lock(registry().mu);
  pass();
}

}  // namespace gicomm::emu
