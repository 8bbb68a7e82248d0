// QPs between two processes over the emulated rdma-core's wire, through the verbs API only: the
// parent (initiator) and a forked child (target) each open the emulation on their own (forked
// before either touches it, so each is its own emulated host) and connect RC QPs by LID (IB) or
// GID (RoCE). Every opcode with its payload checked at the other side (the target answers the
// initiator's questions over a socketpair: its memory, its completions, its QP state), then the
// failures a fabric reports: a bad rkey (REM_ACCESS at the initiator, the target QP in ERR with
// QP_ACCESS_ERR), a receiver not ready that becomes ready (RNR retried), and a peer that has gone
// away (RETRY_EXC after the transport retries). With --slow-requester: only a requester slower to
// issue than its transport timer (answers it has not read yet are not lost).
//
// Exit 0 pass, 1 fail, 77 no emulated device.
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "expect.h"

using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMem = 4 << 20;
constexpr uint32_t kRecvBytes = 4096;

struct Address {
  uint16_t lid;
  uint8_t gid[16];
  uint32_t qpn_a, qpn_b;  // A receives from the SRQ; B has its own receive queue
  uint64_t addr;
  uint32_t rkey;
};

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq *scq = nullptr, *rcq = nullptr;
  ibv_srq* srq = nullptr;
  ibv_qp *a = nullptr, *b = nullptr;
  uint8_t* mem = nullptr;
  ibv_mr* mr = nullptr;
  ibv_port_attr port{};
  ibv_gid gid{};
  uint64_t posted = 0;
};

bool open_side(Side& s) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (n < 1) return false;
  s.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!s.ctx) return false;
  ibv_query_port(s.ctx, 1, &s.port);
  ibv_query_gid(s.ctx, 1, s.port.link_layer == IBV_LINK_LAYER_ETHERNET ? 3 : 0, &s.gid);  // RoCE v2 IPv4 GID
  s.pd = ibv_alloc_pd(s.ctx);
  s.scq = ibv_create_cq(s.ctx, 256, nullptr, nullptr, 0);
  s.rcq = ibv_create_cq(s.ctx, 256, nullptr, nullptr, 0);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 64;
  sa.attr.max_sge = 1;
  s.srq = ibv_create_srq(s.pd, &sa);
  s.mem = static_cast<uint8_t*>(std::aligned_alloc(4096, kMem));
  std::memset(s.mem, 0, kMem);
  s.mr = ibv_reg_mr(s.pd, s.mem, kMem,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  auto make_qp = [&](ibv_srq* srq) {
    ibv_qp_init_attr qa{};
    qa.send_cq = s.scq;
    qa.recv_cq = s.rcq;
    qa.srq = srq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = 64;
    qa.cap.max_recv_wr = 16;
    qa.cap.max_send_sge = 3;
    qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = 64;
    ibv_qp* qp = ibv_create_qp(s.pd, &qa);
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
    if (qp) ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    return qp;
  };
  s.a = make_qp(s.srq);
  s.b = make_qp(nullptr);
  return s.pd && s.scq && s.rcq && s.srq && s.mr && s.a && s.b;
}

Address address_of(const Side& s) {
  Address a{};
  a.lid = s.port.lid;
  std::memcpy(a.gid, s.gid.raw, 16);
  a.qpn_a = s.a->qp_num;
  a.qpn_b = s.b->qp_num;
  a.addr = reinterpret_cast<uint64_t>(s.mem);
  a.rkey = s.mr->rkey;
  return a;
}

bool connect_qp(Side& s, ibv_qp* qp, const Address& peer, uint32_t peer_qpn, uint8_t retry_cnt, uint8_t timeout,
                uint8_t rnr_retry) {
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = IBV_MTU_1024;  // a 1 MiB read is 1024 packets (PSNs)
  at.dest_qp_num = peer_qpn;
  at.rq_psn = 0;
  at.max_dest_rd_atomic = 4;
  at.min_rnr_timer = 1;  // 10 us
  at.ah_attr.port_num = 1;
  if (s.port.link_layer == IBV_LINK_LAYER_ETHERNET) {
    at.ah_attr.is_global = 1;
    std::memcpy(at.ah_attr.grh.dgid.raw, peer.gid, 16);
    at.ah_attr.grh.sgid_index = 3;
    at.ah_attr.grh.hop_limit = 64;
  } else {
    at.ah_attr.dlid = peer.lid;
  }
  if (ibv_modify_qp(qp, &at,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                        IBV_QP_MIN_RNR_TIMER) != 0)
    return false;
  at = {};
  at.qp_state = IBV_QPS_RTS;
  at.timeout = timeout;
  at.retry_cnt = retry_cnt;
  at.rnr_retry = rnr_retry;
  at.sq_psn = 0;
  at.max_rd_atomic = 4;
  return ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                    IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

bool poll_one(ibv_cq* cq, ibv_wc* wc, double seconds) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline) {
    const int n = ibv_poll_cq(cq, 1, wc);
    if (n == 1) return true;
    if (n < 0) return false;
    std::this_thread::yield();
  }
  return false;
}

// ---- the control channel ---------------------------------------------------------------------------
enum Cmd : uint8_t { kPostSrq = 'P', kPostRq = 'Q', kRead = 'R', kRecvCqe = 'C', kState = 'S', kEvent = 'E', kExit = 'X' };

struct Msg {
  uint8_t cmd;
  uint64_t a, b;
};

bool send_all(int fd, const void* p, size_t n) {
  const uint8_t* c = static_cast<const uint8_t*>(p);
  while (n) {
    const ssize_t w = write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}
bool recv_all(int fd, void* p, size_t n) {
  uint8_t* c = static_cast<uint8_t*>(p);
  while (n) {
    const ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

struct RecvInfo {
  int ok, status, opcode, flags;
  uint32_t byte_len, imm, src_qp, qp_num;
};

void serve(Side& s, int fd) {
  Msg m;
  while (recv_all(fd, &m, sizeof m)) {
    if (m.cmd == kPostSrq || m.cmd == kPostRq) {
      // a receives of kRecvBytes at offset b + i * kRecvBytes
      int rc = 0;
      for (uint64_t i = 0; i < m.a && rc == 0; ++i) {
        ibv_sge sge{reinterpret_cast<uint64_t>(s.mem + m.b + i * kRecvBytes), kRecvBytes, s.mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = 1000 + s.posted++;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        rc = m.cmd == kPostSrq ? ibv_post_srq_recv(s.srq, &wr, &bad) : ibv_post_recv(s.b, &wr, &bad);
      }
      send_all(fd, &rc, sizeof rc);
    } else if (m.cmd == kRead) {
      send_all(fd, s.mem + m.a, m.b);
    } else if (m.cmd == kRecvCqe) {
      ibv_wc wc{};
      RecvInfo ri{};
      ri.ok = poll_one(s.rcq, &wc, 2.0);
      ri.status = wc.status;
      ri.opcode = wc.opcode;
      ri.flags = wc.wc_flags;
      ri.byte_len = wc.byte_len;
      ri.imm = be32toh(wc.imm_data);
      ri.src_qp = wc.src_qp;
      ri.qp_num = wc.qp_num;
      send_all(fd, &ri, sizeof ri);
    } else if (m.cmd == kState) {
      ibv_qp_attr at{};
      ibv_qp_init_attr ia{};
      ibv_query_qp(m.a == 0 ? s.a : s.b, &at, IBV_QP_STATE, &ia);
      const int st = at.qp_state;
      send_all(fd, &st, sizeof st);
    } else if (m.cmd == kEvent) {
      pollfd p{s.ctx->async_fd, POLLIN, 0};
      int type = -1;
      if (poll(&p, 1, 1000) == 1) {
        ibv_async_event ev{};
        if (ibv_get_async_event(s.ctx, &ev) == 0) {
          type = ev.event_type;
          ibv_ack_async_event(&ev);
        }
      }
      send_all(fd, &type, sizeof type);
    } else {
      break;
    }
  }
}

// The initiator's view of the target.
struct Target {
  int fd;
  Address addr;
  template <class T>
  T ask(Cmd c, uint64_t a = 0, uint64_t b = 0) {
    Msg m{c, a, b};
    T t{};
    if (!send_all(fd, &m, sizeof m) || !recv_all(fd, &t, sizeof t)) std::fprintf(stderr, "wire_test: the target stopped answering\n");
    return t;
  }
  std::vector<uint8_t> read(uint64_t off, size_t n) {
    Msg m{kRead, off, n};
    std::vector<uint8_t> v(n);
    if (!send_all(fd, &m, sizeof m) || !recv_all(fd, v.data(), n)) v.clear();
    return v;
  }
};

struct Post {
  ibv_qp* qp;
  Side& s;
  // Posts one signaled WR and waits for its completion; returns the completion status.
  int run(ibv_send_wr& wr, double seconds = 5.0) {
    wr.send_flags |= IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp, &wr, &bad) != 0) return -1;
    ibv_wc wc{};
    if (!poll_one(s.scq, &wc, seconds)) return -2;
    return wc.status;
  }
};

int initiator(Side& s, Target& t) {
  const uint64_t R = t.addr.addr;
  const uint32_t rkey = t.addr.rkey;
  Post p{s.a, s};
  for (size_t i = 0; i < kMem; ++i) s.mem[i] = static_cast<uint8_t>(i * 13 + 7);
  // 1. RDMA write from three SGEs.
  {
    expect_label() = "write";
    ibv_sge sg[3] = {{reinterpret_cast<uint64_t>(s.mem), 100, s.mr->lkey},
                     {reinterpret_cast<uint64_t>(s.mem + 1000), 200, s.mr->lkey},
                     {reinterpret_cast<uint64_t>(s.mem + 5000), 300, s.mr->lkey}};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = sg;
    wr.num_sge = 3;
    wr.wr.rdma.remote_addr = R + 65536;
    wr.wr.rdma.rkey = rkey;
    EXPECT(p.run(wr) == IBV_WC_SUCCESS, "write completes");
    std::vector<uint8_t> want(s.mem, s.mem + 100);
    want.insert(want.end(), s.mem + 1000, s.mem + 1200);
    want.insert(want.end(), s.mem + 5000, s.mem + 5300);
    EXPECT(t.read(65536, 600) == want, "the 600 gathered bytes at the target");
  }
  // 2. Inline and zero-length writes.
  {
    expect_label() = "inline write";
    uint64_t v = 0x1122334455667788ull;
    ibv_sge sg{reinterpret_cast<uint64_t>(&v), 8, 0};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_INLINE;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = R + 70000;
    wr.wr.rdma.rkey = rkey;
    EXPECT(p.run(wr) == IBV_WC_SUCCESS, "inline write completes");
    const auto got = t.read(70000, 8);
    EXPECT(got.size() == 8 && std::memcmp(got.data(), &v, 8) == 0, "8 inline bytes at the target");
    ibv_send_wr z{};
    z.opcode = IBV_WR_RDMA_WRITE;
    z.wr.rdma.remote_addr = R;
    z.wr.rdma.rkey = rkey;
    EXPECT(p.run(z) == IBV_WC_SUCCESS, "zero-length write completes");
  }
  // 3. A 1 MiB read (1024 packets at MTU 1024).
  {
    expect_label() = "read";
    const auto remote = t.read(0, 1 << 20);
    ibv_sge sg{reinterpret_cast<uint64_t>(s.mem + (2 << 20)), 1 << 20, s.mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_READ;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = R;
    wr.wr.rdma.rkey = rkey;
    EXPECT(p.run(wr) == IBV_WC_SUCCESS, "read completes");
    EXPECT(remote.size() == (1u << 20) && std::memcmp(remote.data(), s.mem + (2 << 20), 1 << 20) == 0, "1 MiB read back");
  }
  // 4. A 1 MiB write (the wire carries it in pieces).
  {
    expect_label() = "large write";
    ibv_sge sg{reinterpret_cast<uint64_t>(s.mem), 1 << 20, s.mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = R + (1 << 20);
    wr.wr.rdma.rkey = rkey;
    EXPECT(p.run(wr) == IBV_WC_SUCCESS, "1 MiB write completes");
    EXPECT(t.read(1 << 20, 1 << 20) == std::vector<uint8_t>(s.mem, s.mem + (1 << 20)), "1 MiB at the target");
  }
  // 5. Atomics: fetch-add, compare-swap hit and miss, on the target's word at 8192.
  {
    expect_label() = "atomics";
    uint64_t* old = reinterpret_cast<uint64_t*>(s.mem + 300000);
    ibv_sge sg{reinterpret_cast<uint64_t>(old), 8, s.mr->lkey};
    const auto word = [&] {
      const auto v = t.read(8192, 8);
      uint64_t x = 0;
      if (v.size() == 8) std::memcpy(&x, v.data(), 8);
      return x;
    };
    const uint64_t w0 = word();
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.wr.atomic.remote_addr = R + 8192;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = 9;
    EXPECT(p.run(wr) == IBV_WC_SUCCESS && *old == w0 && word() == w0 + 9, "fetch-add: old %llu, now %llu",
           static_cast<unsigned long long>(*old), static_cast<unsigned long long>(word()));
    wr = {};
    wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.wr.atomic.remote_addr = R + 8192;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = w0 + 9;
    wr.wr.atomic.swap = 4242;
    EXPECT(p.run(wr) == IBV_WC_SUCCESS && *old == w0 + 9 && word() == 4242, "compare-swap hit");
    wr.wr.atomic.compare_add = 1;
    wr.wr.atomic.swap = 7;
    EXPECT(p.run(wr) == IBV_WC_SUCCESS && *old == 4242 && word() == 4242, "compare-swap miss");
  }
  // 6. Send and send with immediate into the target's SRQ; write with immediate.
  {
    expect_label() = "send";
    EXPECT(t.ask<int>(kPostSrq, 3, 1 << 21) == 0, "the target posts three receives on its SRQ");
    ibv_sge sg{reinterpret_cast<uint64_t>(s.mem + 4096), 3000, s.mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    EXPECT(p.run(wr) == IBV_WC_SUCCESS, "send completes");
    auto ri = t.ask<RecvInfo>(kRecvCqe);
    EXPECT(ri.ok && ri.status == IBV_WC_SUCCESS && ri.opcode == IBV_WC_RECV && ri.byte_len == 3000 &&
               ri.src_qp == s.a->qp_num && ri.qp_num == t.addr.qpn_a,
           "receive completion: ok %d status %d opcode %d bytes %u src %u", ri.ok, ri.status, ri.opcode, ri.byte_len, ri.src_qp);
    EXPECT(t.read(1 << 21, 3000) == std::vector<uint8_t>(s.mem + 4096, s.mem + 7096), "the sent bytes in the receive buffer");
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htobe32(0xabcdef);
    EXPECT(p.run(wr) == IBV_WC_SUCCESS, "send with immediate completes");
    ri = t.ask<RecvInfo>(kRecvCqe);
    EXPECT(ri.ok && ri.status == IBV_WC_SUCCESS && (ri.flags & IBV_WC_WITH_IMM) && ri.imm == 0xabcdef, "immediate 0x%x", ri.imm);
    wr = {};
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.imm_data = htobe32(77);
    wr.wr.rdma.remote_addr = R + 200000;
    wr.wr.rdma.rkey = rkey;
    EXPECT(p.run(wr) == IBV_WC_SUCCESS, "write with immediate completes");
    ri = t.ask<RecvInfo>(kRecvCqe);
    EXPECT(ri.ok && ri.opcode == IBV_WC_RECV_RDMA_WITH_IMM && ri.imm == 77 && ri.byte_len == 3000, "write-with-immediate completion");
    EXPECT(t.read(200000, 3000) == std::vector<uint8_t>(s.mem + 4096, s.mem + 7096), "write-with-immediate payload");
  }
  // 7. Receiver not ready, then ready: the send waits (RNR retries), then completes.
  {
    expect_label() = "rnr";
    ibv_sge sg{reinterpret_cast<uint64_t>(s.mem), 64, s.mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* bad = nullptr;
    EXPECT(ibv_post_send(s.a, &wr, &bad) == 0, "post the send");
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    ibv_wc wc{};
    EXPECT(ibv_poll_cq(s.scq, 1, &wc) == 0, "no completion while no receive is posted");
    EXPECT(t.ask<int>(kPostSrq, 1, (1 << 21) + 4 * kRecvBytes) == 0, "the target posts a receive");
    EXPECT(poll_one(s.scq, &wc, 5.0) && wc.status == IBV_WC_SUCCESS, "the send completes once the receive is there (status %d)", wc.status);
    const auto ri = t.ask<RecvInfo>(kRecvCqe);
    EXPECT(ri.ok && ri.byte_len == 64, "and the target received it");
  }
  // 8. A bad rkey: REM_ACCESS_ERR here, the target's QP in ERR with QP_ACCESS_ERR.
  {
    expect_label() = "bad rkey";
    ibv_sge sg{reinterpret_cast<uint64_t>(s.mem), 64, s.mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = R;
    wr.wr.rdma.rkey = rkey ^ 0x7700;
    EXPECT(p.run(wr) == IBV_WC_REM_ACCESS_ERR, "REM_ACCESS_ERR");
    EXPECT(t.ask<int>(kState, 0) == IBV_QPS_ERR, "the target's QP is in ERR");
    EXPECT(t.ask<int>(kEvent) == IBV_EVENT_QP_ACCESS_ERR, "the target got QP_ACCESS_ERR");
    wr.wr.rdma.rkey = rkey;
    EXPECT(p.run(wr) == IBV_WC_WR_FLUSH_ERR, "the next WR is flushed");
  }
  // 9. QP B (the target's own receive queue): a send, then the target goes away and a write runs
  //    out of transport retries.
  {
    expect_label() = "peer gone";
    Post pb{s.b, s};
    EXPECT(t.ask<int>(kPostRq, 1, 3 << 20) == 0, "the target posts a receive on QP B");
    ibv_sge sg{reinterpret_cast<uint64_t>(s.mem), 128, s.mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_SEND;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    EXPECT(pb.run(wr) == IBV_WC_SUCCESS, "send on QP B");
    const auto ri = t.ask<RecvInfo>(kRecvCqe);
    EXPECT(ri.ok && ri.qp_num == t.addr.qpn_b && ri.byte_len == 128, "received on QP B's own queue");
    Msg m{kExit, 0, 0};
    send_all(t.fd, &m, sizeof m);
    int status = 0;
    wait(&status);
    wr = {};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = R;
    wr.wr.rdma.rkey = rkey;
    const auto t0 = Clock::now();
    const int st = pb.run(wr, 10.0);
    const double s_taken = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT(st == IBV_WC_RETRY_EXC_ERR && s_taken < 5.0, "RETRY_EXC_ERR after the retries (status %d after %.2f s)", st, s_taken);
  }
  return expect_failures();
}

// A slow requester (run with GICOMM_EMU_TEST_SLOW_SEND_US, every request 10 ms or so to send):
// 30 writes posted at once take longer to issue than QP B's transport timer (100 ms), while the
// target answers each at once. Answers that arrived while the requester was busy issuing are not
// lost ones: every write completes, none runs out of retries, and the data is at the target.
int slow_requester(Side& s, Target& t) {
  expect_label() = "slow requester";
  constexpr int kWrites = 30;
  std::vector<uint64_t> vals(kWrites);
  for (int i = 0; i < kWrites; ++i) vals[i] = 0xabc0000000000000ull + static_cast<uint64_t>(i) * 0x10001;
  std::memcpy(s.mem, vals.data(), kWrites * 8);
  std::vector<ibv_sge> sg(kWrites);
  std::vector<ibv_send_wr> wr(kWrites);
  for (int i = 0; i < kWrites; ++i) {
    sg[i] = {reinterpret_cast<uint64_t>(s.mem + 8 * i), 8, s.mr->lkey};
    wr[i].opcode = IBV_WR_RDMA_WRITE;
    wr[i].send_flags = IBV_SEND_SIGNALED;
    wr[i].sg_list = &sg[i];
    wr[i].num_sge = 1;
    wr[i].wr.rdma.remote_addr = t.addr.addr + 200000 + 8 * i;
    wr[i].wr.rdma.rkey = t.addr.rkey;
    wr[i].next = i + 1 < kWrites ? &wr[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  const auto t0 = Clock::now();
  EXPECT(ibv_post_send(s.b, wr.data(), &bad) == 0, "30 writes posted on QP B");
  int ok = 0, other = -1;
  for (int i = 0; i < kWrites; ++i) {
    ibv_wc wc{};
    if (!poll_one(s.scq, &wc, 20.0)) break;
    if (wc.status == IBV_WC_SUCCESS) ++ok;
    else if (other < 0) other = wc.status;
  }
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT(ok == kWrites, "every write completes (%d of %d successful, first other status %d, %.2f s)", ok, kWrites, other, took);
  EXPECT(took > 0.1, "issuing took longer than the transport timer (%.2f s): the case tests what it says", took);
  std::vector<uint8_t> want(reinterpret_cast<uint8_t*>(vals.data()), reinterpret_cast<uint8_t*>(vals.data()) + kWrites * 8);
  EXPECT(t.read(200000, kWrites * 8) == want, "the 30 values at the target");
  Msg m{kExit, 0, 0};
  send_all(t.fd, &m, sizeof m);
  int status = 0;
  wait(&status);
  return expect_failures();
}

}  // namespace

int main(int argc, char** argv) {
  const bool slow = argc > 1 && std::strcmp(argv[1], "--slow-requester") == 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  const pid_t child = fork();
  const bool target = child == 0;
  const int fd = sv[target ? 1 : 0];
  close(sv[target ? 0 : 1]);
  Side s;
  if (!open_side(s)) {
    std::printf("wire_test: no emulated device\n");
    return 77;
  }
  const Address mine = address_of(s);
  Address theirs{};
  if (!send_all(fd, &mine, sizeof mine) || !recv_all(fd, &theirs, sizeof theirs)) return 1;
  // QP A: ordinary RC parameters; QP B: 3 retries of 2^10 * 4 us, so a vanished peer fails fast.
  if (!connect_qp(s, s.a, theirs, theirs.qpn_a, 7, 14, 7) || !connect_qp(s, s.b, theirs, theirs.qpn_b, 3, 10, 7)) {
    std::fprintf(stderr, "wire_test: connecting failed (errno %d)\n", errno);
    return 1;
  }
  char go = 'g';
  if (!send_all(fd, &go, 1) || !recv_all(fd, &go, 1)) return 1;
  if (target) {
    serve(s, fd);
    std::_Exit(0);
  }
  Target t{fd, theirs};
  const int fails = slow ? slow_requester(s, t) : initiator(s, t);
  std::printf("wire_test: %s (%s, two processes)\n", fails ? "FAILED" : "ok",
              s.port.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB");
  return fails ? 1 : 0;
}
