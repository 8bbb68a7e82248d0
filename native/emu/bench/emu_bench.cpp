// gicomm-emu-bench: the emulated rdma-core's cost per operation beside the softnic cpu engine's,
// measured in one run on the same host (run it through gicomm-emu-run). The emulation is for
// correctness; the softnic stays the performance model NIC. Every number is labelled with what
// produced it and is no NIC number.
//
//   gicomm-emu-bench [--ops N] [--batch B] [--timeout-ms MS]
//
// Three paths post 8-byte inline RDMA writes into host memory, a loopback QP, one engine thread:
//   softnic-cpu     HostSq on a softnic QP, the softnic cpu engine (the model NIC)
//   emulated-devx   the DEVX backend's QP on the emulated device, HostSq through the UAR
//   emulated-verbs  ibv_post_send / ibv_poll_cq on the emulated device (the provider builds the WQEs)
// Metrics per path: one_op_ns (post, ring, wait for its completion; N times; median and 10th/90th
// percentiles) and batched_ns_per_op (B WQEs per doorbell, the last signaled; mean over N ops).
// Output: one JSON object per line on stdout; a table on stderr.
#include <infiniband/verbs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gicomm/mlx5/host_post.h"
#include "gicomm/mlx5dev/devx.h"
#include "gicomm/softnic/softnic.h"

namespace m = gicomm::mlx5;
namespace sn = gicomm::softnic;
namespace dx = gicomm::mlx5dev;
using Clock = std::chrono::steady_clock;

namespace {

int g_timeout_ms = 5000;

double ns_since(Clock::time_point t0) { return std::chrono::duration<double, std::nano>(Clock::now() - t0).count(); }

void spin_until(const std::function<bool()>& done, const char* what) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(g_timeout_ms);
  while (!done())
    if (Clock::now() > deadline) throw std::runtime_error(std::string("timeout waiting for ") + what);
}

struct Stats {
  double median, p10, p90;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
  return Stats{at(0.5), at(0.1), at(0.9)};
}

void emit(const std::string& path, const std::string& provider, const char* metric, double value, const Stats* s, int n) {
  std::printf("{\"path\": \"%s\", \"provider\": \"%s\", \"metric\": \"%s\", \"value\": %.1f", path.c_str(), provider.c_str(), metric,
              value);
  if (s) std::printf(", \"p10\": %.1f, \"p90\": %.1f", s->p10, s->p90);
  std::printf(", \"n\": %d, \"unit\": \"ns\"}\n", n);
  std::fflush(stdout);
  std::fprintf(stderr, "  %-15s %-20s %10.1f ns%s\n", path.c_str(), metric, value,
               s ? (" (p10 " + std::to_string(static_cast<int>(s->p10)) + ", p90 " + std::to_string(static_cast<int>(s->p90)) + ")").c_str() : "");
}

// A QP posted through HostSq whose collapsed CQE the caller polls: the softnic's and DEVX's.
struct MlxPath {
  m::HostSq sq;
  const m::Cqe64* cqe;
  uint64_t raddr;
  uint32_t rkey;
  bool reached(uint16_t counter) const {
    const uint32_t tail = __atomic_load_n(&cqe->w[15], __ATOMIC_ACQUIRE);
    const uint8_t op = m::op_own_opcode(m::tail_op_own(tail));
    if (op == m::kCqeReqErr) throw std::runtime_error("error CQE");
    return op == m::kCqeReq && m::tail_wqe_counter(tail) == counter;
  }
  void post(bool signaled, uint64_t value) {
    m::WqeImage img;
    const uint32_t ds = m::build_rdma_write_inline_u64(img, sq.header(signaled), raddr, rkey, value);
    sq.push(img, ds);
  }
};

void measure_mlx(const std::string& path, const std::string& provider, MlxPath& p, int ops, int batch) {
  std::vector<double> lat;
  for (int i = 0; i < ops; ++i) {
    const auto t0 = Clock::now();
    p.post(true, static_cast<uint64_t>(i));
    p.sq.ring();
    const uint16_t want = static_cast<uint16_t>(p.sq.pi() - 1);
    spin_until([&] { return p.reached(want); }, "a one-op CQE");
    lat.push_back(ns_since(t0));
  }
  const Stats s = stats(lat);
  emit(path, provider, "one_op_ns", s.median, &s, ops);
  const auto t0 = Clock::now();
  int done = 0;
  while (done < ops) {
    for (int b = 0; b < batch; ++b) p.post(b == batch - 1, static_cast<uint64_t>(done + b));
    p.sq.ring();
    const uint16_t want = static_cast<uint16_t>(p.sq.pi() - 1);
    spin_until([&] { return p.reached(want); }, "a batch CQE");
    done += batch;
  }
  emit(path, provider, "batched_ns_per_op", ns_since(t0) / done, nullptr, done);
}

void softnic_path(int ops, int batch) {
  sn::SoftNic nic;
  std::vector<uint64_t> dst(64, 0);
  const auto mr = nic.register_mr(dst.data(), dst.size() * 8, sn::kAccessRemoteWrite);
  sn::QueueConfig qc;
  qc.sq_wqebbs = 1024;
  qc.collapsed_cq = true;
  qc.cq_entries = 1;
  const uint32_t qp = nic.create_qp(qc);
  sn::CpuEngine engine(nic, 1);
  engine.start();
  MlxPath p{m::HostSq(nic.sq(qp)), nic.cq(qp).buf, mr.addr, mr.rkey};
  measure_mlx("softnic-cpu", "softnic", p, ops, batch);
  engine.stop();
}

void devx_path(int ops, int batch, const std::string& provider) {
  std::string reason;
  auto dev = dx::DevxDevice::open("", &reason);
  if (!dev || !dev->alloc_uar(&reason)) throw std::runtime_error("DEVX: " + reason);
  constexpr size_t kSq = 1024 * 64, kBytes = kSq + 4096;
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(4096, kBytes));
  std::memset(buf, 0, kBytes);
  m::init_cqe(*reinterpret_cast<m::Cqe64*>(buf + kSq));
  std::vector<uint64_t> dst(64, 0);
  dx::Umem umem;
  dx::Cq cq;
  dx::Qp qp;
  dx::QpAddress self;
  uint32_t lkey = 0, rkey = 0;
  const dx::ConnectParams params;
  if (!dev->register_umem(buf, kBytes, &umem, &reason) || !dev->create_cq(umem, kSq, kSq + 2048, &cq, &reason) ||
      !dev->create_rc_qp(umem, 0, 10, umem, kSq + 2112, cq.cqn, &qp, &reason) || !dev->local_address(qp, params, &self, &reason) ||
      !dev->connect_rc_qp(qp, self, params, &reason) || !dev->register_mr(dst.data(), dst.size() * 8, &lkey, &rkey, &reason))
    throw std::runtime_error("DEVX: " + reason);
  m::SqDesc d;
  d.buf = buf;
  d.wqe_cnt = 1024;
  d.qpn = qp.qpn;
  d.dbrec = reinterpret_cast<uint32_t*>(buf + kSq + 2112);
  d.doorbell = static_cast<uint64_t*>(dev->uar_host_doorbell());
  MlxPath p{m::HostSq(d), reinterpret_cast<const m::Cqe64*>(buf + kSq), reinterpret_cast<uint64_t>(dst.data()), rkey};
  measure_mlx("emulated-devx", provider, p, ops, batch);
  dx::DevxDevice::destroy(&qp);
  dx::DevxDevice::destroy(&cq);
  dx::DevxDevice::release(&umem);
  std::free(buf);
}

void verbs_path(int ops, int batch, const std::string& provider) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) throw std::runtime_error("verbs: no device");
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
  ibv_cq* cq = pd ? ibv_create_cq(ctx, 1024, nullptr, nullptr, 0) : nullptr;
  ibv_port_attr port{};
  ibv_gid gid{};
  if (!cq || ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, 0, &gid)) throw std::runtime_error("verbs: set-up");
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 512;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = 8;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  std::vector<uint64_t> dst(64, 0);
  ibv_mr* mr = ibv_reg_mr(pd, dst.data(), dst.size() * 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!qp || !mr) throw std::runtime_error("verbs: QP or MR");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  bool ok = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = qp->qp_num;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = 1;
  a.ah_attr.dlid = port.lid;
  a.ah_attr.is_global = port.link_layer == IBV_LINK_LAYER_ETHERNET;
  a.ah_attr.grh.dgid = gid;
  ok = ok && ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  ok = ok && ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                       IBV_QP_MAX_QP_RD_ATOMIC) == 0;
  if (!ok) throw std::runtime_error("verbs: connect");
  uint64_t value = 0;
  ibv_sge sge{reinterpret_cast<uint64_t>(&value), 8, 0};
  auto post = [&](int count) {
    std::vector<ibv_send_wr> wr(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
      wr[i] = {};
      wr[i].sg_list = &sge;
      wr[i].num_sge = 1;
      wr[i].opcode = IBV_WR_RDMA_WRITE;
      wr[i].send_flags = IBV_SEND_INLINE | (i == count - 1 ? IBV_SEND_SIGNALED : 0);
      wr[i].wr.rdma.remote_addr = reinterpret_cast<uint64_t>(&dst[i % 64]);
      wr[i].wr.rdma.rkey = mr->rkey;
      wr[i].next = i + 1 < count ? &wr[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp, wr.data(), &bad)) throw std::runtime_error("verbs: post");
    ibv_wc wc{};
    spin_until([&] { return ibv_poll_cq(cq, 1, &wc) == 1; }, "a verbs completion");
    if (wc.status != IBV_WC_SUCCESS) throw std::runtime_error(std::string("verbs: ") + ibv_wc_status_str(wc.status));
  };
  std::vector<double> lat;
  for (int i = 0; i < ops; ++i) {
    const auto t0 = Clock::now();
    post(1);
    lat.push_back(ns_since(t0));
  }
  const Stats s = stats(lat);
  emit("emulated-verbs", provider, "one_op_ns", s.median, &s, ops);
  const auto t0 = Clock::now();
  int done = 0;
  const int chain = std::min(batch, 256);
  while (done < ops) {
    post(chain);
    done += chain;
  }
  emit("emulated-verbs", provider, "batched_ns_per_op", ns_since(t0) / done, nullptr, done);
  ibv_destroy_qp(qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

}  // namespace

int main(int argc, char** argv) {
  int ops = 20000, batch = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 < argc && a == "--ops") {
      ops = std::atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--batch") {
      batch = std::atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--timeout-ms") {
      g_timeout_ms = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "gicomm-emu-bench: unknown argument '%s' (allowed: --ops N, --batch B (1..512), --timeout-ms MS)\n", a.c_str());
      return 2;
    }
  }
  if (ops < 1 || batch < 1 || batch > 512) {
    std::fprintf(stderr, "gicomm-emu-bench: --ops must be >= 1 and --batch 1..512\n");
    return 2;
  }
  const std::string provider = dx::rdma_provider();
  if (provider != "emulated") {
    std::fprintf(stderr, "gicomm-emu-bench: run it over the emulated rdma-core (gicomm-emu-run); this process has %s\n", provider.c_str());
    return 3;
  }
  std::fprintf(stderr, "gicomm-emu-bench: %d ops, batch %d, 8-byte inline RDMA writes, loopback, host memory, one engine thread\n", ops, batch);
  try {
    softnic_path(ops, batch);
    devx_path(ops, batch, provider);
    verbs_path(ops, batch, provider);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gicomm-emu-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
