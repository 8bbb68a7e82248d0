// gicomm-verbs-suite: a provider-independent test of an RDMA stack through the public libibverbs
// API, written like a user program. It runs against whatever libibverbs the loader finds: gicomm's
// emulated rdma-core (LD_LIBRARY_PATH first), Soft-RoCE (rxe) in a VM, or a real NIC.
//
//   gicomm-verbs-suite [--device NAME]... [--case NAME]... [--gid-index N] [--timeout-ms N] [--list]
//
// Every case opens its own resources on each device given (default: every device listed) and
// checks behaviour, not just return codes: the QP state machine and the kernel's attribute-mask
// rules (EINVAL, state unchanged), RDMA write/read/write-with-immediate/send/receive with every
// payload byte checked, fetch-add and compare-swap results, completion status codes for bad keys,
// bounds, access rights, RNR and unreachable peers, flushes after an error, CQ overflow as an async
// event, completion channels, and resource-busy errors. Where the mlx5 provider returns a specific
// errno (vendor 0x02c9), the suite checks that errno; elsewhere it checks that the call fails.
// Every wait is bounded. Exit: 0 all passed, 1 a check failed, 77 no RDMA device.
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "expect.h"

namespace {

int g_timeout_ms = 5000;
int g_gid_index = 0;

using Clock = std::chrono::steady_clock;

struct Dev {
  ibv_device* dev = nullptr;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_device_attr attr{};
  ibv_port_attr port{};
  ibv_gid gid{};
  bool mlx5 = false;  // the mlx5 provider's errno conventions apply
  std::string name;
};

bool open_dev(ibv_device* d, Dev* out) {
  out->dev = d;
  out->name = ibv_get_device_name(d);
  out->ctx = ibv_open_device(d);
  if (!out->ctx) return false;
  out->pd = ibv_alloc_pd(out->ctx);
  if (!out->pd || ibv_query_device(out->ctx, &out->attr) || ibv_query_port(out->ctx, 1, &out->port)) return false;
  if (ibv_query_gid(out->ctx, 1, g_gid_index, &out->gid)) return false;
  out->mlx5 = out->attr.vendor_id == 0x02c9;
  return true;
}

void close_dev(Dev* d) {
  if (d->pd) ibv_dealloc_pd(d->pd);
  if (d->ctx) ibv_close_device(d->ctx);
  d->pd = nullptr;
  d->ctx = nullptr;
}

struct Buffer {
  uint8_t* p = nullptr;
  size_t n = 0;
  ibv_mr* mr = nullptr;
  Buffer(ibv_pd* pd, size_t bytes, int access) : n(bytes) {
    p = static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) & ~size_t(4095)));
    std::memset(p, 0, bytes);
    mr = ibv_reg_mr(pd, p, bytes, access);
  }
  ~Buffer() {
    if (mr) ibv_dereg_mr(mr);
    std::free(p);
  }
  uint64_t addr(size_t off = 0) const { return reinterpret_cast<uint64_t>(p + off); }
};

uint8_t pattern(size_t i, uint32_t seed) { return static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xff); }

constexpr int kAllAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

struct Ep {
  ibv_cq* scq = nullptr;
  ibv_cq* rcq = nullptr;
  ibv_qp* qp = nullptr;
  ~Ep() {
    if (qp) ibv_destroy_qp(qp);
    if (scq) ibv_destroy_cq(scq);
    if (rcq && rcq != scq) ibv_destroy_cq(rcq);
  }
};

bool make_ep(Dev& d, Ep* e, uint32_t send_wr = 64, uint32_t recv_wr = 64, uint32_t sge = 4, uint32_t inl = 64,
             int cqe = 256) {
  e->scq = ibv_create_cq(d.ctx, cqe, nullptr, nullptr, 0);
  e->rcq = ibv_create_cq(d.ctx, cqe, nullptr, nullptr, 0);
  if (!e->scq || !e->rcq) return false;
  ibv_qp_init_attr ia{};
  ia.send_cq = e->scq;
  ia.recv_cq = e->rcq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = send_wr;
  ia.cap.max_recv_wr = recv_wr;
  ia.cap.max_send_sge = sge;
  ia.cap.max_recv_sge = sge;
  ia.cap.max_inline_data = inl;
  e->qp = ibv_create_qp(d.pd, &ia);
  return e->qp != nullptr;
}

int qp_state(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia)) return -1;
  return a.qp_state;
}

int to_init(ibv_qp* qp, int access = kAllAccess) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = access;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

ibv_qp_attr rtr_attr(const Dev& dest, uint32_t dest_qpn, uint8_t min_rnr = 1) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = min_rnr;
  a.ah_attr.port_num = 1;
  a.ah_attr.dlid = dest.port.lid;
  if (dest.port.link_layer == IBV_LINK_LAYER_ETHERNET || dest.port.lid == 0) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = dest.gid;
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(g_gid_index);
    a.ah_attr.grh.hop_limit = 1;
  }
  return a;
}
constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

ibv_qp_attr rts_attr(uint8_t timeout = 14, uint8_t retry = 7, uint8_t rnr_retry = 7) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = timeout;
  a.retry_cnt = retry;
  a.rnr_retry = rnr_retry;
  a.sq_psn = 0;
  a.max_rd_atomic = 1;
  return a;
}
constexpr int kRtsMask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

struct Link {
  uint8_t timeout = 14, retry = 7, rnr_retry = 7, min_rnr = 1;
  int access = kAllAccess;
};

bool connect(ibv_qp* qp, const Dev& dest, uint32_t dest_qpn, const Link& l = Link()) {
  if (to_init(qp, l.access)) return false;
  ibv_qp_attr r = rtr_attr(dest, dest_qpn, l.min_rnr);
  if (ibv_modify_qp(qp, &r, kRtrMask)) return false;
  ibv_qp_attr s = rts_attr(l.timeout, l.retry, l.rnr_retry);
  return ibv_modify_qp(qp, &s, kRtsMask) == 0;
}

// A connected pair on device(s) a and b (the same device for loopback).
struct Pair {
  Ep a, b;
  bool ok = false;
  Pair(Dev& da, Dev& db, const Link& l = Link(), int cqe = 256) {
    ok = make_ep(da, &a, 64, 64, 4, 64, cqe) && make_ep(db, &b, 64, 64, 4, 64, cqe) &&
         connect(a.qp, db, b.qp->qp_num, l) && connect(b.qp, da, a.qp->qp_num, l);
  }
};

// A connected pair and a registered buffer on each side (`a` on the requester's device, `b` on the
// responder's); a nonzero seed fills that side with a pattern.
struct Fixture {
  Pair p;
  Buffer a, b;
  Fixture(Dev& da, Dev& db, size_t bytes, uint32_t seed_a, uint32_t seed_b)
      : p(da, db), a(da.pd, bytes, kAllAccess), b(db.pd, bytes, kAllAccess) {
    EXPECT(p.ok, "connect: %s", std::strerror(errno));
    for (size_t i = 0; seed_a && i < a.n; ++i) a.p[i] = pattern(i, seed_a);
    for (size_t i = 0; seed_b && i < b.n; ++i) b.p[i] = pattern(i, seed_b);
  }
};

// Polls one completion (bounded). False on timeout.
bool poll_one(ibv_cq* cq, ibv_wc* wc, int timeout_ms = g_timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n == 1) return true;
    if (n < 0) return false;
    if (Clock::now() > deadline) return false;
    std::this_thread::yield();
  }
}

// No completion shows up within `ms`.
bool quiet(ibv_cq* cq, int ms) {
  ibv_wc wc{};
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < deadline) {
    if (ibv_poll_cq(cq, 1, &wc) != 0) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

int post_write(ibv_qp* qp, uint64_t wr_id, ibv_sge* sge, int nsge, uint64_t raddr, uint32_t rkey, int flags,
               ibv_wr_opcode op = IBV_WR_RDMA_WRITE, uint32_t imm = 0) {
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = sge;
  wr.num_sge = nsge;
  wr.opcode = op;
  wr.send_flags = flags;
  wr.imm_data = htobe32(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(qp, &wr, &bad);
}

int post_recv(ibv_qp* qp, uint64_t wr_id, ibv_sge* sge, int nsge) {
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = sge;
  wr.num_sge = nsge;
  return ibv_post_recv(qp, &wr, &bad);
}


// Waits for an async event of `type` on the context (bounded).
bool wait_async(ibv_context* ctx, ibv_event_type type, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    pollfd p{ctx->async_fd, POLLIN, 0};
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
    ibv_async_event ev{};
    if (ibv_get_async_event(ctx, &ev)) return false;
    const bool match = ev.event_type == type;
    ibv_ack_async_event(&ev);
    if (match) return true;
  }
  return false;
}

// ---- cases --------------------------------------------------------------------------------------------
void case_device_query(Dev& d, Dev&) {
  EXPECT(d.port.state == IBV_PORT_ACTIVE, "port state %d", d.port.state);
  EXPECT(d.port.link_layer == IBV_LINK_LAYER_ETHERNET || d.port.link_layer == IBV_LINK_LAYER_INFINIBAND,
        "link layer %d", d.port.link_layer);
  EXPECT(ibv_get_device_guid(d.dev) != 0, "zero GUID");
  bool nonzero = false;
  for (uint8_t b : d.gid.raw) nonzero = nonzero || b != 0;
  EXPECT(nonzero, "GID %d is zero", g_gid_index);
  if (d.port.link_layer == IBV_LINK_LAYER_INFINIBAND) EXPECT(d.port.lid != 0, "InfiniBand port without a LID");
  __be16 pkey = 0;
  EXPECT(ibv_query_pkey(d.ctx, 1, 0, &pkey) == 0 && be16toh(pkey) == 0xffff, "P_Key 0 is %x", be16toh(pkey));
  ibv_port_attr bad{};
  EXPECT(ibv_query_port(d.ctx, 2, &bad) != 0 || d.attr.phys_port_cnt >= 2, "port 2 answered on a one-port device");
  EXPECT(d.attr.max_qp_wr > 0 && d.attr.max_sge > 0 && d.attr.max_cqe > 0, "device limits are zero");
}

void case_qp_state_machine(Dev& d, Dev&) {
  Ep e;
  EXPECT(make_ep(d, &e), "create QP: %s", std::strerror(errno));
  if (!e.qp) return;
  EXPECT(qp_state(e.qp) == IBV_QPS_RESET, "new QP in state %d", qp_state(e.qp));
  EXPECT(to_init(e.qp) == 0, "RESET->INIT");
  EXPECT(qp_state(e.qp) == IBV_QPS_INIT, "state %d", qp_state(e.qp));
  ibv_qp_attr r = rtr_attr(d, e.qp->qp_num);
  EXPECT(ibv_modify_qp(e.qp, &r, kRtrMask) == 0, "INIT->RTR");
  EXPECT(qp_state(e.qp) == IBV_QPS_RTR, "state %d", qp_state(e.qp));
  ibv_qp_attr s = rts_attr();
  EXPECT(ibv_modify_qp(e.qp, &s, kRtsMask) == 0, "RTR->RTS");
  EXPECT(qp_state(e.qp) == IBV_QPS_RTS, "state %d", qp_state(e.qp));
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  EXPECT(ibv_query_qp(e.qp, &q, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_TIMEOUT, &qi) == 0 && q.dest_qp_num == e.qp->qp_num &&
            q.timeout == 14,
        "query_qp dest %u timeout %u", q.dest_qp_num, q.timeout);
  ibv_qp_attr rts2rts{};
  rts2rts.min_rnr_timer = 5;
  EXPECT(ibv_modify_qp(e.qp, &rts2rts, IBV_QP_MIN_RNR_TIMER) == 0, "RTS->RTS with an optional attribute");
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  EXPECT(ibv_modify_qp(e.qp, &err, IBV_QP_STATE) == 0 && qp_state(e.qp) == IBV_QPS_ERR, "RTS->ERR");
  ibv_qp_attr rst{};
  rst.qp_state = IBV_QPS_RESET;
  EXPECT(ibv_modify_qp(e.qp, &rst, IBV_QP_STATE) == 0 && qp_state(e.qp) == IBV_QPS_RESET, "ERR->RESET");
  EXPECT(to_init(e.qp) == 0 && qp_state(e.qp) == IBV_QPS_INIT, "RESET->INIT after a reset");
}

void case_modify_masks(Dev& d, Dev&) {
  Ep e;
  EXPECT(make_ep(d, &e), "create QP");
  if (!e.qp) return;
  auto expect_einval = [&](ibv_qp_attr a, int mask, int state_before, const char* what) {
    const int rc = ibv_modify_qp(e.qp, &a, mask);
    EXPECT(rc == EINVAL, "%s: returned %d (%s), expected EINVAL", what, rc, std::strerror(rc));
    EXPECT(qp_state(e.qp) == state_before, "%s changed the state to %d", what, qp_state(e.qp));
  };
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  expect_einval(a, IBV_QP_STATE, IBV_QPS_RESET, "RESET->RTR");
  a = {};
  a.qp_state = IBV_QPS_ERR;
  expect_einval(a, IBV_QP_STATE, IBV_QPS_RESET, "RESET->ERR");
  a = {};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.qp_access_flags = kAllAccess;
  expect_einval(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS, IBV_QPS_RESET, "RESET->INIT without IBV_QP_PORT");
  a.port_num = 1;
  a.path_mtu = IBV_MTU_1024;
  expect_einval(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT | IBV_QP_PATH_MTU, IBV_QPS_RESET,
                "RESET->INIT with IBV_QP_PATH_MTU");
  a.port_num = static_cast<uint8_t>(d.attr.phys_port_cnt + 1);
  expect_einval(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT, IBV_QPS_RESET, "RESET->INIT to a port that does not exist");
  a = {};
  a.cur_qp_state = IBV_QPS_RESET;
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  expect_einval(a, IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT, IBV_QPS_RESET,
                "IBV_QP_CUR_STATE from RESET");
  EXPECT(to_init(e.qp) == 0, "RESET->INIT");
  ibv_qp_attr r = rtr_attr(d, e.qp->qp_num);
  expect_einval(r, kRtrMask & ~IBV_QP_AV, IBV_QPS_INIT, "INIT->RTR without IBV_QP_AV");
  expect_einval(r, kRtrMask & ~IBV_QP_MIN_RNR_TIMER, IBV_QPS_INIT, "INIT->RTR without IBV_QP_MIN_RNR_TIMER");
  expect_einval(r, kRtrMask | IBV_QP_SQ_PSN, IBV_QPS_INIT, "INIT->RTR with IBV_QP_SQ_PSN");
  ibv_qp_attr rts = rts_attr();
  expect_einval(rts, kRtsMask, IBV_QPS_INIT, "INIT->RTS");
  ibv_qp_attr big = r;
  big.max_dest_rd_atomic = static_cast<uint8_t>(std::min<int>(d.attr.max_qp_init_rd_atom + 1, 255));
  // Depth limits are the driver's checks (mlx5 makes them; rxe, for one, does not).
  if (d.mlx5 && d.attr.max_qp_init_rd_atom < 255) expect_einval(big, kRtrMask, IBV_QPS_INIT, "INIT->RTR above max_qp_init_rd_atom");
  EXPECT(ibv_modify_qp(e.qp, &r, kRtrMask) == 0, "INIT->RTR");
  expect_einval(rts, kRtsMask & ~IBV_QP_TIMEOUT, IBV_QPS_RTR, "RTR->RTS without IBV_QP_TIMEOUT");
  expect_einval(rts, kRtsMask | IBV_QP_DEST_QPN, IBV_QPS_RTR, "RTR->RTS with IBV_QP_DEST_QPN");
  ibv_qp_attr manyrd = rts;
  manyrd.max_rd_atomic = static_cast<uint8_t>(std::min<int>(d.attr.max_qp_rd_atom + 1, 255));
  if (d.mlx5 && d.attr.max_qp_rd_atom < 255) expect_einval(manyrd, kRtsMask, IBV_QPS_RTR, "RTR->RTS above max_qp_rd_atom");
  EXPECT(ibv_modify_qp(e.qp, &rts, kRtsMask) == 0, "RTR->RTS");
  expect_einval(r, IBV_QP_AV, IBV_QPS_RTS, "IBV_QP_AV in RTS->RTS");
}

void case_rdma_write(Dev& da, Dev& db) {
  Fixture f(da, db, 8192, 1, 0);
  if (!f.p.ok) return;
  Pair& p = f.p;
  Buffer &src = f.a, &dst = f.b;
  // Pointer writes with 1..3 SGEs, an inline write, a zero-length write; unsignaled ones before a
  // signaled one complete with it.
  ibv_sge one{src.addr(0), 4096, src.mr->lkey};
  EXPECT(post_write(p.a.qp, 1, &one, 1, dst.addr(0), dst.mr->rkey, 0) == 0, "post 1");
  ibv_sge three[3] = {{src.addr(4096), 100, src.mr->lkey}, {src.addr(5000), 1, src.mr->lkey}, {src.addr(6000), 955, src.mr->lkey}};
  EXPECT(post_write(p.a.qp, 2, three, 3, dst.addr(4096), dst.mr->rkey, 0) == 0, "post 2");
  uint8_t inl[40];
  for (int i = 0; i < 40; ++i) inl[i] = static_cast<uint8_t>(0xa0 + i);
  ibv_sge is{reinterpret_cast<uint64_t>(inl), sizeof inl, 0};
  EXPECT(post_write(p.a.qp, 3, &is, 1, dst.addr(6000), dst.mr->rkey, IBV_SEND_INLINE) == 0, "post inline");
  EXPECT(post_write(p.a.qp, 4, nullptr, 0, dst.addr(7000), dst.mr->rkey, IBV_SEND_SIGNALED) == 0, "post zero-length");
  ibv_wc wc{};
  EXPECT(poll_one(p.a.scq, &wc), "no completion");
  EXPECT(wc.status == IBV_WC_SUCCESS && wc.wr_id == 4 && wc.opcode == IBV_WC_RDMA_WRITE, "status %s wr_id %llu opcode %d",
        ibv_wc_status_str(wc.status), static_cast<unsigned long long>(wc.wr_id), wc.opcode);
  EXPECT(quiet(p.a.scq, 20), "unsignaled writes produced completions");
  EXPECT(std::memcmp(dst.p, src.p, 4096) == 0, "single-SGE payload differs");
  std::vector<uint8_t> expect(src.p + 4096, src.p + 4196);
  expect.push_back(src.p[5000]);
  expect.insert(expect.end(), src.p + 6000, src.p + 6955);
  EXPECT(std::memcmp(dst.p + 4096, expect.data(), expect.size()) == 0, "three-SGE payload differs");
  EXPECT(dst.p[4096 + expect.size()] == 0, "wrote past the three-SGE message");
  EXPECT(std::memcmp(dst.p + 6000, inl, sizeof inl) == 0, "inline payload differs");
  EXPECT(dst.p[6000 + sizeof inl] == 0 && dst.p[7000] == 0, "bytes written outside the messages");
  // Many signaled writes in one post: completions in order, each payload in place.
  std::vector<ibv_send_wr> wrs(32);
  std::vector<ibv_sge> sges(32);
  for (int i = 0; i < 32; ++i) {
    sges[i] = {src.addr(64 * i), 64, src.mr->lkey};
    wrs[i] = {};
    wrs[i].wr_id = 100 + i;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].opcode = IBV_WR_RDMA_WRITE;
    wrs[i].send_flags = IBV_SEND_SIGNALED;
    wrs[i].wr.rdma.remote_addr = dst.addr(8192 - 2048 + 64 * i - 0);
    wrs[i].wr.rdma.rkey = dst.mr->rkey;
    wrs[i].next = i + 1 < 32 ? &wrs[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  EXPECT(ibv_post_send(p.a.qp, wrs.data(), &bad) == 0, "post chain");
  for (int i = 0; i < 32; ++i) {
    EXPECT(poll_one(p.a.scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == uint64_t(100 + i), "chain completion %d: wr_id %llu", i,
          static_cast<unsigned long long>(wc.wr_id));
  }
  EXPECT(std::memcmp(dst.p + 8192 - 2048, src.p, 2048) == 0, "chained payloads differ");
}

void case_rdma_read(Dev& da, Dev& db) {
  Fixture f(da, db, 4096, 0, 9);
  if (!f.p.ok) return;
  Pair& p = f.p;
  Buffer &local = f.a, &remote = f.b;
  ibv_sge sg[2] = {{local.addr(0), 1000, local.mr->lkey}, {local.addr(2048), 1000, local.mr->lkey}};
  EXPECT(post_write(p.a.qp, 7, sg, 2, remote.addr(96), remote.mr->rkey, IBV_SEND_SIGNALED, IBV_WR_RDMA_READ) == 0, "post read");
  ibv_wc wc{};
  EXPECT(poll_one(p.a.scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ && wc.wr_id == 7,
        "read completion %s", ibv_wc_status_str(wc.status));
  EXPECT(std::memcmp(local.p, remote.p + 96, 1000) == 0 && std::memcmp(local.p + 2048, remote.p + 1096, 1000) == 0,
        "read payload differs");
  EXPECT(local.p[1000] == 0 && local.p[3048] == 0, "read wrote past its scatter list");
}

void case_send_recv(Dev& da, Dev& db) {
  Fixture f(da, db, 4096, 3, 0);
  if (!f.p.ok) return;
  Pair& p = f.p;
  Buffer &src = f.a, &dst = f.b;
  ibv_sge r0[2] = {{dst.addr(0), 300, dst.mr->lkey}, {dst.addr(1000), 700, dst.mr->lkey}};
  EXPECT(post_recv(p.b.qp, 50, r0, 2) == 0, "post recv 0");
  ibv_sge r1{dst.addr(2048), 64, dst.mr->lkey};
  EXPECT(post_recv(p.b.qp, 51, &r1, 1) == 0, "post recv 1");
  ibv_sge s0{src.addr(0), 900, src.mr->lkey};
  EXPECT(post_write(p.a.qp, 60, &s0, 1, 0, 0, IBV_SEND_SIGNALED, IBV_WR_SEND) == 0, "post send");
  uint8_t inl[16];
  for (int i = 0; i < 16; ++i) inl[i] = static_cast<uint8_t>(i * 3);
  ibv_sge s1{reinterpret_cast<uint64_t>(inl), 16, 0};
  EXPECT(post_write(p.a.qp, 61, &s1, 1, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_INLINE, IBV_WR_SEND_WITH_IMM, 0xdeadbeef) == 0,
        "post send with immediate");
  ibv_wc wc{};
  EXPECT(poll_one(p.b.rcq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 50 && wc.opcode == IBV_WC_RECV && wc.byte_len == 900 &&
            !(wc.wc_flags & IBV_WC_WITH_IMM),
        "receive 0: %s wr_id %llu opcode %d len %u", ibv_wc_status_str(wc.status), static_cast<unsigned long long>(wc.wr_id),
        wc.opcode, wc.byte_len);
  EXPECT(wc.qp_num == p.b.qp->qp_num, "receive on QP %u", wc.qp_num);
  EXPECT(poll_one(p.b.rcq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 51 && wc.byte_len == 16 &&
            (wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) == 0xdeadbeef,
        "receive 1: imm %x flags %x", be32toh(wc.imm_data), wc.wc_flags);
  EXPECT(std::memcmp(dst.p, src.p, 300) == 0 && std::memcmp(dst.p + 1000, src.p + 300, 600) == 0, "send payload not scattered right");
  EXPECT(dst.p[1600] == 0, "send wrote past the message");
  EXPECT(std::memcmp(dst.p + 2048, inl, 16) == 0, "inline send payload differs");
  for (uint64_t id : {60ull, 61ull}) {
    EXPECT(poll_one(p.a.scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND && wc.wr_id == id, "send completion %llu",
          static_cast<unsigned long long>(id));
  }
}

void case_write_imm(Dev& da, Dev& db) {
  Fixture f(da, db, 4096, 5, 0);
  if (!f.p.ok) return;
  Pair& p = f.p;
  Buffer &src = f.a, &dst = f.b;
  EXPECT(post_recv(p.b.qp, 70, nullptr, 0) == 0, "post empty receive");
  ibv_sge s{src.addr(0), 512, src.mr->lkey};
  EXPECT(post_write(p.a.qp, 71, &s, 1, dst.addr(1024), dst.mr->rkey, IBV_SEND_SIGNALED, IBV_WR_RDMA_WRITE_WITH_IMM, 0x1234) == 0, "post");
  ibv_wc wc{};
  EXPECT(poll_one(p.b.rcq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.wr_id == 70 &&
            (wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) == 0x1234 && wc.byte_len == 512,
        "responder completion: %s opcode %d imm %x len %u", ibv_wc_status_str(wc.status), wc.opcode, be32toh(wc.imm_data), wc.byte_len);
  EXPECT(poll_one(p.a.scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 71 && wc.opcode == IBV_WC_RDMA_WRITE, "requester completion");
  EXPECT(std::memcmp(dst.p + 1024, src.p, 512) == 0, "payload differs");
}

void case_atomics(Dev& da, Dev& db) {
  Fixture f(da, db, 4096, 0, 0);
  if (!f.p.ok) return;
  Pair& p = f.p;
  Buffer &local = f.a, &remote = f.b;
  uint64_t* word = reinterpret_cast<uint64_t*>(remote.p + 64);
  *word = 1000;
  auto atomic = [&](uint64_t wr_id, ibv_wr_opcode op, uint64_t raddr, uint64_t add_or_compare, uint64_t swap, size_t local_off) {
    ibv_sge sg{local.addr(local_off), 8, local.mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = wr_id;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = raddr;
    wr.wr.atomic.rkey = remote.mr->rkey;
    wr.wr.atomic.compare_add = add_or_compare;
    wr.wr.atomic.swap = swap;
    return ibv_post_send(p.a.qp, &wr, &bad);
  };
  ibv_wc wc{};
  for (int i = 0; i < 10; ++i) {
    EXPECT(atomic(i, IBV_WR_ATOMIC_FETCH_AND_ADD, remote.addr(64), 5, 0, 8 * i) == 0, "post fetch-add");
    EXPECT(poll_one(p.a.scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD, "fetch-add %d: %s", i,
          ibv_wc_status_str(wc.status));
    uint64_t old = 0;
    std::memcpy(&old, local.p + 8 * i, 8);
    EXPECT(old == 1000 + 5 * uint64_t(i), "fetch-add %d returned %llu", i, static_cast<unsigned long long>(old));
  }
  EXPECT(*word == 1050, "after the fetch-adds the word is %llu", static_cast<unsigned long long>(*word));
  EXPECT(atomic(20, IBV_WR_ATOMIC_CMP_AND_SWP, remote.addr(64), 1050, 77, 256) == 0, "post compare-swap");
  EXPECT(poll_one(p.a.scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_COMP_SWAP, "compare-swap: %s", ibv_wc_status_str(wc.status));
  uint64_t old = 0;
  std::memcpy(&old, local.p + 256, 8);
  EXPECT(old == 1050 && *word == 77, "compare-swap (hit): old %llu now %llu", static_cast<unsigned long long>(old),
        static_cast<unsigned long long>(*word));
  EXPECT(atomic(21, IBV_WR_ATOMIC_CMP_AND_SWP, remote.addr(64), 1, 99, 264) == 0, "post compare-swap (miss)");
  EXPECT(poll_one(p.a.scq, &wc) && wc.status == IBV_WC_SUCCESS, "compare-swap (miss): %s", ibv_wc_status_str(wc.status));
  std::memcpy(&old, local.p + 264, 8);
  EXPECT(old == 77 && *word == 77, "compare-swap (miss): old %llu now %llu", static_cast<unsigned long long>(old),
        static_cast<unsigned long long>(*word));
  // A misaligned atomic is an invalid request: the responder's (mlx5 posts it), or refused at post
  // time by providers that check it there (rxe).
  const int rc = atomic(22, IBV_WR_ATOMIC_FETCH_AND_ADD, remote.addr(68), 1, 0, 272);
  EXPECT(rc == 0 || !da.mlx5, "post misaligned: %d", rc);
  if (rc == 0)
    EXPECT(poll_one(p.a.scq, &wc) && wc.status == IBV_WC_REM_INV_REQ_ERR, "misaligned atomic: %s", ibv_wc_status_str(wc.status));
  EXPECT(*word == 77, "misaligned atomic changed memory");
}

// A failing WQE: its error completion, the QP in ERR, the WQEs after it flushed.
// `also` is another status a provider other than mlx5 may report (rxe calls a bad lkey a local QP
// operation error, mlx5 a local protection error).
void expect_error_then_flush(Pair& p, ibv_wc_status want, const char* what, const Dev& d, ibv_wc_status also) {
  ibv_wc wc{};
  EXPECT(poll_one(p.a.scq, &wc) && (wc.status == want || (!d.mlx5 && wc.status == also)) && wc.wr_id == 1,
         "%s: %s (wr_id %llu), expected %s", what,
        ibv_wc_status_str(wc.status), static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(want));
  EXPECT(qp_state(p.a.qp) == IBV_QPS_ERR, "%s: requester QP in state %d, expected ERR", what, qp_state(p.a.qp));
  EXPECT(poll_one(p.a.scq, &wc) && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 2, "%s: next WR %s (wr_id %llu), expected a flush", what,
        ibv_wc_status_str(wc.status), static_cast<unsigned long long>(wc.wr_id));
}

void case_bad_keys(Dev& da, Dev& db) {
  Buffer src(da.pd, 4096, kAllAccess), dst(db.pd, 4096, kAllAccess), ro(db.pd, 4096, IBV_ACCESS_LOCAL_WRITE);
  std::memset(src.p, 0x5a, src.n);
  struct Bad {
    const char* what;
    uint64_t raddr;
    uint32_t rkey;
    uint32_t lkey;
    ibv_wc_status want, also;
  } cases[] = {
      {"wrong rkey", dst.addr(0), dst.mr->rkey ^ 0x80, src.mr->lkey, IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR},
      {"beyond the region", dst.addr(4096 - 32), dst.mr->rkey, src.mr->lkey, IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR},
      {"no remote write access", ro.addr(0), ro.mr->rkey, src.mr->lkey, IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR},
      {"wrong lkey", dst.addr(0), dst.mr->rkey, src.mr->lkey ^ 0x80, IBV_WC_LOC_PROT_ERR, IBV_WC_LOC_QP_OP_ERR},
  };
  for (const Bad& b : cases) {
    Pair p(da, db);
    EXPECT(p.ok, "connect");
    if (!p.ok) return;
    ibv_sge sg{src.addr(0), 64, b.lkey};
    EXPECT(post_write(p.a.qp, 1, &sg, 1, b.raddr, b.rkey, IBV_SEND_SIGNALED) == 0, "%s: post", b.what);
    ibv_sge ok{src.addr(0), 8, src.mr->lkey};
    EXPECT(post_write(p.a.qp, 2, &ok, 1, dst.addr(0), dst.mr->rkey, 0) == 0, "%s: post the next WR", b.what);
    expect_error_then_flush(p, b.want, b.what, da, b.also);
    EXPECT(dst.p[0] == 0 && ro.p[0] == 0 && dst.p[4095] == 0, "%s: memory was written", b.what);
  }
}

void case_post_errors(Dev& d, Dev&) {
  Ep e;
  EXPECT(make_ep(d, &e, 4, 4, 2, 16), "create QP");
  if (!e.qp) return;
  Buffer b(d.pd, 4096, kAllAccess);
  ibv_sge sg{b.addr(0), 8, b.mr->lkey};
  int rc = post_write(e.qp, 1, &sg, 1, b.addr(64), b.mr->rkey, IBV_SEND_SIGNALED);
  EXPECT(rc != 0 && (!d.mlx5 || rc == ENOMEM), "post_send in RESET returned %d", rc);
  rc = post_recv(e.qp, 1, &sg, 1);
  EXPECT(rc != 0 && (!d.mlx5 || rc == EINVAL), "post_recv in RESET returned %d", rc);
  EXPECT(connect(e.qp, d, e.qp->qp_num), "connect to itself");
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  ibv_query_qp(e.qp, &qa, IBV_QP_CAP, &qi);
  std::vector<ibv_sge> many(qi.cap.max_send_sge + 1, sg);
  rc = post_write(e.qp, 2, many.data(), static_cast<int>(many.size()), b.addr(64), b.mr->rkey, IBV_SEND_SIGNALED);
  EXPECT(rc != 0 && (!d.mlx5 || rc == ENOMEM), "post with %zu SGEs (max %u) returned %d", many.size(), qi.cap.max_send_sge, rc);
  std::vector<uint8_t> big(qi.cap.max_inline_data + 1, 1);
  ibv_sge bs{reinterpret_cast<uint64_t>(big.data()), static_cast<uint32_t>(big.size()), 0};
  rc = post_write(e.qp, 3, &bs, 1, b.addr(64), b.mr->rkey, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
  EXPECT(rc != 0, "inline of %zu bytes (max %u) was accepted", big.size(), qi.cap.max_inline_data);
  // Fill the send queue without polling. mlx5 frees a slot only when its completion is polled, so
  // the post after max_send_wr fails however fast the device is; a provider whose kernel retires
  // WRs as they complete (rxe) may take it.
  int posted = 0;
  for (uint32_t i = 0; i <= qi.cap.max_send_wr; ++i) {
    rc = post_write(e.qp, 100 + i, &sg, 1, b.addr(64), b.mr->rkey, IBV_SEND_SIGNALED);
    if (rc != 0) break;
    ++posted;
  }
  EXPECT(posted >= static_cast<int>(qi.cap.max_send_wr) && (!d.mlx5 || (rc == ENOMEM && posted == int(qi.cap.max_send_wr))),
         "send queue of %u WRs: %d posted, then %d", qi.cap.max_send_wr, posted, rc);
  ibv_wc wc{};
  int done = 0;
  while (done < posted && poll_one(e.scq, &wc)) ++done;
  EXPECT(done == posted, "%d of %d completions", done, posted);
  EXPECT(post_write(e.qp, 9, &sg, 1, b.addr(64), b.mr->rkey, IBV_SEND_SIGNALED) == 0, "post after the queue drained");
  EXPECT(poll_one(e.scq, &wc) && wc.status == IBV_WC_SUCCESS, "completion after the queue drained");
}

void case_rnr(Dev& da, Dev& db) {
  Buffer src(da.pd, 4096, kAllAccess), dst(db.pd, 4096, kAllAccess);
  ibv_sge s{src.addr(0), 32, src.mr->lkey};
  {
    Link l;
    l.rnr_retry = 1;
    l.min_rnr = 1;  // 0.01 ms
    Pair p(da, db, l);
    EXPECT(p.ok, "connect");
    if (!p.ok) return;
    EXPECT(post_write(p.a.qp, 1, &s, 1, 0, 0, IBV_SEND_SIGNALED, IBV_WR_SEND) == 0, "post send");
    ibv_wc wc{};
    EXPECT(poll_one(p.a.scq, &wc) && wc.status == IBV_WC_RNR_RETRY_EXC_ERR, "send without a receive: %s", ibv_wc_status_str(wc.status));
  }
  {
    Pair p(da, db);  // rnr_retry 7: waits for the receive
    EXPECT(p.ok, "connect");
    if (!p.ok) return;
    EXPECT(post_write(p.a.qp, 2, &s, 1, 0, 0, IBV_SEND_SIGNALED, IBV_WR_SEND) == 0, "post send");
    EXPECT(quiet(p.a.scq, 30), "the send completed before a receive was posted");
    ibv_sge r{dst.addr(0), 64, dst.mr->lkey};
    EXPECT(post_recv(p.b.qp, 3, &r, 1) == 0, "post recv");
    ibv_wc wc{};
    EXPECT(poll_one(p.a.scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2, "send after the receive: %s", ibv_wc_status_str(wc.status));
    EXPECT(poll_one(p.b.rcq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 3 && wc.byte_len == 32, "receive");
  }
}

void case_unreachable(Dev& d, Dev&) {
  Ep e;
  EXPECT(make_ep(d, &e), "create QP");
  if (!e.qp) return;
  Link l;
  l.timeout = 8;  // about 1 ms per try
  l.retry = 2;
  EXPECT(connect(e.qp, d, 0xfffff0, l), "connect to a QP number nobody has");
  Buffer b(d.pd, 4096, kAllAccess);
  ibv_sge sg{b.addr(0), 8, b.mr->lkey};
  EXPECT(post_write(e.qp, 1, &sg, 1, b.addr(64), b.mr->rkey, IBV_SEND_SIGNALED) == 0, "post");
  ibv_wc wc{};
  EXPECT(poll_one(e.scq, &wc, 10000) && wc.status == IBV_WC_RETRY_EXC_ERR, "write to nobody: %s", ibv_wc_status_str(wc.status));
}

void case_cq_overflow(Dev& d, Dev&) {
  ibv_cq* cq = ibv_create_cq(d.ctx, 3, nullptr, nullptr, 0);
  EXPECT(cq != nullptr, "create CQ");
  if (!cq) return;
  const int capacity = cq->cqe;
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = static_cast<uint32_t>(capacity + 8);
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(d.pd, &ia);
  EXPECT(qp != nullptr, "create QP");
  if (qp) {
    EXPECT(connect(qp, d, qp->qp_num), "connect");
    Buffer b(d.pd, 4096, kAllAccess);
    ibv_sge sg{b.addr(0), 8, b.mr->lkey};
    for (int i = 0; i < capacity + 4; ++i)
      EXPECT(post_write(qp, i, &sg, 1, b.addr(64), b.mr->rkey, IBV_SEND_SIGNALED) == 0, "post %d", i);
    EXPECT(wait_async(d.ctx, IBV_EVENT_CQ_ERR, g_timeout_ms), "no IBV_EVENT_CQ_ERR after %d completions into a CQ of %d", capacity + 4, capacity);
    ibv_destroy_qp(qp);
  }
  ibv_destroy_cq(cq);
}

void case_comp_channel(Dev& d, Dev&) {
  ibv_comp_channel* ch = ibv_create_comp_channel(d.ctx);
  EXPECT(ch != nullptr, "create channel");
  if (!ch) return;
  int marker = 0;
  ibv_cq* cq = ibv_create_cq(d.ctx, 16, &marker, ch, 0);
  ibv_qp_init_attr ia{};
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 4;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ibv_qp* qp = cq ? ibv_create_qp(d.pd, &ia) : nullptr;
  EXPECT(qp != nullptr && connect(qp, d, qp->qp_num), "QP on a CQ with a channel");
  if (qp) {
    Buffer b(d.pd, 4096, kAllAccess);
    EXPECT(ibv_req_notify_cq(cq, 0) == 0, "arm");
    ibv_sge sg{b.addr(0), 8, b.mr->lkey};
    EXPECT(post_write(qp, 1, &sg, 1, b.addr(64), b.mr->rkey, IBV_SEND_SIGNALED) == 0, "post");
    pollfd pf{ch->fd, POLLIN, 0};
    EXPECT(poll(&pf, 1, g_timeout_ms) == 1, "no completion event within %d ms", g_timeout_ms);
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    EXPECT(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == cq && ev_ctx == &marker, "event names the CQ and its context");
    ibv_ack_cq_events(cq, 1);
    ibv_wc wc{};
    EXPECT(poll_one(cq, &wc) && wc.status == IBV_WC_SUCCESS, "completion after the event");
    ibv_destroy_qp(qp);
  }
  if (cq) ibv_destroy_cq(cq);
  ibv_destroy_comp_channel(ch);
}

void case_resources(Dev& d, Dev&) {
  Ep e;
  EXPECT(make_ep(d, &e), "create QP");
  if (!e.qp) return;
  int rc = ibv_destroy_cq(e.scq);
  EXPECT(rc == EBUSY, "destroying a CQ a QP uses returned %d", rc);
  ibv_pd* pd = ibv_alloc_pd(d.ctx);
  std::vector<uint8_t> mem(4096);
  ibv_mr* mr = ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
  EXPECT(mr != nullptr, "register");
  rc = ibv_dealloc_pd(pd);
  EXPECT(rc == EBUSY, "deallocating a PD with a region returned %d", rc);
  if (mr) ibv_dereg_mr(mr);
  EXPECT(ibv_dealloc_pd(pd) == 0, "dealloc after the region is gone");
  errno = 0;
  EXPECT(ibv_reg_mr(d.pd, mem.data(), mem.size(), IBV_ACCESS_REMOTE_WRITE) == nullptr && errno == EINVAL,
        "remote write without local write: errno %d", errno);
  void* unmapped = mmap(nullptr, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  munmap(unmapped, 8192);
  errno = 0;
  EXPECT(ibv_reg_mr(d.pd, unmapped, 8192, IBV_ACCESS_LOCAL_WRITE) == nullptr && errno == EFAULT,
        "registering unmapped memory: errno %d", errno);
  EXPECT(ibv_reg_dmabuf_mr(d.pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE) == nullptr, "a dmabuf region from fd -1 was accepted");
}

void case_reset_reconnect(Dev& da, Dev& db) {
  // PSNs survive on the side that was not reset: a requester reset and reconnected alone starts
  // again at PSN 0, which its responder (expecting 1) takes for a duplicate: ACKed, nothing
  // written. Reset and reconnect both sides, and the next write lands.
  Fixture f(da, db, 4096, 0, 0);
  if (!f.p.ok) return;
  Pair& p = f.p;
  Buffer &src = f.a, &dst = f.b;
  ibv_sge sg{src.addr(0), 16, src.mr->lkey};
  ibv_wc wc{};
  auto write = [&](uint64_t id, uint8_t fill, size_t off) {
    std::memset(src.p, fill, 16);
    return post_write(p.a.qp, id, &sg, 1, dst.addr(off), dst.mr->rkey, IBV_SEND_SIGNALED) == 0 && poll_one(p.a.scq, &wc) &&
           wc.status == IBV_WC_SUCCESS && wc.wr_id == id;
  };
  ibv_qp_attr rst{};
  rst.qp_state = IBV_QPS_RESET;
  EXPECT(write(1, 0x11, 0), "first write: %s", ibv_wc_status_str(wc.status));
  EXPECT(ibv_modify_qp(p.a.qp, &rst, IBV_QP_STATE) == 0 && connect(p.a.qp, db, p.b.qp->qp_num), "reset and reconnect the requester");
  EXPECT(write(2, 0x22, 16), "write after reconnecting the requester alone: %s", ibv_wc_status_str(wc.status));
  EXPECT(dst.p[16] == 0, "a write with a PSN the responder already saw landed (%x)", dst.p[16]);
  EXPECT(ibv_modify_qp(p.a.qp, &rst, IBV_QP_STATE) == 0 && ibv_modify_qp(p.b.qp, &rst, IBV_QP_STATE) == 0 &&
             connect(p.a.qp, db, p.b.qp->qp_num) && connect(p.b.qp, da, p.a.qp->qp_num),
         "reset and reconnect both sides");
  EXPECT(write(3, 0x33, 32), "write after reconnecting both: %s", ibv_wc_status_str(wc.status));
  EXPECT(dst.p[0] == 0x11 && dst.p[32] == 0x33, "payloads %x %x", dst.p[0], dst.p[32]);
}

struct Case {
  const char* name;
  void (*fn)(Dev&, Dev&);
};
const Case kCases[] = {{"device_query", case_device_query},
                       {"qp_state_machine", case_qp_state_machine},
                       {"modify_masks", case_modify_masks},
                       {"rdma_write", case_rdma_write},
                       {"rdma_read", case_rdma_read},
                       {"send_recv", case_send_recv},
                       {"write_imm", case_write_imm},
                       {"atomics", case_atomics},
                       {"bad_keys", case_bad_keys},
                       {"post_errors", case_post_errors},
                       {"rnr", case_rnr},
                       {"unreachable", case_unreachable},
                       {"cq_overflow", case_cq_overflow},
                       {"comp_channel", case_comp_channel},
                       {"resources", case_resources},
                       {"reset_reconnect", case_reset_reconnect}};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> want_devs, want_cases;
  bool cross = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gicomm-verbs-suite: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--device") {
      want_devs.push_back(value("--device"));
    } else if (a == "--case") {
      want_cases.push_back(value("--case"));
    } else if (a == "--gid-index") {
      g_gid_index = std::atoi(value("--gid-index").c_str());
    } else if (a == "--timeout-ms") {
      g_timeout_ms = std::atoi(value("--timeout-ms").c_str());
    } else if (a == "--cross") {
      cross = true;
    } else if (a == "--list") {
      for (const Case& c : kCases) std::printf("%s\n", c.name);
      return 0;
    } else {
      std::fprintf(stderr,
                   "gicomm-verbs-suite: unknown argument '%s' (allowed: --device NAME, --case NAME, --gid-index N, "
                   "--timeout-ms N, --cross, --list)\n",
                   a.c_str());
      return 2;
    }
  }
  for (const std::string& c : want_cases) {
    bool known = false;
    for (const Case& k : kCases) known = known || c == k.name;
    if (!known) {
      std::fprintf(stderr, "gicomm-verbs-suite: no case '%s' (--list shows them)\n", c.c_str());
      return 2;
    }
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    std::fprintf(stderr, "gicomm-verbs-suite: no RDMA device (ibv_get_device_list: %d)\n", n);
    if (list) ibv_free_device_list(list);
    return 77;
  }
  std::vector<ibv_device*> devs;
  for (int i = 0; i < n; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    bool take = want_devs.empty();
    for (const std::string& w : want_devs) take = take || w == name;
    if (take) devs.push_back(list[i]);
  }
  if (devs.size() != (want_devs.empty() ? size_t(n) : want_devs.size())) {
    std::fprintf(stderr, "gicomm-verbs-suite: a requested device is not present\n");
    ibv_free_device_list(list);
    return 2;
  }
  int ran = 0;
  // Loopback on each device; with --cross, also between consecutive devices of the same link layer.
  std::vector<std::pair<ibv_device*, ibv_device*>> pairs;
  for (ibv_device* d : devs) pairs.push_back({d, d});
  if (cross)
    for (size_t i = 0; i + 1 < devs.size(); ++i) pairs.push_back({devs[i], devs[i + 1]});
  for (const auto& pr : pairs) {
    Dev a, b;
    if (!open_dev(pr.first, &a) || (pr.second != pr.first && !open_dev(pr.second, &b))) {
      std::fprintf(stderr, "FAIL cannot open %s: %s\n", ibv_get_device_name(pr.first), std::strerror(errno));
      ++expect_failures();
      continue;
    }
    Dev& db = pr.second == pr.first ? a : b;
    if (db.port.link_layer != a.port.link_layer) {
      std::printf("skip %s <-> %s: different link layers\n", a.name.c_str(), db.name.c_str());
      close_dev(&a);
      close_dev(&b);
      continue;
    }
    for (const Case& c : kCases) {
      bool take = want_cases.empty();
      for (const std::string& w : want_cases) take = take || w == c.name;
      if (!take) continue;
      expect_label() = a.name + (pr.second != pr.first ? "->" + db.name : "") + " " + c.name;
      const int before = expect_failures();
      const auto t0 = Clock::now();
      c.fn(a, db);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      std::printf("%s %s (%.1f ms)\n", expect_failures() == before ? "ok  " : "FAIL", expect_label().c_str(), ms);
      std::fflush(stdout);
      ++ran;
    }
    close_dev(&a);
    if (pr.second != pr.first) close_dev(&b);
  }
  ibv_free_device_list(list);
  std::printf("gicomm-verbs-suite: %d cases, %d failed checks\n", ran, expect_failures());
  return expect_failures() == 0 ? 0 : 1;
}
