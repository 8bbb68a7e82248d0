// The DEVX backend (gicomm/mlx5dev/devx.h, unmodified) over the emulated rdma-core, on the CPU:
// queues in host memory registered by address (a host has no dmabuf to offer), the doorbell rung
// through the host mapping of the UAR, WQEs built with the shared encoders (gicomm/mlx5/wqe.h).
// Then the device's answers to PRM commands a real device rejects: unknown opcodes, short
// mailboxes, bad umems and service types, transitions from the wrong state, commands for another
// object, dmabuf registrations; each with the errno, PRM status and syndrome checked.
//
// Cases: single QP (inline and pointer writes, fetch-add, payload and CQE checks); many QPs on one
// UAR rung concurrently (every doorbell honoured although they overwrite each other in the one
// register); a bad rkey (error CQE with the REMOTE_ACCESS syndrome, QP in ERR by QUERY_QP);
// malformed commands. Exit 0 pass, 1 fail, 77 no emulated device (run it through the emulation).
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gicomm/mlx5/cqe.h"
#include "gicomm/mlx5/doorbell.h"
#include "gicomm/mlx5/host_post.h"
#include "gicomm/mlx5/wqe.h"
#include "gicomm/mlx5dev/devx.h"
#include "expect.h"
#include "gicomm/mlx5dev/prm.h"

namespace m = gicomm::mlx5;
namespace dx = gicomm::mlx5dev;
namespace prm = gicomm::mlx5dev::prm;
using Clock = std::chrono::steady_clock;

namespace {

// Host memory laid out like session.cu's mlx5 placement: per QP, a send queue then a control page
// (collapsed CQE at 0, CQ dbrec at 2048, QP dbrec at 2112).
struct Queues {
  static constexpr size_t kCtrl = 4096, kCqDbr = 2048, kQpDbr = 2112;
  uint32_t n, sq_wqebbs;
  size_t per_qp, bytes;
  uint8_t* buf;
  dx::Umem umem;
  std::vector<dx::Cq> cqs;
  std::vector<dx::Qp> qps;
  Queues(uint32_t qps_n, uint32_t wqebbs) : n(qps_n), sq_wqebbs(wqebbs) {
    per_qp = size_t(wqebbs) * 64 + kCtrl;
    bytes = per_qp * n;
    buf = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
    std::memset(buf, 0, bytes);
    for (uint32_t i = 0; i < n; ++i) m::init_cqe(*cqe(i));
  }
  ~Queues() { std::free(buf); }
  uint8_t* sq(uint32_t i) const { return buf + i * per_qp; }
  m::Cqe64* cqe(uint32_t i) const { return reinterpret_cast<m::Cqe64*>(buf + i * per_qp + size_t(sq_wqebbs) * 64); }
  uint32_t* qp_dbrec(uint32_t i) const { return reinterpret_cast<uint32_t*>(buf + i * per_qp + size_t(sq_wqebbs) * 64 + kQpDbr); }
};

bool build(dx::DevxDevice& dev, Queues& q) {
  std::string reason;
  if (!dev.register_umem(q.buf, q.bytes, &q.umem, &reason)) {
    std::fprintf(stderr, "register_umem: %s\n", reason.c_str());
    return false;
  }
  uint32_t log_sq = 0;
  while ((1u << log_sq) < q.sq_wqebbs) ++log_sq;
  const dx::ConnectParams params;
  for (uint32_t i = 0; i < q.n; ++i) {
    const size_t ctrl = i * q.per_qp + size_t(q.sq_wqebbs) * 64;
    dx::Cq cq;
    dx::Qp qp;
    dx::QpAddress self;
    if (!dev.create_cq(q.umem, ctrl, ctrl + Queues::kCqDbr, &cq, &reason) ||
        !dev.create_rc_qp(q.umem, i * q.per_qp, log_sq, q.umem, ctrl + Queues::kQpDbr, cq.cqn, &qp, &reason) ||
        !dev.local_address(qp, params, &self, &reason) || !dev.connect_rc_qp(qp, self, params, &reason)) {
      std::fprintf(stderr, "QP %u: %s\n", i, reason.c_str());
      return false;
    }
    q.cqs.push_back(cq);
    q.qps.push_back(qp);
  }
  return true;
}

void teardown(Queues& q) {
  for (auto& qp : q.qps) dx::DevxDevice::destroy(&qp);
  for (auto& cq : q.cqs) dx::DevxDevice::destroy(&cq);
  dx::DevxDevice::release(&q.umem);
}

// Waits until QP i's collapsed CQE names `counter` or a later WQE (or an error).
bool wait_cqe(const Queues& q, uint32_t i, uint16_t counter, m::CqeFields* f, int timeout_ms = 5000) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const uint32_t tail = __atomic_load_n(&q.cqe(i)->w[15], __ATOMIC_ACQUIRE);
    const uint8_t op = m::op_own_opcode(m::tail_op_own(tail));
    if (op == m::kCqeReqErr || (op == m::kCqeReq && gicomm::idx16_at_or_after(m::tail_wqe_counter(tail), counter))) {
      *f = m::decode_cqe(*q.cqe(i));
      return true;
    }
    if (Clock::now() > deadline) return false;
    std::this_thread::yield();
  }
}

m::SqDesc sq_desc(dx::DevxDevice& dev, const Queues& q, uint32_t i) {
  m::SqDesc d;
  d.buf = q.sq(i);
  d.wqe_cnt = q.sq_wqebbs;
  d.qpn = q.qps[i].qpn;
  d.dbrec = q.qp_dbrec(i);
  d.doorbell = static_cast<uint64_t*>(dev.uar_host_doorbell());
  return d;
}

void case_single_qp(dx::DevxDevice& dev) {
  Queues q(1, 256);  // room for every WQE posted below: nothing waits for completions
  if (!build(dev, q)) {
    EXPECT(false, "build");
    return;
  }
  EXPECT(std::strcmp(q.umem.registration, "va") == 0, "host queue memory registered as %s", q.umem.registration);
  std::vector<uint64_t> data(1024, 0), src(64, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 0x1000 + i;
  uint32_t lkey = 0, rkey = 0, slkey = 0, srkey = 0;
  std::string reason;
  EXPECT(dev.register_mr(data.data(), data.size() * 8, &lkey, &rkey, &reason), "register_mr: %s", reason.c_str());
  EXPECT(std::strcmp(dev.mr_registration(), "va") == 0, "host MR registered as %s", dev.mr_registration());
  EXPECT(dev.register_mr(src.data(), src.size() * 8, &slkey, &srkey, &reason), "register_mr: %s", reason.c_str());
  m::HostSq sq(sq_desc(dev, q, 0));
  // 100 inline 8-byte writes, one doorbell each, signaled every 10th.
  for (uint32_t i = 0; i < 100; ++i) {
    m::WqeImage img;
    const uint32_t ds = m::build_rdma_write_inline_u64(img, sq.header(i % 10 == 9), reinterpret_cast<uint64_t>(&data[i]), rkey,
                                                       0xabc000 + i);
    sq.push(img, ds);
    sq.ring();
  }
  m::CqeFields f{};
  EXPECT(wait_cqe(q, 0, 99, &f) && f.opcode == m::kCqeReq, "no CQE for WQE 99 (opcode %u counter %u)", f.opcode, f.wqe_counter);
  bool all = true;
  for (uint32_t i = 0; i < 100; ++i) all = all && data[i] == 0xabc000 + i;
  EXPECT(all, "inline payloads differ");
  // A batch of pointer writes and fetch-adds under one doorbell.
  for (uint32_t i = 0; i < 32; ++i) {
    m::WqeImage img;
    const uint32_t ds = m::build_rdma_write(img, sq.header(false), reinterpret_cast<uint64_t>(&data[200 + i]), rkey,
                                            reinterpret_cast<uint64_t>(&src[i]), slkey, 8);
    sq.push(img, ds);
  }
  for (uint32_t i = 0; i < 4; ++i) {
    m::WqeImage img;
    const uint32_t ds = m::build_atomic_fetch_add(img, sq.header(i == 3), reinterpret_cast<uint64_t>(&data[500]), rkey, 7,
                                                  reinterpret_cast<uint64_t>(&src[40 + i]), slkey);
    sq.push(img, ds);
  }
  sq.ring();
  const uint16_t last = static_cast<uint16_t>(sq.pi() - 1);
  EXPECT(wait_cqe(q, 0, last, &f) && f.opcode == m::kCqeReq, "no CQE for the batch (counter %u, want %u)", f.wqe_counter, last);
  all = true;
  for (uint32_t i = 0; i < 32; ++i) all = all && data[200 + i] == 0x1000 + i;
  EXPECT(all, "pointer payloads differ");
  EXPECT(data[500] == 28, "fetch-adds left %llu", static_cast<unsigned long long>(data[500]));
  EXPECT(src[40] == 0 && src[41] == 7 && src[42] == 14 && src[43] == 21, "fetch-add old values %llu %llu %llu %llu",
        static_cast<unsigned long long>(src[40]), static_cast<unsigned long long>(src[41]),
        static_cast<unsigned long long>(src[42]), static_cast<unsigned long long>(src[43]));
  teardown(q);
}

// Many QPs share the UAR's doorbell register; threads ring concurrently.
void case_shared_uar(dx::DevxDevice& dev) {
  constexpr uint32_t kQps = 8, kOps = 400;
  Queues q(kQps, 64);
  if (!build(dev, q)) {
    EXPECT(false, "build");
    return;
  }
  std::vector<uint64_t> data(kQps * kOps, 0);
  uint32_t lkey = 0, rkey = 0;
  std::string reason;
  EXPECT(dev.register_mr(data.data(), data.size() * 8, &lkey, &rkey, &reason), "register_mr: %s", reason.c_str());
  std::vector<std::thread> threads;
  std::atomic<int> stuck{0};
  for (uint32_t t = 0; t < kQps; ++t) {
    threads.emplace_back([&, t] {
      m::HostSq sq(sq_desc(dev, q, t));
      for (uint32_t i = 0; i < kOps; ++i) {
        // Keep at most 32 WQEs in flight (the ring holds 64).
        if (i >= 32 && i % 16 == 0) {
          m::CqeFields f{};
          if (!wait_cqe(q, t, static_cast<uint16_t>(i - 17), &f)) {
            ++stuck;
            return;
          }
        }
        m::WqeImage img;
        const uint32_t ds = m::build_rdma_write_inline_u64(img, sq.header(i % 16 == 15), reinterpret_cast<uint64_t>(&data[t * kOps + i]),
                                                           rkey, (uint64_t(t) << 32) | i);
        sq.push(img, ds);
        sq.ring();
      }
      m::CqeFields f{};
      if (!wait_cqe(q, t, kOps - 1, &f)) ++stuck;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT(stuck.load() == 0, "%d QPs never completed (a doorbell was lost)", stuck.load());
  bool all = true;
  for (uint32_t t = 0; t < kQps; ++t)
    for (uint32_t i = 0; i < kOps; ++i) all = all && data[t * kOps + i] == ((uint64_t(t) << 32) | i);
  EXPECT(all, "payloads differ");
  teardown(q);
}

uint32_t query_state(dx::Qp& qp) {
  uint32_t in[prm::kShortInBits / 32] = {};
  uint32_t out[prm::kQueryQpOutBits / 32] = {};
  prm::set(in, prm::query_qp_in::opcode, prm::kOpQueryQp);
  prm::set(in, prm::query_qp_in::qpn, qp.qpn);
  if (mlx5dv_devx_obj_query(qp.obj, in, sizeof in, out, sizeof out) != 0) return 0xff;
  return prm::get(out, prm::qpc::state.at(prm::query_qp_out::qpc.off));
}

void case_bad_rkey(dx::DevxDevice& dev) {
  Queues q(1, 64);
  if (!build(dev, q)) {
    EXPECT(false, "build");
    return;
  }
  EXPECT(query_state(q.qps[0]) == prm::kQpStateRts, "connected QP in PRM state %u", query_state(q.qps[0]));
  std::vector<uint64_t> data(16, 0);
  uint32_t lkey = 0, rkey = 0;
  std::string reason;
  EXPECT(dev.register_mr(data.data(), data.size() * 8, &lkey, &rkey, &reason), "register_mr");
  m::HostSq sq(sq_desc(dev, q, 0));
  m::WqeImage img;
  const uint32_t ds = m::build_rdma_write_inline_u64(img, sq.header(false), reinterpret_cast<uint64_t>(&data[0]), rkey ^ 0x40, 5);
  sq.push(img, ds);
  sq.ring();
  m::CqeFields f{};
  EXPECT(wait_cqe(q, 0, 0x7fff, &f) && f.opcode == m::kCqeReqErr && f.syndrome == m::kSyndromeRemoteAccess && f.wqe_counter == 0,
        "error CQE: opcode %u syndrome 0x%x counter %u", f.opcode, f.syndrome, f.wqe_counter);
  EXPECT(data[0] == 0, "the rejected write landed");
  EXPECT(query_state(q.qps[0]) == prm::kQpStateErr, "QP in PRM state %u after the error, expected ERR", query_state(q.qps[0]));
  teardown(q);
}

// Raw commands: the device's status and syndrome, the kernel's errnos.
struct Raw {
  ibv_context* ctx = nullptr;
  ~Raw() {
    if (ctx) ibv_close_device(ctx);
  }
};

uint32_t status_of(const void* out) { return prm::get(out, prm::create_qp_out::status); }
uint32_t syndrome_of(const void* out) { return prm::get(out, prm::create_qp_out::syndrome); }

void case_commands() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  Raw r;
  mlx5dv_context_attr attr{};
  attr.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
  r.ctx = n > 0 ? mlx5dv_open_device(list[0], &attr) : nullptr;
  ibv_port_attr port{};
  if (r.ctx) ibv_query_port(r.ctx, 1, &port);
  ibv_free_device_list(list);
  EXPECT(r.ctx != nullptr, "open with DEVX");
  if (!r.ctx) return;
  uint32_t out[(prm::kQueryHcaCapOutBits) / 32] = {};
  uint32_t in[prm::kQpCmdInBits / 32] = {};
  // QUERY_HCA_CAP, general and atomic.
  prm::set(in, prm::query_hca_cap_in::opcode, prm::kOpQueryHcaCap);
  prm::set(in, prm::query_hca_cap_in::op_mod, (prm::kCapOpModGeneral << 1) | 1);
  EXPECT(mlx5dv_devx_general_cmd(r.ctx, in, prm::bytes_of(prm::kShortInBits), out, sizeof out) == 0 && status_of(out) == 0,
        "QUERY_HCA_CAP general: errno %d status 0x%x", errno, status_of(out));
  const uint32_t cap = prm::query_hca_cap_out::capability.off;
  EXPECT(prm::get(out, prm::cmd_hca_cap::cqe_version.at(cap)) == 1, "cqe_version %u", prm::get(out, prm::cmd_hca_cap::cqe_version.at(cap)));
  const uint32_t want_port = port.link_layer == IBV_LINK_LAYER_ETHERNET ? prm::kPortTypeEth : prm::kPortTypeIb;
  EXPECT(prm::get(out, prm::cmd_hca_cap::port_type.at(cap)) == want_port, "port_type %u", prm::get(out, prm::cmd_hca_cap::port_type.at(cap)));
  EXPECT(prm::get(out, prm::cmd_hca_cap::log_max_msg.at(cap)) == 30, "log_max_msg");
  prm::set(in, prm::query_hca_cap_in::op_mod, (prm::kCapOpModAtomic << 1) | 1);
  EXPECT(mlx5dv_devx_general_cmd(r.ctx, in, prm::bytes_of(prm::kShortInBits), out, sizeof out) == 0, "QUERY_HCA_CAP atomic");
  EXPECT(prm::get(out, prm::atomic_caps::atomic_operations.at(cap)) ==
                (prm::kAtomicOpCompareSwap | prm::kAtomicOpFetchAdd | prm::kAtomicOpMaskedCompareSwap |
                 prm::kAtomicOpMaskedFetchAdd) &&
            prm::get(out, prm::atomic_caps::atomic_size_qp.at(cap)) == (prm::kAtomicSizeQp4 | prm::kAtomicSizeQp8),
        "atomic caps ops 0x%x sizes 0x%x", prm::get(out, prm::atomic_caps::atomic_operations.at(cap)),
        prm::get(out, prm::atomic_caps::atomic_size_qp.at(cap)));
  // The caps output mailbox too short for the capability: BAD_OUTP_LEN.
  errno = 0;
  EXPECT(mlx5dv_devx_general_cmd(r.ctx, in, prm::bytes_of(prm::kShortInBits), out, 64) == EREMOTEIO &&
            status_of(out) == prm::kStatusBadOutputLen,
        "short output: errno %d status 0x%x", errno, status_of(out));
  // An opcode nobody implements: BAD_OP, syndrome (opcode << 16) | 1.
  std::memset(in, 0, sizeof in);
  prm::set(in, prm::query_hca_cap_in::opcode, 0x7777);
  EXPECT(mlx5dv_devx_general_cmd(r.ctx, in, 16, out, 16) == EREMOTEIO && status_of(out) == prm::kStatusBadOp &&
            syndrome_of(out) == ((0x7777u << 16) | 1),
        "unknown opcode: status 0x%x syndrome 0x%x", status_of(out), syndrome_of(out));
  // Object commands through the general path, and a non-create opcode as a create: the kernel refuses.
  prm::set(in, prm::query_hca_cap_in::opcode, prm::kOpCreateQp);
  EXPECT(mlx5dv_devx_general_cmd(r.ctx, in, sizeof in, out, 16) == EINVAL, "CREATE_QP through general_cmd");
  prm::set(in, prm::query_hca_cap_in::opcode, prm::kOpQueryHcaCap);
  errno = 0;
  EXPECT(mlx5dv_devx_obj_create(r.ctx, in, sizeof in, out, 16) == nullptr && errno == EINVAL, "QUERY_HCA_CAP as a create: errno %d", errno);
  // CREATE_CQ: a 16-byte mailbox, then an unknown umem.
  std::memset(in, 0, sizeof in);
  prm::set(in, prm::create_cq_in::opcode, prm::kOpCreateCq);
  errno = 0;
  EXPECT(mlx5dv_devx_obj_create(r.ctx, in, 16, out, 16) == nullptr && errno == EREMOTEIO && status_of(out) == prm::kStatusBadInputLen,
        "short CREATE_CQ: errno %d status 0x%x", errno, status_of(out));
  prm::set(in, prm::create_cq_in::cq_umem_valid, 1);
  prm::set(in, prm::create_cq_in::cq_umem_id, 9999);
  errno = 0;
  EXPECT(mlx5dv_devx_obj_create(r.ctx, in, prm::bytes_of(prm::kCqCmdInBits), out, 16) == nullptr && errno == EREMOTEIO &&
            status_of(out) == prm::kStatusBadParam,
        "CREATE_CQ on umem 9999: errno %d status 0x%x", errno, status_of(out));
  // CREATE_QP of a service type the emulation does not offer.
  std::memset(in, 0, sizeof in);
  prm::set(in, prm::create_qp_in::opcode, prm::kOpCreateQp);
  prm::set(in, prm::qpc::st.at(prm::create_qp_in::qpc.off), prm::kQpStUd);
  errno = 0;
  EXPECT(mlx5dv_devx_obj_create(r.ctx, in, sizeof in, out, 16) == nullptr && errno == EREMOTEIO && status_of(out) == prm::kStatusBadParam,
        "CREATE_QP UD: errno %d status 0x%x", errno, status_of(out));
  // dmabuf umems and MRs are refused so callers register by address.
  std::vector<uint8_t> mem(8192);
  mlx5dv_devx_umem_in uin{};
  uin.addr = mem.data();
  uin.size = 4096;
  uin.comp_mask = MLX5DV_UMEM_MASK_DMABUF;
  uin.dmabuf_fd = 0;
  errno = 0;
  EXPECT(mlx5dv_devx_umem_reg_ex(r.ctx, &uin) == nullptr && errno == EOPNOTSUPP, "dmabuf umem: errno %d", errno);
  ibv_pd* pd = ibv_alloc_pd(r.ctx);
  errno = 0;
  EXPECT(ibv_reg_dmabuf_mr(pd, 0, 4096, 0, 0, IBV_ACCESS_LOCAL_WRITE) == nullptr && errno == EOPNOTSUPP, "dmabuf MR: errno %d", errno);
  ibv_dealloc_pd(pd);
}

void case_transitions(dx::DevxDevice& dev) {
  // A QP whose transitions come in the wrong order, and a command naming another QP.
  Queues q(2, 64);
  std::string reason;
  EXPECT(dev.register_umem(q.buf, q.bytes, &q.umem, &reason), "umem: %s", reason.c_str());
  dx::Cq cq;
  dx::Qp qp, other;
  EXPECT(dev.create_cq(q.umem, 64 * 64, 64 * 64 + Queues::kCqDbr, &cq, &reason), "cq: %s", reason.c_str());
  EXPECT(dev.create_rc_qp(q.umem, 0, 6, q.umem, 64 * 64 + Queues::kQpDbr, cq.cqn, &qp, &reason), "qp: %s", reason.c_str());
  EXPECT(dev.create_rc_qp(q.umem, q.per_qp, 6, q.umem, q.per_qp + 64 * 64 + Queues::kQpDbr, cq.cqn, &other, &reason), "qp 2: %s", reason.c_str());
  uint32_t in[prm::kQpCmdInBits / 32] = {};
  uint32_t out[prm::kHdrOutBits / 32] = {};
  prm::set(in, prm::init2rtr_qp_in::opcode, prm::kOpInit2RtrQp);
  prm::set(in, prm::init2rtr_qp_in::qpn, qp.qpn);
  errno = 0;
  EXPECT(mlx5dv_devx_obj_modify(qp.obj, in, sizeof in, out, sizeof out) == EREMOTEIO && status_of(out) == prm::kStatusBadQpState,
        "INIT2RTR in RESET: errno %d status 0x%x", errno, status_of(out));
  prm::set(in, prm::init2rtr_qp_in::qpn, other.qpn);
  EXPECT(mlx5dv_devx_obj_modify(qp.obj, in, sizeof in, out, sizeof out) == EINVAL, "a command naming another QP");
  dx::QpAddress self;
  const dx::ConnectParams params;
  EXPECT(dev.local_address(qp, params, &self, &reason) && dev.connect_rc_qp(qp, self, params, &reason), "connect: %s", reason.c_str());
  EXPECT(!dev.connect_rc_qp(qp, self, params, &reason) && reason.find("RST2INIT") != std::string::npos &&
            reason.find("status 0x10") != std::string::npos,
        "connecting twice: '%s'", reason.c_str());
  dx::DevxDevice::destroy(&qp);
  dx::DevxDevice::destroy(&other);
  dx::DevxDevice::destroy(&cq);
  dx::DevxDevice::release(&q.umem);
}

}  // namespace

int main() {
  const std::string provider = dx::rdma_provider();
  std::string reason;
  auto dev = dx::DevxDevice::open("", &reason);
  if (!dev) {
    std::fprintf(stderr, "devx_test: %s (provider %s)\n", reason.c_str(), provider.c_str());
    return 77;
  }
  if (provider != "emulated") {
    std::fprintf(stderr, "devx_test: runs on the emulated rdma-core only (this process has %s)\n", provider.c_str());
    return 77;
  }
  EXPECT(dev->alloc_uar(&reason), "alloc_uar: %s", reason.c_str());
  const auto t0 = Clock::now();
  case_single_qp(*dev);
  case_shared_uar(*dev);
  case_bad_rkey(*dev);
  case_transitions(*dev);
  case_commands();
  std::printf("devx_test: %s on %s (%s): %d failed checks in %.0f ms\n", expect_failures() ? "FAIL" : "ok", dev->name().c_str(), provider.c_str(),
              expect_failures(), std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  return expect_failures() ? 1 : 0;
}
