// DEVX: PRM commands parsed at the mlx5_ifc.h bit offsets (gicomm/mlx5dev/prm.h, the same table the
// DEVX backend writes with) and executed on the emulated device.
//
// Outcomes follow the kernel and the device:
//   - the kernel refuses what it does not pass to the device: a command that is not an object
//     create/modify/query for the object (EINVAL), a mailbox shorter than a command header (EINVAL);
//   - the device answers everything else in the output mailbox: status 0, or a PRM status (BAD_OP
//     for an opcode the emulation does not implement, BAD_PARAM for a field it cannot honour,
//     BAD_QP_STATE for a transition from the wrong state, BAD_INP_LEN/BAD_OUTP_LEN for short
//     mailboxes) with a syndrome, and the call fails with EREMOTEIO, as the kernel reports a
//     firmware error. Real syndromes are firmware-internal; the emulation's are (opcode << 16) | a
//     reason number listed in docs/emulated-rdma-core.md.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "emu.h"
#include "gicomm/mlx5dev/prm.h"

namespace gicomm::emu {

namespace prm = gicomm::mlx5dev::prm;

enum class DevxType { cq, qp, dct };

struct DevxObj {
  DevxType type;
  Context* ctx = nullptr;
  Cq* cq = nullptr;
  Qp* qp = nullptr;
};

namespace {

std::vector<DevxObj*>& objects() {
  static auto* v = new std::vector<DevxObj*>;
  return *v;
}

// Reasons (the low 16 bits of the emulation's syndromes).
enum Reason : uint32_t {
  kNotImplemented = 1,
  kInputTooShort = 2,
  kOutputTooShort = 3,
  kBadUmem = 4,
  kBadUar = 5,
  kBadCq = 6,
  kBadPd = 7,
  kBadSize = 8,
  kBadField = 9,
  kWrongState = 10,
  kBadPort = 11,
  kBadEqn = 12,
  kBadCapType = 13,
  kNeedsUmem = 14,
  kNoRoute = 15,
  kBadSrq = 16,
};

struct Cmd {
  const void* in;
  size_t inlen;
  void* out;
  size_t outlen;
  uint32_t opcode;
  const char* call;
  std::string object;
};

// The device's answer: status and syndrome in the output mailbox, EREMOTEIO to the caller.
int device_error(const Cmd& c, uint32_t status, Reason reason, const std::string& why) {
  const uint32_t syndrome = (c.opcode << 16) | reason;
  if (c.outlen >= 8) {
    std::memset(c.out, 0, std::min<size_t>(c.outlen, 16));
    prm::set(c.out, prm::create_qp_out::status, status);
    prm::set(c.out, prm::create_qp_out::syndrome, syndrome);
  }
  fail(EREMOTEIO, c.call, c.object,
       why + " (PRM status " + hex(status) + ", syndrome " + hex(syndrome) + ", opcode " + hex(c.opcode) + ")");
  return EREMOTEIO;
}

int ok(const Cmd& c) {
  std::memset(c.out, 0, std::min<size_t>(c.outlen, 16));
  return 0;
}

// Mailbox sizes the device checks before it parses a command.
int check_lengths(const Cmd& c, uint32_t in_bits, uint32_t out_bits) {
  if (c.inlen < prm::bytes_of(in_bits))
    return device_error(c, prm::kStatusBadInputLen, kInputTooShort,
                        "input mailbox of " + std::to_string(c.inlen) + " bytes, the command needs " + std::to_string(prm::bytes_of(in_bits)));
  if (c.outlen < prm::bytes_of(out_bits))
    return device_error(c, prm::kStatusBadOutputLen, kOutputTooShort,
                        "output mailbox of " + std::to_string(c.outlen) + " bytes, the command needs " + std::to_string(prm::bytes_of(out_bits)));
  return 0;
}

Umem* find_umem(Context* ctx, uint32_t id) {
  for (Umem* u : ctx->umems)
    if (u->id == id) return u;
  return nullptr;
}
Uar* find_uar(Context* ctx, uint32_t page_id) {
  for (Uar* u : ctx->uars)
    if (u->page_id == page_id) return u;
  return nullptr;
}
Cq* find_cq(Nic* nic, uint32_t cqn) {
  for (Cq* c : registry().cqs)
    if (c->nic == nic && c->cqn == cqn) return c;
  return nullptr;
}

// The bytes [offset, offset + n) of a umem, or nullptr when they are not inside it.
uint8_t* umem_range(const Umem* u, uint64_t offset, uint64_t n) {
  if (offset > u->size || n > u->size - offset) return nullptr;
  return u->addr + offset;
}

// ---- QUERY_HCA_CAP -------------------------------------------------------------------------------
int query_hca_cap(Context* ctx, const Cmd& c) {
  if (int e = check_lengths(c, prm::kShortInBits, prm::kQueryHcaCapOutBits)) return e;
  const uint32_t op_mod = prm::get(c.in, prm::query_hca_cap_in::op_mod);
  const uint32_t type = op_mod >> 1;
  ok(c);
  const DeviceSpec& s = ctx->nic->spec();
  const uint32_t cap = prm::query_hca_cap_out::capability.off;
  uint8_t* out = static_cast<uint8_t*>(c.out);
  std::memset(out + cap / 8, 0, prm::bytes_of(prm::query_hca_cap_out::capability.bits));
  auto put = [&](prm::Field f, uint32_t v) { prm::set(c.out, f.at(cap), v); };
  if (type == prm::kCapOpModGeneral) {
    namespace g = prm::cmd_hca_cap;
    put(g::vhca_id, s.index);
    put(g::log_max_srq_sz, 0);
    put(g::log_max_qp_sz, 15);
    put(g::log_max_qp, 14);
    put(g::log_max_srq, 0);
    put(g::log_max_cq_sz, 22);
    put(g::log_max_cq, 16);
    put(g::log_max_mkey, 16);
    put(g::log_max_ra_req_dc, 4);
    put(g::log_max_ra_res_dc, 4);
    put(g::log_max_ra_req_qp, 4);
    put(g::log_max_ra_res_qp, 4);
    put(g::port_type, s.roce ? prm::kPortTypeEth : prm::kPortTypeIb);
    put(g::num_ports, 1);
    put(g::log_max_msg, 30);
    put(g::cqe_version, 1);
    put(g::compact_address_vector, 1);  // a DCI may carry the 16-byte address vector (IB)
    put(g::dct, 1);
    put(g::roce, s.roce ? 1 : 0);
    put(g::atomic, 1);
    put(g::uar_4k, 1);
    put(g::uar_sz, 0);  // log2 of the UAR size in 4 KiB pages
    put(g::log_pg_sz, 12);
    put(g::bf, 1);
    put(g::log_bf_reg_size, 8);  // 256-byte BlueFlame registers (two per page, at 0x800 and 0x900)
    put(g::max_wqe_sz_sq, 256);
    put(g::max_wqe_sz_rq, 256);
    put(g::max_wqe_sz_sq_dc, 256);
    put(g::log_max_pd, 20);
    put(g::sq_ts_format, 2);  // MLX5_TIMESTAMP_FORMAT_CAP_FREE_RUNNING_AND_REAL_TIME
    put(g::rq_ts_format, 2);
    return 0;
  }
  if (type == prm::kCapOpModAtomic) {
    namespace a = prm::atomic_caps;
    put(a::atomic_req_8B_endianness_mode, 1);  // host byte order, what the engine does
    put(a::supported_atomic_req_8B_endianness_mode_1, 1);
    put(a::atomic_operations, prm::kAtomicOpCompareSwap | prm::kAtomicOpFetchAdd | prm::kAtomicOpMaskedCompareSwap |
                                  prm::kAtomicOpMaskedFetchAdd);
    put(a::atomic_size_qp, prm::kAtomicSizeQp4 | prm::kAtomicSizeQp8);
    put(a::atomic_size_dc, prm::kAtomicSizeDc4 | prm::kAtomicSizeDc8);
    return 0;
  }
  return device_error(c, prm::kStatusBadParam, kBadCapType,
                      "capability type " + std::to_string(type) + " is not emulated (general 0, atomic 3)");
}

// ---- CREATE_CQ -------------------------------------------------------------------------------------
int create_cq(Context* ctx, const Cmd& c, DevxObj** made) {
  if (int e = check_lengths(c, prm::kCqCmdInBits, prm::kHdrOutBits)) return e;
  const uint32_t cqc = prm::create_cq_in::cq_context.off;
  auto in = [&](prm::Field f) { return prm::get(c.in, f.at(cqc)); };
  if (!prm::get(c.in, prm::create_cq_in::cq_umem_valid))
    return device_error(c, prm::kStatusBadParam, kNeedsUmem, "the CQ buffer must be a umem (cq_umem_valid)");
  Umem* buf_umem = find_umem(ctx, prm::get(c.in, prm::create_cq_in::cq_umem_id));
  if (buf_umem == nullptr) return device_error(c, prm::kStatusBadParam, kBadUmem, "cq_umem_id names no umem of this context");
  if (in(prm::cqc::cqe_sz) != 0) return device_error(c, prm::kStatusBadParam, kBadField, "only 64-byte CQEs (cqe_sz 0) are emulated");
  const uint32_t log_size = in(prm::cqc::log_cq_size);
  if (log_size > 22) return device_error(c, prm::kStatusBadParam, kBadSize, "log_cq_size above 22");
  const uint64_t buf_off = prm::get64(c.in, prm::create_cq_in::cq_umem_offset);
  uint8_t* buf = umem_range(buf_umem, buf_off, (uint64_t(1) << log_size) * 64);
  if (buf == nullptr) return device_error(c, prm::kStatusBadParam, kBadSize, "the CQ buffer does not fit its umem");
  if (!in(prm::cqc::dbr_umem_valid))
    return device_error(c, prm::kStatusBadParam, kNeedsUmem, "the doorbell record must be in a umem (dbr_umem_valid)");
  Umem* dbr_umem = find_umem(ctx, in(prm::cqc::dbr_umem_id));
  if (dbr_umem == nullptr) return device_error(c, prm::kStatusBadParam, kBadUmem, "dbr_umem_id names no umem of this context");
  uint8_t* dbr = umem_range(dbr_umem, prm::get64(c.in, prm::cqc::dbr_addr.at(cqc)), 8);
  if (dbr == nullptr) return device_error(c, prm::kStatusBadParam, kBadSize, "dbr_addr is outside the doorbell umem");
  if (find_uar(ctx, in(prm::cqc::uar_page)) == nullptr)
    return device_error(c, prm::kStatusBadParam, kBadUar, "uar_page " + hex(in(prm::cqc::uar_page)) + " is no UAR of this context");
  if (in(prm::cqc::c_eqn_or_apu_element) >= static_cast<uint32_t>(ctx->ibv->num_comp_vectors))
    return device_error(c, prm::kStatusBadParam, kBadEqn, "c_eqn " + std::to_string(in(prm::cqc::c_eqn_or_apu_element)) + " is no EQ of this device");
  if (buf_umem->loc.place != dbr_umem->loc.place)
    note("CREATE_CQ: buffer and doorbell record live in different kinds of memory");
  auto* q = new Cq();
  q->nic = ctx->nic;
  q->ctx = ctx;
  q->cqn = ctx->nic->alloc_cqn();
  q->loc = buf_umem->loc;
  q->buf = reinterpret_cast<mlx5::Cqe64*>(buf);
  q->cqe_cnt = 1u << log_size;
  q->collapsed = in(prm::cqc::cc) != 0;
  q->overrun_ignore = in(prm::cqc::oi) != 0;
  q->dbrec = reinterpret_cast<uint32_t*>(dbr);
  if (dbr_umem->loc.is_device() != buf_umem->loc.is_device() && !q->overrun_ignore && !q->collapsed) {
    delete q;
    return device_error(c, prm::kStatusBadParam, kBadField,
                        "a CQ without overrun ignore needs its buffer and doorbell record in the same kind of memory");
  }
  registry().cqs.push_back(q);
  ok(c);
  prm::set(c.out, prm::create_cq_out::cqn, q->cqn);
  note(c.call + std::string(": ") + c.object + ": cqn " + hex(q->cqn) + ", " + std::to_string(q->cqe_cnt) + " CQEs" +
       (q->collapsed ? ", collapsed" : "") + (q->overrun_ignore ? ", overrun ignore" : "") + ", in " +
       (q->loc.is_device() ? "GPU" : "host") + " memory");
  *made = new DevxObj{DevxType::cq, ctx, q, nullptr};
  return 0;
}

// ---- CREATE_QP -------------------------------------------------------------------------------------
int create_qp(Context* ctx, const Cmd& c, DevxObj** made) {
  if (int e = check_lengths(c, prm::kQpCmdInBits, prm::kHdrOutBits)) return e;
  const uint32_t qpc = prm::create_qp_in::qpc.off;
  auto in = [&](prm::Field f) { return prm::get(c.in, f.at(qpc)); };
  const uint32_t st = in(prm::qpc::st);
  if (st != prm::kQpStRc && st != prm::kQpStDci)
    return device_error(c, prm::kStatusBadParam, kNotImplemented,
                        "QP service type " + hex(st) + " is not emulated (RC 0x0, DCI 0x5)");
  if (!ctx->nic->pdn_live(in(prm::qpc::pd))) return device_error(c, prm::kStatusBadParam, kBadPd, "pd " + hex(in(prm::qpc::pd)) + " is no PD of this device");
  Uar* uar = find_uar(ctx, in(prm::qpc::uar_page));
  if (uar == nullptr) return device_error(c, prm::kStatusBadParam, kBadUar, "uar_page " + hex(in(prm::qpc::uar_page)) + " is no UAR of this context");
  Cq* scq = find_cq(ctx->nic, in(prm::qpc::cqn_snd));
  Cq* rcq = find_cq(ctx->nic, in(prm::qpc::cqn_rcv));
  if (scq == nullptr || rcq == nullptr) return device_error(c, prm::kStatusBadParam, kBadCq, "cqn_snd or cqn_rcv names no CQ of this device");
  const uint32_t rq_type = in(prm::qpc::rq_type);
  if (rq_type != prm::kRqTypeRegular && rq_type != prm::kRqTypeSrq && rq_type != prm::kRqTypeZeroLength)
    return device_error(c, prm::kStatusBadParam, kNotImplemented,
                        "rq_type " + std::to_string(rq_type) + " is not emulated (regular 0, SRQ 1, zero-length 3)");
  Srq* srq = nullptr;
  if (rq_type == prm::kRqTypeSrq) {
    srq = find_srq(ctx->nic, in(prm::qpc::srqn_rmpn_xrqn));
    if (srq == nullptr)
      return device_error(c, prm::kStatusBadParam, kBadSrq, "srqn_rmpn_xrqn " + hex(in(prm::qpc::srqn_rmpn_xrqn)) + " is no SRQ of this device");
  }
  if (in(prm::qpc::log_sq_size) > 15) return device_error(c, prm::kStatusBadParam, kBadSize, "log_sq_size above 15");
  if (!prm::get(c.in, prm::create_qp_in::wq_umem_valid))
    return device_error(c, prm::kStatusBadParam, kNeedsUmem, "the work queue must be a umem (wq_umem_valid)");
  Umem* wq = find_umem(ctx, prm::get(c.in, prm::create_qp_in::wq_umem_id));
  if (wq == nullptr) return device_error(c, prm::kStatusBadParam, kBadUmem, "wq_umem_id names no umem of this context");
  const uint32_t sq_wqebbs = in(prm::qpc::no_sq) ? 0 : 1u << in(prm::qpc::log_sq_size);
  const uint32_t rq_cnt = rq_type == prm::kRqTypeRegular ? 1u << in(prm::qpc::log_rq_size) : 0;
  const uint32_t rq_stride = 16u << in(prm::qpc::log_rq_stride);
  const uint64_t rq_bytes = uint64_t(rq_cnt) * rq_stride;
  uint8_t* wq_base = umem_range(wq, prm::get64(c.in, prm::create_qp_in::wq_umem_offset), rq_bytes + uint64_t(sq_wqebbs) * 64);
  if (wq_base == nullptr) return device_error(c, prm::kStatusBadParam, kBadSize, "the receive and send queues do not fit their umem");
  if (!in(prm::qpc::dbr_umem_valid))
    return device_error(c, prm::kStatusBadParam, kNeedsUmem, "the doorbell record must be in a umem (dbr_umem_valid)");
  Umem* dbr_umem = find_umem(ctx, in(prm::qpc::dbr_umem_id));
  if (dbr_umem == nullptr) return device_error(c, prm::kStatusBadParam, kBadUmem, "dbr_umem_id names no umem of this context");
  uint8_t* dbr = umem_range(dbr_umem, prm::get64(c.in, prm::qpc::dbr_addr.at(qpc)), 8);
  if (dbr == nullptr) return device_error(c, prm::kStatusBadParam, kBadSize, "dbr_addr is outside the doorbell umem");
  auto* q = new Qp();
  q->nic = ctx->nic;
  q->ctx = ctx;
  q->kind = QpKind::devx;
  q->type = st == prm::kQpStDci ? QpType::dci : QpType::rc;
  q->dci = q->type == QpType::dci;
  q->srq = srq;
  q->pdn = in(prm::qpc::pd);
  q->rq_buf = rq_cnt ? wq_base : nullptr;
  q->rq_wqe_cnt = rq_cnt;
  q->rq_stride = rq_stride;
  q->rq_loc = wq->loc;
  q->sq.buf = wq_base + rq_bytes;  // the receive queue comes first in the work queue buffer
  q->sq.wqe_cnt = sq_wqebbs;
  q->sq.dbrec = reinterpret_cast<uint32_t*>(dbr);
  q->sq.doorbell = reinterpret_cast<uint64_t*>(uar->page + 0x800);
  q->sq_loc = wq->loc;
  q->dbrec_loc = dbr_umem->loc;
  q->send_cq = scq;
  q->recv_cq = rcq;
  q->uar = uar;
  if (ctx->nic->add_qp(q) == 0) {
    delete q;
    return device_error(c, prm::kStatusNoRes, kBadSize, "the device's QP table is full");
  }
  q->sq.qpn = q->qpn;
  ++scq->refs;
  ++rcq->refs;
  if (srq != nullptr) ++srq->refs;
  uar->qps.push_back(q);
  registry().qps.push_back(q);
  ok(c);
  prm::set(c.out, prm::create_qp_out::qpn, q->qpn);
  note(c.call + std::string(": ") + c.object + ": " + (q->dci ? "DCI" : "RC") + " qpn " + hex(q->qpn) + ", pd " + hex(q->pdn) +
       ", UAR page " + hex(uar->page_id) + ", send CQ " + hex(scq->cqn) + ", recv CQ " + hex(rcq->cqn) +
       (srq ? ", SRQ " + hex(srq->srqn) : "") + ", " + std::to_string(sq_wqebbs) + " WQEBBs in " +
       (wq->loc.is_device() ? "GPU" : "host") + " memory, dbrec in " + (dbr_umem->loc.is_device() ? "GPU" : "host") + " memory");
  *made = new DevxObj{DevxType::qp, ctx, nullptr, q};
  return 0;
}

// ---- CREATE_DCT --------------------------------------------------------------------------------------
// A DC target: created ready to receive (the firmware's DCT is active once created), on an SRQ,
// answering any DCI that presents its access key.
int create_dct(Context* ctx, const Cmd& c, DevxObj** made) {
  if (int e = check_lengths(c, prm::kDctCmdInBits, prm::kCreateDctOutBits)) return e;
  const uint32_t dctc = prm::create_dct_in::dct_context_entry.off;
  auto in = [&](prm::Field f) { return prm::get(c.in, f.at(dctc)); };
  if (!ctx->nic->pdn_live(in(prm::dctc::pd))) return device_error(c, prm::kStatusBadParam, kBadPd, "pd " + hex(in(prm::dctc::pd)) + " is no PD of this device");
  Cq* cq = find_cq(ctx->nic, in(prm::dctc::cqn));
  if (cq == nullptr) return device_error(c, prm::kStatusBadParam, kBadCq, "cqn " + hex(in(prm::dctc::cqn)) + " is no CQ of this device");
  Srq* srq = find_srq(ctx->nic, in(prm::dctc::srqn_xrqn));
  if (srq == nullptr) return device_error(c, prm::kStatusBadParam, kBadSrq, "srqn_xrqn " + hex(in(prm::dctc::srqn_xrqn)) + " is no SRQ of this device (a DCT receives on an SRQ)");
  if (in(prm::dctc::port) != 1) return device_error(c, prm::kStatusBadParam, kBadPort, "port " + std::to_string(in(prm::dctc::port)) + " (one port: 1)");
  const uint32_t mtu = in(prm::dctc::mtu);
  if (mtu < prm::kMtu256 || mtu > prm::kMtu4096) return device_error(c, prm::kStatusBadParam, kBadField, "mtu " + std::to_string(mtu) + " (1..5)");
  auto* q = new Qp();
  q->nic = ctx->nic;
  q->ctx = ctx;
  q->kind = QpKind::devx;
  q->type = QpType::dct;
  q->pdn = in(prm::dctc::pd);
  q->port = 1;
  q->path_mtu = static_cast<uint8_t>(mtu);
  q->min_rnr_timer = static_cast<uint8_t>(in(prm::dctc::min_rnr_nak));
  q->access = (in(prm::dctc::rre) ? IBV_ACCESS_REMOTE_READ : 0) | (in(prm::dctc::rwe) ? IBV_ACCESS_REMOTE_WRITE : 0) |
              (in(prm::dctc::rae) ? IBV_ACCESS_REMOTE_ATOMIC : 0);
  q->dc_key = prm::get64(c.in, prm::dctc::dc_access_key.at(dctc));
  q->recv_cq = cq;
  q->srq = srq;
  if (ctx->nic->add_qp(q) == 0) {
    delete q;
    return device_error(c, prm::kStatusNoRes, kBadSize, "the device's QP table is full");
  }
  ++cq->refs;
  ++srq->refs;
  registry().qps.push_back(q);
  q->state.store(IBV_QPS_RTR);
  ok(c);
  prm::set(c.out, prm::create_dct_out::dctn, q->qpn);
  note(c.call + std::string(": ") + c.object + ": dctn " + hex(q->qpn) + ", SRQ " + hex(srq->srqn) + ", CQ " + hex(cq->cqn));
  *made = new DevxObj{DevxType::dct, ctx, nullptr, q};
  return 0;
}

int query_dct(DevxObj* obj, const Cmd& c) {
  if (int e = check_lengths(c, prm::kShortInBits, prm::kQueryDctOutBits)) return e;
  const Qp& q = *obj->qp;
  std::memset(c.out, 0, prm::bytes_of(prm::kQueryDctOutBits));
  const uint32_t dctc = prm::query_dct_out::dct_context_entry.off;
  auto put = [&](prm::Field f, uint32_t v) { prm::set(c.out, f.at(dctc), v); };
  put(prm::dctc::state, prm::kDctStateActive);
  put(prm::dctc::pd, q.pdn);
  put(prm::dctc::cqn, q.recv_cq ? q.recv_cq->cqn : 0);
  put(prm::dctc::srqn_xrqn, q.srq ? q.srq->srqn : 0);
  put(prm::dctc::port, q.port);
  put(prm::dctc::mtu, q.path_mtu);
  put(prm::dctc::min_rnr_nak, q.min_rnr_timer);
  put(prm::dctc::rre, (q.access & IBV_ACCESS_REMOTE_READ) ? 1 : 0);
  put(prm::dctc::rwe, (q.access & IBV_ACCESS_REMOTE_WRITE) ? 1 : 0);
  put(prm::dctc::rae, (q.access & IBV_ACCESS_REMOTE_ATOMIC) ? 1 : 0);
  prm::set64(c.out, prm::dctc::dc_access_key.at(dctc), q.dc_key);
  return 0;
}

// ---- QP transitions ---------------------------------------------------------------------------------
int apply_path(Qp& q, const Cmd& c, uint32_t path, bool address) {
  auto in = [&](prm::Field f) { return prm::get(c.in, f.at(path)); };
  // RST2INIT names the port; later transitions may leave it 0 (unchanged), as NVSHMEM does.
  const uint32_t port = in(prm::ads::vhca_port_num);
  if (port != 1 && !(port == 0 && q.port == 1))
    return device_error(c, prm::kStatusBadParam, kBadPort, "vhca_port_num " + std::to_string(port) + " (one port: 1)");
  q.port = 1;
  if (!address) return 0;
  const DeviceSpec& s = q.nic->spec();
  q.ah.port_num = 1;
  q.ah.is_global = static_cast<uint8_t>(in(prm::ads::grh));
  if (s.roce && !q.ah.is_global)
    return device_error(c, prm::kStatusBadParam, kNoRoute, "a RoCE port needs a GRH (grh 1 and rgid)");
  q.ah.dlid = static_cast<uint16_t>(in(prm::ads::rlid));
  q.ah.sl = static_cast<uint8_t>(in(prm::ads::sl));
  if (q.ah.is_global) {
    prm::get_bytes(c.in, prm::ads::rgid_rip.at(path), q.ah.grh.dgid.raw, 16);
    q.ah.grh.sgid_index = static_cast<uint8_t>(in(prm::ads::src_addr_index));
    q.ah.grh.hop_limit = static_cast<uint8_t>(in(prm::ads::hop_limit));
    q.ah.grh.traffic_class = static_cast<uint8_t>(in(prm::ads::tclass));
    q.ah.grh.flow_label = in(prm::ads::flow_label);
    if (q.ah.grh.sgid_index >= s.gids.size())
      return device_error(c, prm::kStatusBadParam, kBadField, "src_addr_index " + std::to_string(q.ah.grh.sgid_index) + " names no GID");
  }
  return 0;
}

int modify_qp(DevxObj* obj, const Cmd& c) {
  Qp& q = *obj->qp;
  const uint32_t op = c.opcode;
  const bool short_cmd = op == prm::kOp2ErrQp || op == prm::kOp2RstQp;
  if (int e = check_lengths(c, short_cmd ? prm::kShortInBits : prm::kQpCmdInBits, prm::kHdrOutBits)) return e;
  const uint32_t qpc = prm::rst2init_qp_in::qpc.off;
  const uint32_t path = prm::qpc::primary_address_path.off + qpc;
  auto in = [&](prm::Field f) { return prm::get(c.in, f.at(qpc)); };
  const int cur = q.state.load();
  auto need_state = [&](int s, const char* name) {
    if (cur == s) return 0;
    return device_error(c, prm::kStatusBadQpState, kWrongState,
                        std::string("the QP is not in ") + name + " (verbs state " + std::to_string(cur) + ")");
  };
  if (op == prm::kOp2RstQp) {
    qp_set_state(q, IBV_QPS_RESET);
    return ok(c);
  }
  if (op == prm::kOp2ErrQp) {
    if (int e = cur == IBV_QPS_RESET ? need_state(IBV_QPS_INIT, "a state other than RESET") : 0) return e;
    qp_set_state(q, IBV_QPS_ERR);
    return ok(c);
  }
  if (op == prm::kOpRst2InitQp || op == prm::kOpInit2InitQp) {
    if (int e = need_state(op == prm::kOpRst2InitQp ? IBV_QPS_RESET : IBV_QPS_INIT, op == prm::kOpRst2InitQp ? "RESET" : "INIT")) return e;
    if (int e = apply_path(q, c, path, false)) return e;
    const uint32_t pkey = prm::get(c.in, prm::ads::pkey_index.at(path));
    if (pkey >= (q.nic->spec().roce ? 1u : 128u)) return device_error(c, prm::kStatusBadParam, kBadField, "pkey_index outside the P_Key table");
    q.pkey_index = static_cast<uint16_t>(pkey);
    q.access = (in(prm::qpc::rre) ? IBV_ACCESS_REMOTE_READ : 0) | (in(prm::qpc::rwe) ? IBV_ACCESS_REMOTE_WRITE : 0) |
               (in(prm::qpc::rae) ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    if (q.type == QpType::dci) q.dc_key = prm::get64(c.in, prm::qpc::dc_access_key.at(qpc));
    qp_set_state(q, IBV_QPS_INIT);
    return ok(c);
  }
  if (op == prm::kOpInit2RtrQp) {
    if (int e = need_state(IBV_QPS_INIT, "INIT")) return e;
    const uint32_t mtu = in(prm::qpc::mtu);
    if (mtu < prm::kMtu256 || mtu > prm::kMtu4096) return device_error(c, prm::kStatusBadParam, kBadField, "mtu " + std::to_string(mtu) + " (1..5)");
    // A DCI has no fixed destination: every WQE carries its target's address vector.
    if (int e = apply_path(q, c, path, q.type != QpType::dci)) return e;
    q.path_mtu = static_cast<uint8_t>(mtu);
    q.dest_qpn = in(prm::qpc::remote_qpn);
    q.rq_psn = in(prm::qpc::next_rcv_psn);
    q.max_dest_rd_atomic = static_cast<uint8_t>(1u << in(prm::qpc::log_rra_max));
    q.min_rnr_timer = static_cast<uint8_t>(in(prm::qpc::min_rnr_nak));
    qp_set_state(q, IBV_QPS_RTR);
    return ok(c);
  }
  if (op == prm::kOpRtr2RtsQp || op == prm::kOpRts2RtsQp) {
    if (int e = need_state(op == prm::kOpRtr2RtsQp ? IBV_QPS_RTR : IBV_QPS_RTS, op == prm::kOpRtr2RtsQp ? "RTR" : "RTS")) return e;
    q.max_rd_atomic = static_cast<uint8_t>(1u << in(prm::qpc::log_sra_max));
    q.retry_cnt = static_cast<uint8_t>(in(prm::qpc::retry_count));
    q.rnr_retry = static_cast<uint8_t>(in(prm::qpc::rnr_retry));
    q.sq_psn = in(prm::qpc::next_send_psn);
    q.timeout = static_cast<uint8_t>(prm::get(c.in, prm::ads::ack_timeout.at(path)));
    qp_set_state(q, IBV_QPS_RTS);
    return ok(c);
  }
  return device_error(c, prm::kStatusBadOp, kNotImplemented, "QP command " + hex(op) + " is not emulated");
}

uint32_t prm_state(int verbs_state) {
  switch (verbs_state) {
    case IBV_QPS_INIT: return prm::kQpStateInit;
    case IBV_QPS_RTR: return prm::kQpStateRtr;
    case IBV_QPS_RTS: return prm::kQpStateRts;
    case IBV_QPS_SQD: return prm::kQpStateSqd;
    case IBV_QPS_SQE: return prm::kQpStateSqer;
    case IBV_QPS_ERR: return prm::kQpStateErr;
    default: return prm::kQpStateRst;
  }
}

int query_qp(DevxObj* obj, const Cmd& c) {
  if (int e = check_lengths(c, prm::kShortInBits, prm::kQueryQpOutBits)) return e;
  const Qp& q = *obj->qp;
  std::memset(c.out, 0, prm::bytes_of(prm::kQueryQpOutBits));
  const uint32_t qpc = prm::query_qp_out::qpc.off;
  auto put = [&](prm::Field f, uint32_t v) { prm::set(c.out, f.at(qpc), v); };
  put(prm::qpc::state, prm_state(q.state.load()));
  put(prm::qpc::st, q.type == QpType::dci ? prm::kQpStDci : prm::kQpStRc);
  put(prm::qpc::pd, q.pdn);
  put(prm::qpc::mtu, q.path_mtu);
  put(prm::qpc::remote_qpn, q.dest_qpn);
  put(prm::qpc::cqn_snd, q.send_cq ? q.send_cq->cqn : 0);
  put(prm::qpc::cqn_rcv, q.recv_cq ? q.recv_cq->cqn : 0);
  put(prm::qpc::uar_page, q.uar ? q.uar->page_id : 0);
  uint32_t log_sq = 0;
  while ((1u << log_sq) < q.sq.wqe_cnt) ++log_sq;
  put(prm::qpc::log_sq_size, log_sq);
  put(prm::qpc::retry_count, q.retry_cnt);
  put(prm::qpc::rnr_retry, q.rnr_retry);
  return 0;
}

void destroy_obj_locked(DevxObj* obj) {
  Registry& reg = registry();
  if (obj->type == DevxType::qp || obj->type == DevxType::dct) {
    Qp* q = obj->qp;
    forget_qp(*q);
    reg.qps.erase(std::remove(reg.qps.begin(), reg.qps.end(), q), reg.qps.end());
    if (q->uar) q->uar->qps.erase(std::remove(q->uar->qps.begin(), q->uar->qps.end(), q), q->uar->qps.end());
    q->nic->remove_qp(q);
    if (q->send_cq) --q->send_cq->refs;
    if (q->recv_cq) --q->recv_cq->refs;
    if (q->srq) --q->srq->refs;
    delete q;
  } else {
    reg.cqs.erase(std::remove(reg.cqs.begin(), reg.cqs.end(), obj->cq), reg.cqs.end());
    delete obj->cq;
  }
  auto& all = objects();
  all.erase(std::remove(all.begin(), all.end(), obj), all.end());
  delete obj;
}

bool is_qp_modify(uint32_t op) {
  return op == prm::kOpRst2InitQp || op == prm::kOpInit2RtrQp || op == prm::kOpRtr2RtsQp || op == prm::kOpRts2RtsQp ||
         op == prm::kOp2ErrQp || op == prm::kOp2RstQp || op == prm::kOpInit2InitQp;
}

// Common entry checks: an emulated context (every one is DEVX-capable), mailboxes at least a command header.
Context* devx_context(ibv_context* ibctx, const char* call, const void* in, size_t inlen, void* out, size_t outlen, int* err) {
  Context* ctx = context_of(ibctx);
  if (ctx == nullptr) {
    *err = fail(EOPNOTSUPP, call, "context", "not an emulated mlx5 context");
    return nullptr;
  }
  if (in == nullptr || out == nullptr || inlen < 16 || outlen < 16) {
    *err = fail(EINVAL, call, ctx->nic->spec().name,
                "mailboxes of " + std::to_string(inlen) + " and " + std::to_string(outlen) + " bytes (a command header is 16)");
    return nullptr;
  }
  return ctx;
}

}  // namespace

int devx_general_cmd(ibv_context* ibctx, const void* in, size_t inlen, void* out, size_t outlen) {
  int err = 0;
  Context* ctx = devx_context(ibctx, "mlx5dv_devx_general_cmd", in, inlen, out, outlen, &err);
  if (ctx == nullptr) return err;
  Cmd c{in, inlen, out, outlen, prm::get(in, prm::query_hca_cap_in::opcode), "mlx5dv_devx_general_cmd", ctx->nic->spec().name};
  if (c.opcode == prm::kOpCreateCq || c.opcode == prm::kOpCreateQp || c.opcode == prm::kOpCreateDct || is_qp_modify(c.opcode) ||
      c.opcode == prm::kOpDestroyQp || c.opcode == prm::kOpDestroyCq || c.opcode == prm::kOpDestroyDct ||
      c.opcode == prm::kOpQueryDct || c.opcode == prm::kOpQueryQp)
    return fail(EINVAL, c.call, c.object, "opcode " + hex(c.opcode) + " manages an object: use mlx5dv_devx_obj_create/modify/destroy");
  std::lock_guard<std::mutex> lock(registry().mu);
  if (c.opcode == prm::kOpQueryHcaCap) {
    const int rc = query_hca_cap(ctx, c);
    note(c.call + std::string(": ") + c.object + ": QUERY_HCA_CAP op_mod " + hex(prm::get(in, prm::query_hca_cap_in::op_mod)) +
         (rc == 0 ? ": ok" : ": refused"));
    return rc;
  }
  return device_error(c, prm::kStatusBadOp, kNotImplemented, "command " + hex(c.opcode) + " is not emulated");
}

DevxObj* devx_obj_create(ibv_context* ibctx, const void* in, size_t inlen, void* out, size_t outlen) {
  int err = 0;
  Context* ctx = devx_context(ibctx, "mlx5dv_devx_obj_create", in, inlen, out, outlen, &err);
  if (ctx == nullptr) return nullptr;
  Cmd c{in, inlen, out, outlen, prm::get(in, prm::create_qp_in::opcode), "mlx5dv_devx_obj_create", ctx->nic->spec().name};
  std::lock_guard<std::mutex> lock(registry().mu);
  DevxObj* made = nullptr;
  int rc = 0;
  if (c.opcode == prm::kOpCreateCq) {
    c.object += " CREATE_CQ";
    rc = create_cq(ctx, c, &made);
  } else if (c.opcode == prm::kOpCreateQp) {
    c.object += " CREATE_QP";
    rc = create_qp(ctx, c, &made);
  } else if (c.opcode == prm::kOpCreateDct) {
    c.object += " CREATE_DCT";
    rc = create_dct(ctx, c, &made);
  } else {
    rc = fail(EINVAL, c.call, c.object, "opcode " + hex(c.opcode) + " is not an object-create command the emulated device accepts (CREATE_CQ, CREATE_QP, CREATE_DCT)");
  }
  if (rc != 0) {
    errno = rc;
    return nullptr;
  }
  objects().push_back(made);
  return made;
}

int devx_obj_modify(DevxObj* obj, const void* in, size_t inlen, void* out, size_t outlen) {
  int err = 0;
  Context* ctx = devx_context(obj ? obj->ctx->ibv : nullptr, "mlx5dv_devx_obj_modify", in, inlen, out, outlen, &err);
  if (ctx == nullptr) return err;
  std::lock_guard<std::mutex> lock(registry().mu);
  Cmd c{in, inlen, out, outlen, prm::get(in, prm::rst2init_qp_in::opcode), "mlx5dv_devx_obj_modify", ctx->nic->spec().name};
  if (obj->type != DevxType::qp || !is_qp_modify(c.opcode))
    return fail(EINVAL, c.call, c.object, "opcode " + hex(c.opcode) + " is not a modify command for this object");
  c.object += " QP " + hex(obj->qp->qpn);
  if (prm::get(in, prm::rst2init_qp_in::qpn) != obj->qp->qpn)
    return fail(EINVAL, c.call, c.object, "the command names QP " + hex(prm::get(in, prm::rst2init_qp_in::qpn)) + ", not this object");
  const int rc = modify_qp(obj, c);
  if (rc == 0) {
    const Qp& q = *obj->qp;
    note(c.call + std::string(": ") + c.object + ": opcode " + hex(c.opcode) + " -> state " + std::to_string(q.state.load()) +
         (c.opcode == prm::kOpInit2RtrQp && q.type == QpType::rc
              ? ", remote QP " + hex(q.dest_qpn) + (q.ah.is_global ? " by GID" : " at LID " + std::to_string(q.ah.dlid))
              : "") +
         (c.opcode == prm::kOpRtr2RtsQp ? ", retry " + std::to_string(q.retry_cnt) + ", rnr retry " + std::to_string(q.rnr_retry) +
                                              ", ack timeout " + std::to_string(q.timeout)
                                        : ""));
  }
  return rc;
}

int devx_obj_query(DevxObj* obj, const void* in, size_t inlen, void* out, size_t outlen) {
  int err = 0;
  Context* ctx = devx_context(obj ? obj->ctx->ibv : nullptr, "mlx5dv_devx_obj_query", in, inlen, out, outlen, &err);
  if (ctx == nullptr) return err;
  std::lock_guard<std::mutex> lock(registry().mu);
  Cmd c{in, inlen, out, outlen, prm::get(in, prm::query_qp_in::opcode), "mlx5dv_devx_obj_query", ctx->nic->spec().name};
  if (obj->type == DevxType::dct) {
    if (c.opcode != prm::kOpQueryDct || prm::get(in, prm::query_dct_in::dctn) != obj->qp->qpn)
      return fail(EINVAL, c.call, c.object, "opcode " + hex(c.opcode) + " is not a query command for this object (QUERY_DCT of its dctn)");
    return query_dct(obj, c);
  }
  if (obj->type != DevxType::qp || c.opcode != prm::kOpQueryQp || prm::get(in, prm::query_qp_in::qpn) != obj->qp->qpn)
    return fail(EINVAL, c.call, c.object, "opcode " + hex(c.opcode) + " is not a query command for this object (QUERY_QP of its qpn)");
  return query_qp(obj, c);
}

int devx_obj_destroy(DevxObj* obj) {
  if (obj == nullptr) return fail(EINVAL, "mlx5dv_devx_obj_destroy", "object", "null");
  std::lock_guard<std::mutex> lock(registry().mu);
  if (obj->type == DevxType::cq && obj->cq->refs != 0)
    return fail(EBUSY, "mlx5dv_devx_obj_destroy", "CQ " + hex(obj->cq->cqn), std::to_string(obj->cq->refs) + " QPs still use it");
  destroy_obj_locked(obj);
  return 0;
}

Umem* devx_umem_reg(ibv_context* ibctx, void* addr, size_t size, uint32_t access) {
  const char* call = "mlx5dv_devx_umem_reg";
  Context* ctx = context_of(ibctx);
  if (ctx == nullptr) return fail(EOPNOTSUPP, call, "context", "not an emulated mlx5 context"), nullptr;
  const std::string obj = std::to_string(size) + " bytes at " + hex(reinterpret_cast<uint64_t>(addr)) + " on " + ctx->nic->spec().name;
  if (size == 0) return fail(EINVAL, call, obj, "size is 0"), nullptr;
  if (access & ~uint32_t(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC))
    return fail(EINVAL, call, obj, "access " + hex(access) + " has flags a umem does not take"), nullptr;
  Loc loc;
  std::string why;
  if (!classify(addr, size, &loc, &why)) return fail(EFAULT, call, obj, why), nullptr;
  std::lock_guard<std::mutex> lock(registry().mu);
  auto* u = new Umem{registry().next_umem_id++, static_cast<uint8_t*>(addr), size, loc, ctx};
  ctx->umems.push_back(u);
  note("umem " + std::to_string(u->id) + ": " + obj + (loc.is_device() ? " (GPU memory)" : " (host memory)"));
  return u;
}

int devx_umem_dereg(Umem* u) {
  std::lock_guard<std::mutex> lock(registry().mu);
  auto& v = u->owner->umems;
  v.erase(std::remove(v.begin(), v.end(), u), v.end());
  delete u;
  return 0;
}

Uar* devx_alloc_uar(ibv_context* ibctx, uint32_t flags) {
  const char* call = "mlx5dv_devx_alloc_uar";
  Context* ctx = context_of(ibctx);
  if (ctx == nullptr) return fail(EOPNOTSUPP, call, "context", "not an emulated mlx5 context"), nullptr;
  if (flags > 2) return fail(EINVAL, call, ctx->nic->spec().name, "UAR type " + std::to_string(flags) + " (BF 0, NC 1, NC_DEDICATED 2)"), nullptr;
  // An ordinary page: the engine watches its doorbell registers; a GPU can map it with
  // cudaHostRegister(Mapped) (a real UAR needs IoMemory instead).
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return fail(ENOMEM, call, ctx->nic->spec().name, "cannot map a doorbell page"), nullptr;
  std::lock_guard<std::mutex> lock(registry().mu);
  auto* u = new Uar();
  u->page_id = registry().next_uar_page++;
  u->page = static_cast<uint8_t*>(page);
  u->owner = ctx;
  ctx->uars.push_back(u);
  registry().uars.push_back(u);
  return u;
}

void devx_free_uar(Uar* u) {
  std::lock_guard<std::mutex> lock(registry().mu);
  auto& v = u->owner->uars;
  v.erase(std::remove(v.begin(), v.end(), u), v.end());
  auto& all = registry().uars;
  all.erase(std::remove(all.begin(), all.end(), u), all.end());
  for (Qp* q : u->qps) q->uar = nullptr;
  munmap(u->page, 4096);
  delete u;
}

int devx_query_eqn(ibv_context* ibctx, uint32_t vector, uint32_t* eqn) {
  Context* ctx = context_of(ibctx);
  if (ctx == nullptr) return fail(EOPNOTSUPP, "mlx5dv_devx_query_eqn", "context", "not an emulated mlx5 context");
  if (vector >= static_cast<uint32_t>(ibctx->num_comp_vectors))
    return fail(EINVAL, "mlx5dv_devx_query_eqn", ctx->nic->spec().name, "vector " + std::to_string(vector) + " out of range");
  *eqn = vector;
  return 0;
}

void devx_destroy_context_objects(Context* ctx) {
  for (DevxObj* o : std::vector<DevxObj*>(objects()))
    if (o->ctx == ctx && o->type != DevxType::cq) destroy_obj_locked(o);
  for (DevxObj* o : std::vector<DevxObj*>(objects()))
    if (o->ctx == ctx) destroy_obj_locked(o);
  for (Uar* u : ctx->uars) {
    auto& all = registry().uars;
    all.erase(std::remove(all.begin(), all.end(), u), all.end());
    munmap(u->page, 4096);
    delete u;
  }
  ctx->uars.clear();
  for (Umem* u : ctx->umems) delete u;
  ctx->umems.clear();
}

}  // namespace gicomm::emu
