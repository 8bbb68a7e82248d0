// The engine: one thread per process that plays every emulated NIC of the process.
//
// Each pass (under the registry lock, so objects cannot vanish under it):
//   1. the wire: accept connections, read requests and replies of other processes' engines, answer
//      the requests (the responder half, below) and record the replies' outcomes.
//   2. doorbells: each verbs QP's private register, and both BlueFlame registers of every DEVX UAR
//      page. A ring is a kick: the send queue's doorbell record (written before the doorbell, as
//      rdma-core and NVSHMEM do) says how far the queue is filled, so a doorbell whose own index is
//      the last WQE (rdma-core) or the next free slot (NVSHMEM) rings the same WQEs. Several DEVX
//      QPs may share a UAR page, so one doorbell can overwrite another before the engine reads it;
//      whenever a page's register changes the engine reads the doorbell record of every QP on it.
//   3. each QP in RTS (or ERR: flush) issues the WQEs rung: fetch (as a DMA read would), decode and
//      check with the softnic core, resolve the destination (a QP or DCT of this process, or a node
//      on the wire), deliver; then it completes, in issue order, what has been answered.
//   4. QPs in ERR flush their posted receives.
// A WQE that cannot proceed (receiver not ready, destination silent) sends its QP back to it after
// a timer, with the retry counts of the QP, as the RC transport would; the engine never waits.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "emu.h"
#include "gicomm/mlx5/doorbell.h"
#include "wire.h"

namespace gicomm::emu {

namespace {

using namespace gicomm::mlx5;
namespace sn = gicomm::softnic;

// Heap-held and never destroyed: a process may exit with contexts open (and the engine running);
// the exit handler below stops it then, before CUDA and the C++ runtime tear down.
std::thread* g_thread = nullptr;
std::atomic<bool> g_stop{false};
bool g_running = false;
volatile sig_atomic_t g_dump = 0;  // SIGUSR1: print the engine's state (dump_state)

// The engine thread's current step (EngineActivity) for the SIGUSR1 handler, which may only read
// atomics and write(2): a static description, since when, and the node's number as text.
std::atomic<const char*> g_activity{"not started"};
std::atomic<int64_t> g_activity_since{0};
char g_node_text[16] = "?";
thread_local bool t_engine_thread = false;
// The slowest step of the current pass (engine thread only), for the long-pass warning.
const char* g_pass_slowest = nullptr;
int64_t g_pass_slowest_ns = 0;
constexpr int64_t kLongPassNs = 50'000'000;  // a pass this long makes a requester wait: say why
constexpr int kLongPassWarnings = 20;

int64_t monotonic_ns() {  // async-signal-safe (clock_gettime), the clock steady_clock reads
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

constexpr uint32_t kUarRegister[2] = {0x800, 0x900};  // the two BlueFlame doorbell registers
constexpr uint32_t kInvalidLkey = 0x100;              // MLX5_INVALID_LKEY: end of a receive list
constexpr size_t kMaxInFlight = 256;                  // requests a QP may have unanswered
constexpr uint64_t kMaxInFlightBytes = 16u << 20;
constexpr uint8_t kFenceMask = 0xe0;                  // fm_ce_se: any fence mode (bits 5..7)
// A QP issues for at most this long per pass, so the wire is read often even when every request
// waits on a slow payload read (a CUDA copy while the GPU is busy can take milliseconds).
constexpr auto kIssueSlice = std::chrono::microseconds(500);
Clock::time_point g_wire_read{};  // when serve_wire last read every connection

// Per-attempt cap of the transport retry timer (4.096 us * 2^timeout), so an unreachable peer
// fails in bounded time even with long timeouts (timeout 0, "infinite" in the spec, included).
Clock::duration retry_wait(uint8_t timeout) {
  const uint32_t t = timeout == 0 ? 31 : timeout;
  const double us = 4.096 * static_cast<double>(1ull << std::min<uint32_t>(t, 31));
  const double capped = std::min(us, 250000.0);
  return std::chrono::microseconds(static_cast<int64_t>(capped));
}

// How long a request on the wire may stay unanswered before the requester treats it as lost: the
// ACK timeout, but at least 100 ms (the responder's engine may be copying to GPU memory).
Clock::duration wire_timeout(uint8_t timeout) {
  return std::max<Clock::duration>(retry_wait(timeout), std::chrono::milliseconds(100));
}

// The responder's RNR NAK timer (IB spec encoding of min_rnr_timer).
Clock::duration rnr_wait(uint8_t code) {
  static const uint32_t us[32] = {655360, 10,    20,    30,    40,    60,    80,    120,   160,    240,   320,
                                  480,    640,   960,   1280,  1920,  2560,  3840,  5120,  7680,   10240, 15360,
                                  20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return std::chrono::microseconds(us[code & 31]);
}

std::string op_name(uint8_t op) {
  switch (op) {
    case kOpcodeRdmaWrite: return "an RDMA write";
    case kOpcodeRdmaWriteImm: return "an RDMA write with immediate";
    case kOpcodeRdmaRead: return "an RDMA read";
    case kOpcodeSend: return "a send";
    case sn::kOpcodeSendImm: return "a send with immediate";
    default: return sn::opcode_is_atomic(op) ? "an atomic" : "opcode " + hex(op);
  }
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

// ---- receive queue (own or shared) --------------------------------------------------------------------
struct Receive {
  uint8_t* wqe = nullptr;  // the receive WQE
  Loc loc;
  uint32_t stride = 0;
  uint16_t index = 0;      // what the responder CQE's wqe_counter reports
  uint32_t pdn = 0;        // the PD its buffers must belong to
};

uint16_t rq_producer(const Qp& r) {
  if (r.rq_wqe_cnt == 0) return static_cast<uint16_t>(r.rq_ci);
  return static_cast<uint16_t>(from_be32(mem_load32(&r.sq.dbrec[kRcvDbr], r.dbrec_loc)) & 0xffff);
}

// The next receive WQE the responder would consume, or false (RNR) when none is posted.
bool next_receive(const Qp& r, Receive* out) {
  if (r.srq != nullptr) {
    const Srq& s = *r.srq;
    if (s.wqe_cnt == 0 || __atomic_load_n(&s.dbrec[0], __ATOMIC_ACQUIRE) == s.ci) return false;
    out->wqe = s.buf + size_t(s.ci & (s.wqe_cnt - 1)) * s.stride;
    out->loc = Loc{};
    out->stride = s.stride;
    out->index = static_cast<uint16_t>(s.ci);
    out->pdn = s.pdn;
    return true;
  }
  if (r.rq_wqe_cnt == 0 || static_cast<uint16_t>(r.rq_ci) == rq_producer(r)) return false;
  out->wqe = r.rq_buf + size_t(r.rq_ci & (r.rq_wqe_cnt - 1)) * r.rq_stride;
  out->loc = r.rq_loc;
  out->stride = r.rq_stride;
  out->index = static_cast<uint16_t>(r.rq_ci);
  out->pdn = r.pdn;
  return true;
}

void consume_receive(Qp& r) {
  if (r.srq != nullptr)
    ++r.srq->ci;
  else
    ++r.rq_ci;
}

// A QP in ERR flushes its own posted receives (an SRQ's stay for the other QPs).
void flush_receives(Qp& r) {
  if (r.rq_wqe_cnt == 0 || r.srq != nullptr) return;
  const uint16_t pi = rq_producer(r);
  while (static_cast<uint16_t>(r.rq_ci) != pi) {
    complete_resp_err(r, static_cast<uint16_t>(r.rq_ci), kSyndromeWrFlush);
    ++r.rq_ci;
  }
}

// ---- the responder half (a QP or DCT of this process, for a local or a wire request) ---------------
bool responder_ready(const Qp& r) {
  const int s = r.state.load(std::memory_order_acquire);
  return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE;
}

wire::Reply nak(uint8_t syndrome) {
  wire::Reply rep;
  rep.kind = wire::kNak;
  rep.syndrome = syndrome;
  return rep;
}

// An RDMA write/read/atomic on r's memory. `in` is the write's payload, `out` where a read's data
// goes. A duplicate (a PSN the responder has already executed) is answered without executing it
// again: a write is only acknowledged, a read is read again, an atomic returns the word as it is
// now (a responder keeps the original result; the emulation returns what memory holds).
wire::Reply respond_rdma(Qp& r, const wire::Request& rq, const std::vector<Span>& in, const std::vector<Span>& out,
                         bool duplicate) {
  const uint8_t op = rq.opcode;
  const bool atomic = sn::opcode_is_atomic(op);
  const uint32_t need_qp = op == kOpcodeRdmaRead ? IBV_ACCESS_REMOTE_READ
                           : atomic              ? IBV_ACCESS_REMOTE_ATOMIC
                                                 : IBV_ACCESS_REMOTE_WRITE;
  const uint64_t length = atomic ? rq.atomic_bytes : rq.length;
  const sn::MrEntry* e = nullptr;
  uint8_t syn = sn::check_remote_op(r.nic->tables(), op, rq.raddr, rq.rkey, length, &e);
  if (syn == 0 && length != 0) {
    if ((r.access & need_qp) == 0 || (e != nullptr && r.nic->mr_info(e->key).pdn != r.pdn)) syn = kSyndromeRemoteAccess;
  }
  if (syn != 0) {
    const std::string why = "responder rejected " + op_name(op) + " from QP " + hex(rq.src_qpn) + " (rkey " +
                            hex(rq.rkey) + ", address " + hex(rq.raddr) + ", " + std::to_string(length) + " bytes)";
    if (r.type == QpType::dct)
      note("DCT " + hex(r.qpn) + ": " + why);  // a DC target serves every initiator: it stays ready
    else
      enter_error(r, syn == kSyndromeRemoteAccess ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR, why);
    return nak(syn);
  }
  wire::Reply rep;
  rep.kind = wire::kAck;
  if (length == 0) return rep;
  const MrInfo& info = r.nic->mr_info(e->key);
  uint8_t* remote = reinterpret_cast<uint8_t*>(r.nic->va_of(*e, rq.raddr));
  if (op == kOpcodeRdmaWrite || op == kOpcodeRdmaWriteImm) {
    if (!duplicate) copy_spans({Span{remote, info.loc, length}}, in);
  } else if (op == kOpcodeRdmaRead) {
    copy_spans(out, {Span{remote, info.loc, length}});
  } else if (duplicate) {
    mem_read(&rep.atomic_old, remote, length, info.loc);
  } else {
    rep.atomic_old = mem_atomic(remote, info.loc, rq.atomic());
  }
  return rep;
}

// Consumes r's next receive for a send (scatter `in` into it) or a write with immediate.
wire::Reply respond_receive(Qp& r, const wire::Request& rq, const std::vector<Span>& in) {
  Receive rcv;
  if (!next_receive(r, &rcv)) {
    wire::Reply rep;
    rep.kind = wire::kRnr;
    rep.rnr_timer = r.min_rnr_timer;
    return rep;
  }
  const bool send = rq.opcode == kOpcodeSend || rq.opcode == sn::kOpcodeSendImm;
  const bool with_imm = rq.opcode != kOpcodeSend;
  if (send) {
    // The receive WQE: data segments up to the stride, ended early by MLX5_INVALID_LKEY.
    std::vector<Seg16> segs(rcv.stride / 16);
    mem_read(segs.data(), rcv.wqe, rcv.stride, rcv.loc);
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
      if (e == nullptr || r.nic->mr_info(lkey).pdn != rcv.pdn) {
        local = kSyndromeLocalProt;
        break;
      }
      dst.push_back(Span{reinterpret_cast<uint8_t*>(r.nic->va_of(*e, addr)), r.nic->mr_info(lkey).loc, len});
      room += len;
    }
    if (local == 0 && room < rq.length) local = kSyndromeLocalLength;
    if (local != 0) {
      consume_receive(r);
      complete_resp_err(r, rcv.index, local);
      enter_error(r, -1, "receive WQE " + std::to_string(rcv.index) + " cannot take the send from QP " + hex(rq.src_qpn));
      return nak(local == kSyndromeLocalLength ? kSyndromeRemoteInvalReq : kSyndromeRemoteOp);
    }
    copy_spans(dst, in);
  }
  consume_receive(r);
  const uint8_t cqe_op = !send ? kCqeRespWrImm : with_imm ? sn::kCqeRespSendImm : sn::kCqeRespSend;
  const bool solicited = (rq.fm_ce_se & kCtrlSolicited) != 0;
  complete_resp(r, rcv.index, cqe_op, static_cast<uint32_t>(rq.length), with_imm ? rq.imm_raw : 0, rq.src_qpn, solicited);
  wire::Reply rep;
  rep.kind = wire::kAck;
  return rep;
}

int32_t psn_diff(uint32_t a, uint32_t b) { return static_cast<int32_t>((a - b) << 8) >> 8; }  // 24-bit, signed

// The responder half of one request on QP (or DCT) `r` (nullptr: nobody there). RC requests are
// executed only at the PSN the responder expects: an earlier one is a duplicate (acknowledged, not
// executed again), a later one a sequence error the requester retries. DC targets have no PSN
// state per initiator; they check the access key the DCI presents.
wire::Reply respond(Qp* r, const wire::Request& rq, const std::vector<Span>& in, const std::vector<Span>& out) {
  wire::Reply rep;
  rep.kind = wire::kNoAnswer;
  rep.tag = rq.tag;
  const bool dc = rq.dc != 0;
  if (r == nullptr || !responder_ready(*r) || dc != (r->type == QpType::dct)) return rep;
  Nic& nic = *r->nic;
  if (dc && rq.dc_key != r->dc_key) {
    note("DCT " + hex(r->qpn) + " of " + nic.spec().name + ": DC access key " + hex(rq.dc_key) + " from QP " +
         hex(rq.src_qpn) + " is not its key");
    rep = nak(kSyndromeRemoteAccess);
    rep.tag = rq.tag;
    return rep;
  }
  const int32_t ahead = dc ? 0 : psn_diff(rq.psn, r->rq_psn);
  if (ahead > 0) {
    rep.kind = wire::kSeqErr;
    return rep;
  }
  const uint8_t op = rq.opcode;
  const bool two_sided = op == kOpcodeSend || op == sn::kOpcodeSendImm;
  if (ahead < 0) {
    rep.kind = wire::kAck;  // a duplicate send or write with immediate: nothing consumed again
    if (!two_sided) rep = respond_rdma(*r, rq, in, out, true);
  } else if (two_sided) {
    rep = respond_receive(*r, rq, in);
  } else if (op == kOpcodeRdmaWriteImm) {
    Receive rcv;
    if (!next_receive(*r, &rcv)) {  // the immediate needs a receive: checked before any data moves
      rep.kind = wire::kRnr;
      rep.rnr_timer = r->min_rnr_timer;
    } else {
      rep = respond_rdma(*r, rq, in, out, false);
      if (rep.kind == wire::kAck) rep = respond_receive(*r, rq, in);
    }
  } else {
    rep = respond_rdma(*r, rq, in, out, false);
  }
  if (rep.kind == wire::kAck && !dc && ahead == 0) r->rq_psn = (r->rq_psn + rq.npsn) & 0xffffff;
  rep.tag = rq.tag;
  return rep;
}

// ---- routing --------------------------------------------------------------------------------------
struct Route {
  Qp* local = nullptr;      // a QP or DCT of this process
  bool remote = false;      // on another node: the wire
  uint32_t node = 0;
  std::string why;          // neither: what is missing
};

// Where a request to `dest` (a QP number, or a DCT number for DC) at the address goes.
Route route(bool is_global, const uint8_t* gid, uint16_t lid, uint32_t dest, bool dc) {
  Route rt;
  uint32_t node = 0, index = 0;
  if (!node_of_address(is_global, gid, lid, &node, &index)) {
    rt.why = "the address is no emulated device's";
    return rt;
  }
  if (node != this_node()) {
    rt.remote = true;
    rt.node = node;
    return rt;
  }
  for (const auto& n : registry().nics) {
    if (!n || !spec_matches(n->spec(), is_global, gid, lid)) continue;
    Qp* q = n->qp(dest);
    if (q != nullptr && dc != (q->type == QpType::dct)) q = nullptr;
    if (q == nullptr) rt.why = std::string(dc ? "no DCT " : "no QP ") + hex(dest) + " on " + n->spec().name;
    rt.local = q;
    return rt;
  }
  rt.why = "no open device of this process has the address";
  return rt;
}

// The port a request arrives at counts its packets and bytes (whether or not a QP takes them).
void count_rx(const wire::Request& rq) {
  for (const auto& n : registry().nics)
    if (n && spec_matches(n->spec(), rq.is_global != 0, rq.dgid, rq.dlid)) {
      n->counters().rcv_packets += rq.npsn;
      n->counters().rcv_words += (rq.length + 3) / 4;
      n->counters().dirty = true;
      return;
    }
}

// The device and QP (or DCT) of this process a wire request is for (nullptr: nobody).
Qp* local_target(const wire::Request& rq) {
  for (const auto& n : registry().nics)
    if (n && spec_matches(n->spec(), rq.is_global != 0, rq.dgid, rq.dlid)) {
      Qp* q = n->qp(rq.dest_qpn);
      return q != nullptr && (rq.dc != 0) == (q->type == QpType::dct) ? q : nullptr;
    }
  return nullptr;
}

// ---- requests on the wire ------------------------------------------------------------------------------
// Who issued each request still on the wire (its QP is found again by serial number: a QP destroyed
// meanwhile, or one that reuses its number, does not take the reply).
struct Pending {
  Nic* nic;
  uint32_t qpn;
  uint64_t qp_serial;
  uint32_t epoch;
  int conn;
};
std::unordered_map<uint64_t, Pending> g_pending;
uint64_t g_next_seq = 1;
std::unordered_map<const Qp*, uint64_t> g_serials;
uint64_t g_next_serial = 1;

uint64_t serial_of(const Qp* q) {
  auto it = g_serials.find(q);
  if (it != g_serials.end()) return it->second;
  return g_serials[q] = g_next_serial++;
}

InFlight* find_inflight(Qp& q, uint64_t seq) {
  for (InFlight& f : q.inflight)
    if (f.seq == seq) return &f;
  return nullptr;
}

void record_reply(const wire::Reply& rep, const uint8_t* data, uint64_t data_len) {
  auto it = g_pending.find(rep.tag);
  if (it == g_pending.end()) return;  // abandoned (gone back, reset or destroyed)
  const Pending p = it->second;
  g_pending.erase(it);
  Qp* q = p.nic->qp(p.qpn);
  if (q == nullptr || serial_of(q) != p.qp_serial || q->epoch != p.epoch) return;
  InFlight* f = find_inflight(*q, rep.tag);
  if (f == nullptr) return;
  q->last_reply = Clock::now();
  f->done = true;
  f->kind = rep.kind;
  f->syndrome = rep.syndrome;
  f->rnr_timer = rep.rnr_timer;
  f->atomic_old = rep.atomic_old;
  if (rep.kind == wire::kAck && f->opcode == kOpcodeRdmaRead) f->data.assign(data, data + std::min(data_len, f->length));
}

// A connection went away: its requests will not be answered.
void connection_lost(int conn) {
  for (auto it = g_pending.begin(); it != g_pending.end();) {
    if (it->second.conn != conn) {
      ++it;
      continue;
    }
    wire::Reply rep;
    rep.tag = it->first;
    rep.kind = wire::kNoAnswer;
    ++it;
    record_reply(rep, nullptr, 0);
  }
}

void answer_request(const wire::Message& m) {
  wire::Request rq;
  if (m.body.size() < sizeof rq) return;
  std::memcpy(&rq, m.body.data(), sizeof rq);
  const uint8_t* payload = m.body.data() + sizeof rq;
  const uint64_t payload_len = m.body.size() - sizeof rq;
  const bool reads = rq.opcode == kOpcodeRdmaRead;
  std::vector<uint8_t> data(reads ? rq.length : 0);
  const std::vector<Span> in{Span{const_cast<uint8_t*>(payload), Loc{}, payload_len}};
  const std::vector<Span> out{Span{data.data(), Loc{}, data.size()}};
  Qp* target = local_target(rq);
  wire::Reply rep = respond(target, rq, in, out);
  if (tracing())
    trace("serves " + op_name(rq.opcode) + " of " + std::to_string(rq.length) + " bytes from QP " + hex(rq.src_qpn) +
          " for " + (rq.dc ? "DCT " : "QP ") + hex(rq.dest_qpn) + (target ? "" : " (no such target)") + ": reply " +
          std::to_string(rep.kind) + (rep.syndrome ? ", syndrome " + hex(rep.syndrome) : ""));
  std::vector<Span> back;
  if (rep.kind == wire::kAck && reads) {
    rep.length = data.size();
    back.push_back(out[0]);
  }
  wire::send(m.conn, wire::kReply, &rep, sizeof rep, back);
}

// The sysfs view's counters of a device that moved traffic since they were last written.
void flush_counters(Nic& nic) {
  if (!nic.counters().dirty) return;
  nic.counters().dirty = false;
  sysfs_view_counters(nic);
}

void flush_all_counters() {
  for (const auto& n : registry().nics)
    if (n) flush_counters(*n);
}

uint32_t serve_wire() {
  std::vector<wire::Message> msgs;
  const size_t got = wire::exchange(&msgs);
  g_wire_read = Clock::now();  // every reply that had arrived by now has been seen
  if (got == 0) return 0;
  // Packets are counted as they arrive, before any of them executes: whoever sees the data (or the
  // reply) sees the counters move.
  for (const wire::Message& m : msgs) {
    wire::Request rq;
    if (m.type != wire::kRequest || m.body.size() < sizeof rq) continue;
    std::memcpy(&rq, m.body.data(), sizeof rq);
    count_rx(rq);
  }
  flush_all_counters();
  for (const wire::Message& m : msgs) {
    if (m.type == wire::kRequest) {
      answer_request(m);
    } else if (m.type == wire::kReply && m.body.size() >= sizeof(wire::Reply)) {
      wire::Reply rep;
      std::memcpy(&rep, m.body.data(), sizeof rep);
      record_reply(rep, m.body.data() + sizeof rep, m.body.size() - sizeof rep);
    } else if (m.type == wire::kClosed) {
      connection_lost(m.conn);
    }
  }
  flush_all_counters();
  return static_cast<uint32_t>(msgs.size());
}

// ---- requester -------------------------------------------------------------------------------------
// Fault injection for tests, GICOMM_EMU_TEST_SLOW_SEND_US: every request to another node takes
// this much longer to send, as its payload read does when it is a CUDA copy under a busy GPU.
int64_t slow_send_us() {
  static const int64_t us = [] {
    const char* v = std::getenv("GICOMM_EMU_TEST_SLOW_SEND_US");
    return v != nullptr ? std::strtoll(v, nullptr, 10) : 0LL;
  }();
  return us;
}

// Every request takes as many PSNs as it has packets at the path MTU (a read, as many as its
// response; an atomic, one).
uint32_t packets(const Qp& q, const sn::SendWr& wr) {
  if (sn::opcode_is_atomic(wr.opcode)) return 1;
  const uint64_t mtu = q.path_mtu ? (uint64_t(128) << q.path_mtu) : 4096;
  return static_cast<uint32_t>(std::max<uint64_t>(1, (wr.length + mtu - 1) / mtu));
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

// Completes the WQE an entry stands for: error CQE (always, as a ConnectX does) or, when
// signaled, a good one.
void complete_entry(Qp& q, const InFlight& f, uint8_t syndrome) {
  if (syndrome != 0 || f.signaled) complete_req(q, f.index, f.opcode, syndrome, static_cast<uint32_t>(f.length));
}

// Abandons every unanswered request (their replies, if any, are ignored).
void abandon_inflight(Qp& q) {
  for (const InFlight& f : q.inflight) g_pending.erase(f.seq);
  q.inflight.clear();
  ++q.epoch;
}

// The QP fails at its oldest request: error CQE, ERR, and every later request flushed.
void fail_front(Qp& q, uint8_t syndrome, const std::string& why) {
  const InFlight front = q.inflight.front();
  complete_entry(q, front, syndrome);
  q.inflight.pop_front();
  for (const InFlight& f : q.inflight) complete_entry(q, f, kSyndromeWrFlush);
  abandon_inflight(q);
  enter_error(q, -1, why);
}

// The oldest request was not taken: the QP goes back to it (every later one is abandoned too, as
// go-back-N retransmission does) and tries again after `wait`, or fails when its retries are spent.
void go_back(Qp& q, bool rnr, uint8_t rnr_timer, const std::string& who) {
  const InFlight& front = q.inflight.front();
  if (rnr) {
    if (!q.rnr_waiting) {
      q.rnr_waiting = true;
      q.rnr_left = q.rnr_retry;
    }
    if (q.rnr_retry != 7) {  // 7: retry for ever
      if (q.rnr_left == 0) {
        q.rnr_waiting = false;
        fail_front(q, sn::kSyndromeRnrRetryExc,
                   who + " had no receive posted for WQE " + std::to_string(front.index) + " (RNR retries spent)");
        return;
      }
      --q.rnr_left;
    }
  } else {
    if (!q.retrying) {
      q.retrying = true;
      q.retries_left = q.retry_cnt;
    }
    if (q.retries_left == 0) {
      q.retrying = false;
      fail_front(q, sn::kSyndromeTransportRetryExc, "no answer from " + who + " (transport retries spent)");
      return;
    }
    --q.retries_left;
  }
  q.ci = front.ci;
  q.sq_psn = front.psn;
  abandon_inflight(q);
  q.blocked = true;
  q.blocked_until = Clock::now() + (rnr ? rnr_wait(rnr_timer) : retry_wait(q.timeout));
}

// Completes, in issue order, the requests that have been answered. Returns how many.
uint32_t drain(Qp& q) {
  uint32_t n = 0;
  if (!q.inflight.empty() && q.inflight.front().done) flush_counters(*q.nic);  // counts before completions
  while (!q.inflight.empty()) {
    InFlight& f = q.inflight.front();
    if (!f.done) {
      // The transport timer restarts whenever the peer answers (as an ACK restarts it): a slow
      // but live responder working through a backlog is not a lost request. It runs up to the
      // last time this engine read the wire, not up to now: a reply that has arrived but was not
      // read yet (this engine was busy issuing) is not a lost one.
      if (g_wire_read - std::max(f.sent, q.last_reply) < wire_timeout(q.timeout)) break;
      f.done = true;
      f.kind = wire::kNoAnswer;
      f.peer += " (no reply in time)";
    }
    ++n;
    if (tracing())
      trace(q.nic->spec().name + " QP " + hex(q.qpn) + " WQE " + std::to_string(f.index) + " (" + op_name(f.opcode) +
            ") answered: " + std::to_string(f.kind) + " (0 ack, 1 nak, 2 rnr, 3 sequence, 4 none)" +
            (f.syndrome ? ", syndrome " + hex(f.syndrome) : "") + (f.signaled ? ", CQE" : ""));
    if (f.kind == wire::kAck) {
      if (f.opcode == kOpcodeRdmaRead && !f.data_placed)
        copy_spans(f.scatter, {Span{f.data.data(), Loc{}, f.data.size()}});
      if (f.atomic_bytes == 4) {
        // A 4-byte atomic returns its old value in network byte order (8-byte ones in the host's,
        // the endianness mode QUERY_HCA_CAP reports), as a ConnectX does.
        uint32_t be = to_be32(static_cast<uint32_t>(f.atomic_old));
        copy_spans(f.scatter, {Span{reinterpret_cast<uint8_t*>(&be), Loc{}, 4}});
      } else if (f.atomic_bytes == 8) {
        copy_spans(f.scatter, {Span{reinterpret_cast<uint8_t*>(&f.atomic_old), Loc{}, 8}});
      }
      complete_entry(q, f, 0);
      q.retrying = q.rnr_waiting = false;
      q.inflight.pop_front();
    } else if (f.kind == wire::kNak) {
      fail_front(q, f.syndrome, f.peer + " rejected WQE " + std::to_string(f.index) + " (syndrome " + hex(f.syndrome) + ")");
      break;
    } else {
      go_back(q, f.kind == wire::kRnr, f.rnr_timer, f.peer);
      break;
    }
  }
  return n;
}

// A fetched WQE of up to 16 WQEBBs (the largest an mlx5 send queue takes).
struct LargeWqe {
  Seg16 seg[64];
};

// Fails the WQE at q.ci without a request: error CQE, QP to ERR.
void requester_error(Qp& q, uint16_t index, uint8_t opcode, uint8_t syndrome, uint32_t nbb, const std::string& why) {
  complete_req(q, index, opcode, syndrome, 0);
  q.ci += nbb;
  enter_error(q, -1, why);
}

enum class Step { issued, stop };

// Issues the WQE at q.ci. `stop` when the QP can do nothing more this pass (in-flight limit, a
// fence or a destination in this process waiting for older requests, a retry timer).
Step issue_one(Qp& q) {
  if (q.inflight.size() >= kMaxInFlight) return Step::stop;
  LargeWqe img;
  const uint16_t index = static_cast<uint16_t>(q.ci);
  mem_read(&img.seg[0], wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, q.ci), kSendWqeBB, q.sq_loc);
  CtrlFields c = decode_ctrl(img.seg[0]);
  // A ctrl segment with an older index: the doorbell overtook the WQE stores. Re-read a few times.
  for (int tries = 0; c.wqe_index != index && tries < sn::kStaleRetries; ++tries) {
    std::atomic_thread_fence(std::memory_order_acquire);
    mem_read(&img.seg[0], wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, q.ci), kSendWqeBB, q.sq_loc);
    c = decode_ctrl(img.seg[0]);
  }
  const bool well_formed = c.wqe_index == index && c.ds != 0 && c.ds <= sn::kMaxDsLarge && c.qpn == q.qpn;
  const uint32_t nbb = well_formed ? wqebbs_of_ds(c.ds) : 1;
  const bool quiet = q.inflight.empty();  // nothing older to complete first
  if (q.state.load() == IBV_QPS_ERR) {
    if (!quiet) return Step::stop;
    complete_req(q, index, c.opcode, kSyndromeWrFlush, 0);  // every WQE completes, signaled or not
    q.ci += nbb;
    return Step::issued;
  }
  if (!well_formed) {
    if (!quiet) return Step::stop;
    requester_error(q, index, c.opcode, kSyndromeLocalQpOp, nbb,
                    "malformed WQE at index " + std::to_string(index) + " (ctrl index " + std::to_string(c.wqe_index) +
                        ", ds " + std::to_string(c.ds) + ", qpn " + hex(c.qpn) + ")");
    return Step::issued;
  }
  for (uint32_t b = 1; b < nbb; ++b)
    mem_read(&img.seg[4 * b], wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, q.ci + b), kSendWqeBB, q.sq_loc);
  sn::SendWr wr;
  uint8_t syn = sn::decode_send_wqe(img.seg, sn::kMaxDsLarge, q.dci, &wr);
  if (syn != 0) {
    if (!quiet) return Step::stop;
    requester_error(q, index, c.opcode, syn, nbb,
                    "WQE " + std::to_string(index) + " cannot be decoded (opcode " + hex(c.opcode) + ", opmod " +
                        hex(c.opmod) + ", ds " + std::to_string(c.ds) + ")");
    return Step::issued;
  }
  if ((wr.fm_ce_se & kFenceMask) != 0 && !quiet) return Step::stop;  // a fence waits for everything older
  std::vector<Span> local;
  syn = local_spans(q, wr, &local);
  if (syn != 0) {
    if (!quiet) return Step::stop;
    requester_error(q, index, wr.opcode, syn, nbb, "WQE " + std::to_string(index) + ": a local key does not cover its buffer");
    return Step::issued;
  }
  InFlight f;
  f.seq = g_next_seq++;
  f.ci = q.ci;
  f.nbb = nbb;
  f.index = index;
  f.opcode = wr.opcode;
  f.signaled = (wr.fm_ce_se & kCtrlCqUpdate) != 0;
  f.length = wr.length;
  f.sent = Clock::now();
  if (wr.opcode == kOpcodeNop || wr.opcode == sn::kOpcodeDump) {
    // No packet: a NOP completes, a DUMP has read its local buffer (checked above); in order.
    f.done = true;
    f.kind = wire::kAck;
    f.length = 0;
    q.inflight.push_back(std::move(f));
    q.ci += nbb;
    return Step::issued;
  }
  const bool atomic = sn::opcode_is_atomic(wr.opcode);
  const bool scatter = atomic || wr.opcode == kOpcodeRdmaRead;
  if (atomic) f.atomic_bytes = wr.atomic.bytes;
  if (scatter) f.scatter = local;
  f.npsn = packets(q, wr);
  f.psn = q.sq_psn;
  // The request, as the responder sees it.
  wire::Request rq;
  rq.tag = f.seq;
  rq.dc = q.dci ? 1 : 0;
  if (q.dci) {
    rq.is_global = wr.grh ? 1 : 0;
    rq.dlid = wr.rlid;
    std::memcpy(rq.dgid, wr.rgid, 16);
    rq.dest_qpn = wr.dct_number;
    rq.dc_key = wr.dc_key;
  } else {
    rq.is_global = q.ah.is_global;
    rq.dlid = q.ah.dlid;
    std::memcpy(rq.dgid, q.ah.grh.dgid.raw, 16);
    rq.dest_qpn = q.dest_qpn;
  }
  rq.src_qpn = q.qpn;
  rq.psn = f.psn;
  rq.npsn = f.npsn;
  rq.opcode = wr.opcode;
  rq.opmod = wr.opmod;
  rq.fm_ce_se = wr.fm_ce_se;
  rq.imm_raw = wr.imm_raw;
  rq.rkey = wr.rkey;
  rq.raddr = wr.raddr;
  rq.length = wr.length;
  if (atomic) rq.set_atomic(wr.atomic);
  const Route rt = route(rq.is_global != 0, rq.dgid, rq.dlid, rq.dest_qpn, q.dci);
  if (tracing())
    trace(q.nic->spec().name + " QP " + hex(q.qpn) + " issues WQE " + std::to_string(index) + ": " + op_name(wr.opcode) +
          " opmod " + hex(wr.opmod) + ", " + std::to_string(wr.length) + " bytes to " + (q.dci ? "DCT " : "QP ") +
          hex(rq.dest_qpn) + (rt.remote ? " on host " + std::to_string(rt.node) : rt.local ? " here" : " (nobody: " + rt.why + ")") +
          ", raddr " + hex(rq.raddr) + " rkey " + hex(rq.rkey) + ", psn " + hex(rq.psn));
  const std::string dest = std::string(q.dci ? "DCT " : "QP ") + hex(rq.dest_qpn);
  const bool carries_payload = !scatter && wr.opcode != kOpcodeRdmaRead;
  if (rt.remote) {
    uint64_t queued = 0;
    for (const InFlight& o : q.inflight) queued += o.length;
    if (queued + wr.length > kMaxInFlightBytes && !quiet) return Step::stop;
  } else if (!quiet) {
    return Step::stop;  // in this process: delivered at once, after everything older has completed
  }
  q.nic->counters().xmit_packets += f.npsn;
  q.nic->counters().xmit_words += (wr.length + 3) / 4;
  q.nic->counters().dirty = true;
  if (!rt.remote) {
    count_rx(rq);  // a port of this process receives it now
    flush_all_counters();
  }
  if (rt.remote) {
    std::string why;
    const int conn = wire::connect_node(rt.node, &why);
    f.peer = dest + " on emulated host " + std::to_string(rt.node);
    EngineActivity sending("sending a request (its payload read from local memory)");
    if (const int64_t us = slow_send_us(); us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
    if (conn < 0 ||
        !wire::send(conn, wire::kRequest, &rq, sizeof rq, carries_payload ? local : std::vector<Span>{})) {
      // Nobody listens: the request is lost (the requester's timer will fire).
      if (conn < 0) note("wire: " + why);
      f.done = true;
      f.kind = wire::kNoAnswer;
    } else {
      g_pending[f.seq] = Pending{q.nic, q.qpn, serial_of(&q), q.epoch, conn};
    }
  } else {
    f.peer = dest + (rt.local != nullptr ? " of " + rt.local->nic->spec().name : " (" + rt.why + ")");
    const wire::Reply rep = respond(rt.local, rq, carries_payload ? local : std::vector<Span>{},
                                    wr.opcode == kOpcodeRdmaRead ? local : std::vector<Span>{});
    f.done = true;
    f.data_placed = true;
    f.kind = rep.kind;
    f.syndrome = rep.syndrome;
    f.rnr_timer = rep.rnr_timer;
    f.atomic_old = rep.atomic_old;
  }
  q.inflight.push_back(std::move(f));
  q.sq_psn = (q.sq_psn + q.inflight.back().npsn) & 0xffffff;
  q.ci += nbb;
  return Step::issued;
}

// Issues the WQEs the doorbells asked for and completes what has been answered. Returns the work
// done.
uint32_t service_send_queue(Qp& q) {
  const int state = q.state.load(std::memory_order_acquire);
  if (state != IBV_QPS_RTS && state != IBV_QPS_ERR) return 0;
  uint32_t work = drain(q);
  if (q.blocked) {
    if (Clock::now() < q.blocked_until) return work;
    q.blocked = false;
  }
  const auto slice_end = Clock::now() + kIssueSlice;
  while (q.has_rung && idx16_at_or_after(q.rung_to, static_cast<uint16_t>(q.ci))) {
    if (issue_one(q) == Step::stop) break;
    ++work;
    work += drain(q);
    if (q.blocked || Clock::now() >= slice_end) break;  // the rest next pass, after the wire
  }
  return work;
}

// The send queue of `q` is filled up to its doorbell record: run it up to there.
void ring_to_dbrec(Qp& q) {
  if (q.sq.dbrec == nullptr) return;
  const uint16_t pi = sq_dbrec_pi(mem_load32(&q.sq.dbrec[kSndDbr], q.dbrec_loc));
  if (pi == static_cast<uint16_t>(q.ci)) return;
  const uint16_t last = static_cast<uint16_t>(pi - 1);
  if (!q.has_rung || idx16_at_or_after(last, q.rung_to)) {
    q.rung_to = last;
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
      const uint16_t last = doorbell_wqe_index(v);  // the provider rings with its last WQE
      if (!q->has_rung || idx16_at_or_after(last, q->rung_to)) {
        q->rung_to = last;
        q->has_rung = true;
      }
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
    }
    if (!changed) continue;
    ++seen;
    for (Qp* q : u->qps) {
      const int s = q->state.load(std::memory_order_acquire);
      if (s == IBV_QPS_RTS || s == IBV_QPS_ERR) ring_to_dbrec(*q);
      if (tracing())
        trace("doorbell on UAR page " + hex(u->page_id) + " (" + hex(u->last[0]) + "): QP " + hex(q->qpn) + " state " +
              std::to_string(s) + ", runs to WQE " + std::to_string(q->rung_to) + " from " +
              std::to_string(static_cast<uint16_t>(q->ci)));
    }
  }
  return seen;
}

// The engine's view of every QP and CQ (SIGUSR1): what a hung run was waiting for.
void dump_state(Registry& reg) {
  std::fprintf(stderr, "gicomm-emu[%u]: engine state (SIGUSR1): %zu QPs, %zu CQs, %zu SRQs\n", this_node(), reg.qps.size(),
               reg.cqs.size(), reg.srqs.size());
  for (Qp* q : reg.qps) {
    std::string line = q->nic->spec().name + " QP " + hex(q->qpn) + " " +
                       (q->type == QpType::dct ? "DCT" : q->type == QpType::dci ? "DCI" : "RC") + " state " +
                       std::to_string(q->state.load()) + (q->kind == QpKind::devx ? " devx" : " verbs");
    if (q->type != QpType::dct) {
      line += ", next WQEBB " + std::to_string(q->ci) + ", rung to " + (q->has_rung ? std::to_string(q->rung_to) : "-");
      if (q->sq.dbrec != nullptr)
        line += ", dbrec " + std::to_string(sq_dbrec_pi(mem_load32(&q->sq.dbrec[kSndDbr], q->dbrec_loc)));
      line += ", in flight " + std::to_string(q->inflight.size());
      if (!q->inflight.empty())
        line += " (oldest WQE " + std::to_string(q->inflight.front().index) + (q->inflight.front().done ? " answered" : " waiting") + ")";
      line += ", sq_psn " + hex(q->sq_psn) + (q->blocked ? ", blocked on a timer" : "");
      if (q->send_cq) line += ", send CQ " + hex(q->send_cq->cqn) + " pi " + std::to_string(q->send_cq->pi);
    }
    line += ", rq_psn " + hex(q->rq_psn);
    std::fprintf(stderr, "gicomm-emu[%u]:   %s\n", this_node(), line.c_str());
  }
  std::fprintf(stderr, "gicomm-emu[%u]:   wire: %zu requests unanswered, output %s\n", this_node(), g_pending.size(),
               wire::busy() ? "queued" : "empty");
}

// Appends decimal v to buf at *n (signal handler: no stdio).
void put_number(char* buf, size_t* n, size_t cap, int64_t v) {
  char digits[24];
  size_t k = 0;
  uint64_t u = v < 0 ? 0 : static_cast<uint64_t>(v);
  do {
    digits[k++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0 && k < sizeof digits);
  while (k > 0 && *n < cap) buf[(*n)++] = digits[--k];
}

void put_text(char* buf, size_t* n, size_t cap, const char* t) {
  while (*t != '\0' && *n < cap) buf[(*n)++] = *t++;
}

// SIGUSR1: the state dump comes from the engine thread at its next pass; the line written here
// comes at once, so an engine stuck inside a step (a CUDA copy, a lock) still says which.
void on_usr1(int) {
  g_dump = 1;
  const int saved = errno;
  char line[256];
  size_t n = 0;
  put_text(line, &n, sizeof line, "gicomm-emu[");
  put_text(line, &n, sizeof line, g_node_text);
  put_text(line, &n, sizeof line, "]: engine thread: ");
  put_text(line, &n, sizeof line, g_activity.load(std::memory_order_relaxed));
  put_text(line, &n, sizeof line, " for ");
  put_number(line, &n, sizeof line, (monotonic_ns() - g_activity_since.load(std::memory_order_relaxed)) / 1000);
  put_text(line, &n, sizeof line, " us\n");
  ssize_t ignored = write(STDERR_FILENO, line, n);
  (void)ignored;
  errno = saved;
}

uint32_t pass() {
  Registry& reg = registry();
  uint32_t work = 0;
  {
    EngineActivity a("serving the wire (requests and replies)");
    work += serve_wire();
  }
  {
    EngineActivity a("watching doorbells");
    work += watch_doorbells(reg);
  }
  for (Qp* q : reg.qps) {
    if (q->type == QpType::dct) continue;
    EngineActivity a("executing a send queue's WQEs");
    work += service_send_queue(*q);
    if (q->state.load(std::memory_order_acquire) == IBV_QPS_ERR) flush_receives(*q);
  }
  if (wire::busy()) ++work;  // output still queued: keep exchanging
  if (work != 0) flush_all_counters();
  return work;
}

void run() {
  t_engine_thread = true;
  g_activity.store("idle between passes");
  g_activity_since.store(monotonic_ns());
  auto last_work = Clock::now();
  int long_passes = 0;
  while (!g_stop.load(std::memory_order_relaxed)) {
    uint32_t work = 0;
    const int64_t t0 = monotonic_ns();
    int64_t t_locked = t0;
    {
      std::unique_lock<std::mutex> lock(registry().mu, std::defer_lock);
      {
        EngineActivity waiting("waiting for the registry lock (a verbs call holds it)");
        lock.lock();
      }
      t_locked = monotonic_ns();
      EngineActivity in_pass("a pass over the wire, doorbells and send queues");
      g_pass_slowest = nullptr;
      g_pass_slowest_ns = 0;
      work = pass();
      if (g_dump) {
        g_dump = 0;
        dump_state(registry());
      }
    }
    const int64_t t1 = monotonic_ns();
    if (t1 - t0 >= kLongPassNs && long_passes < kLongPassWarnings) {
      ++long_passes;
      warn("engine pass took " + std::to_string((t1 - t0) / 1000000) + " ms (" +
           std::to_string((t_locked - t0) / 1000000) + " ms waiting for the registry lock; slowest step: " +
           (g_pass_slowest ? std::string(g_pass_slowest) + ", " + std::to_string(g_pass_slowest_ns / 1000000) + " ms"
                           : std::string("none timed")) +
           "): requests to this node wait that long for an answer" +
           (long_passes == kLongPassWarnings ? " (last such warning)" : ""));
    }
    const auto now = Clock::now();
    if (work != 0) {
      last_work = now;
      continue;
    }
    // Hot for 200 us after the last work (latency), then yield, then wait for the wire (or 50 us):
    // an idle emulated NIC must not eat a core of a two-core CI machine.
    const auto idle = now - last_work;
    if (idle < std::chrono::microseconds(200)) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else if (idle < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      wire::wait(50);
    }
  }
}

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

thread_local EngineActivity* EngineActivity::t_current = nullptr;

EngineActivity::EngineActivity(const char* what) : engine_(t_engine_thread) {
  if (!engine_) return;
  prev_ = g_activity.load(std::memory_order_relaxed);
  since_ns_ = monotonic_ns();
  children_ns_ = 0;
  parent_ = t_current;
  t_current = this;
  g_activity_since.store(since_ns_, std::memory_order_relaxed);
  g_activity.store(what, std::memory_order_relaxed);
}

EngineActivity::~EngineActivity() {
  if (!engine_) return;
  const int64_t now = monotonic_ns();
  const int64_t took = now - since_ns_;
  // The slowest step is the one whose own time (without its inner steps) is longest, so a pass
  // names the CUDA copy or lock inside it, not the loop around them. The pass itself is no step.
  if (parent_ != nullptr && took - children_ns_ > g_pass_slowest_ns) {
    g_pass_slowest_ns = took - children_ns_;
    g_pass_slowest = g_activity.load(std::memory_order_relaxed);
  }
  if (parent_ != nullptr) parent_->children_ns_ += took;
  t_current = parent_;
  g_activity.store(prev_, std::memory_order_relaxed);
  g_activity_since.store(now, std::memory_order_relaxed);
}

void abandon_requests(Qp& q, bool flush) {
  if (flush)
    for (const InFlight& f : q.inflight) complete_entry(q, f, kSyndromeWrFlush);
  abandon_inflight(q);
}

void forget_qp(Qp& q) {
  abandon_inflight(q);
  g_serials.erase(&q);
}

void engine_start() {
  if (g_running) return;
  static const bool registered = [] {
    std::atexit(stop_at_exit);
    // SIGUSR1 dumps the engine's state, unless the program handles the signal itself.
    struct sigaction old {};
    if (sigaction(SIGUSR1, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) {
      struct sigaction sa {};
      sa.sa_handler = on_usr1;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      sigaction(SIGUSR1, &sa, nullptr);
    }
    return true;
  }();
  (void)registered;
  g_stop.store(false);
  std::snprintf(g_node_text, sizeof g_node_text, "%u", this_node());
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
