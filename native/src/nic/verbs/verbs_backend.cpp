// mini-proxy verbs backend (see gicomm/verbs/verbs_backend.h).
#include "gicomm/verbs/verbs_backend.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace gicomm {
namespace verbs {

namespace {

std::string errno_text(int e) { return std::string(std::strerror(e)); }

// Device-level resources shared by all QPs: the context, PD and the two memory regions.
struct Device {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* remote_mr = nullptr;  // cfg.remote: what a peer writes into
  ibv_mr* local_mr = nullptr;   // cfg.local: the source of pointer writes
  ibv_port_attr port{};
  ibv_gid gid{};
  std::string name;
  VerbsConfig cfg;
  ~Device() {
    if (local_mr) ibv_dereg_mr(local_mr);
    if (remote_mr) ibv_dereg_mr(remote_mr);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
  // This port as a peer sees it (no QPs yet).
  net::Endpoint address() const {
    net::Endpoint e;
    e.device = name;
    e.port = cfg.port;
    e.roce = port.link_layer == IBV_LINK_LAYER_ETHERNET;
    e.lid = port.lid;
    std::copy(std::begin(gid.raw), std::end(gid.raw), e.gid.begin());
    e.gid_index = cfg.gid_index;
    e.mtu = net::mtu_bytes(port.active_mtu);
    if (remote_mr) {
      e.buffer_addr = reinterpret_cast<uint64_t>(cfg.remote);
      e.buffer_bytes = cfg.remote_bytes;
      e.rkey = remote_mr->rkey;
    }
    return e;
  }
};

std::shared_ptr<Device> open_device(const VerbsConfig& cfg, std::string* error) {
  auto fail = [&](const std::string& m) {
    if (error) *error = m;
    return std::shared_ptr<Device>();
  };
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    return fail("verbs: no RDMA device found (ibv_get_device_list returned none); the verbs backend needs an RDMA NIC");
  }
  ibv_device* dev = nullptr;
  std::string names;
  for (int i = 0; i < n; ++i) {
    names += (i ? "," : "") + std::string(ibv_get_device_name(list[i]));
    if (cfg.device.empty() ? i == 0 : cfg.device == ibv_get_device_name(list[i])) dev = list[i];
  }
  if (!dev) {
    ibv_free_device_list(list);
    return fail("verbs: RDMA device '" + cfg.device + "' not found (present: " + names + ")");
  }
  auto d = std::make_shared<Device>();
  d->cfg = cfg;
  d->name = ibv_get_device_name(dev);
  d->ctx = ibv_open_device(dev);
  ibv_free_device_list(list);
  if (!d->ctx) return fail("verbs: ibv_open_device(" + d->name + ") failed: " + errno_text(errno));
  if (ibv_query_port(d->ctx, static_cast<uint8_t>(cfg.port), &d->port))
    return fail("verbs: cannot query " + d->name + " port " + std::to_string(cfg.port));
  if (d->port.state != IBV_PORT_ACTIVE)
    return fail("verbs: " + d->name + " port " + std::to_string(cfg.port) + " is not active (state " +
                ibv_port_state_str(d->port.state) + ")");
  if (d->port.link_layer == IBV_LINK_LAYER_ETHERNET &&
      ibv_query_gid(d->ctx, static_cast<uint8_t>(cfg.port), cfg.gid_index, &d->gid))
    return fail("verbs: cannot read GID " + std::to_string(cfg.gid_index) + " of " + d->name);
  d->pd = ibv_alloc_pd(d->ctx);
  if (!d->pd) return fail("verbs: ibv_alloc_pd failed");
  if (cfg.remote && cfg.remote_bytes) {
    d->remote_mr = ibv_reg_mr(d->pd, cfg.remote, cfg.remote_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!d->remote_mr) return fail("verbs: ibv_reg_mr (destination) failed: " + errno_text(errno));
  }
  if (cfg.local && cfg.local_bytes) {
    d->local_mr = ibv_reg_mr(d->pd, cfg.local, cfg.local_bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!d->local_mr) return fail("verbs: ibv_reg_mr (source) failed: " + errno_text(errno));
  }
  return d;
}

// One RC QP with its own CQ, and the PSN it starts sending with.
struct Qp {
  std::shared_ptr<Device> d;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  uint32_t psn = 0;
  ~Qp() {
    if (qp) ibv_destroy_qp(qp);
    if (cq) ibv_destroy_cq(cq);
  }
};

uint32_t random_psn() {
  static thread_local std::mt19937 gen{std::random_device{}()};
  return gen() & 0xffffff;
}

std::shared_ptr<Qp> make_qp(const std::shared_ptr<Device>& d, uint32_t depth, std::string* error) {
  auto q = std::make_shared<Qp>();
  q->d = d;
  q->psn = d->cfg.zero_psn ? 0 : random_psn();
  q->cq = ibv_create_cq(d->ctx, static_cast<int>(depth), nullptr, nullptr, 0);
  if (!q->cq) {
    *error = "verbs: ibv_create_cq failed: " + errno_text(errno);
    return nullptr;
  }
  ibv_qp_init_attr ia{};
  ia.send_cq = q->cq;
  ia.recv_cq = q->cq;
  ia.qp_type = IBV_QPT_RC;
  ia.sq_sig_all = 0;  // selective signaling: only the last WR of a chain
  ia.cap.max_send_wr = depth;
  ia.cap.max_recv_wr = 1;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = 8;
  q->qp = ibv_create_qp(d->pd, &ia);
  if (!q->qp) {
    *error = "verbs: ibv_create_qp failed: " + errno_text(errno);
    return nullptr;
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(d->cfg.port);
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  const int rc = ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc) {
    *error = "verbs: QP to INIT failed: " + errno_text(rc);
    return nullptr;
  }
  return q;
}

// INIT -> RTR -> RTS against the peer's QP `rq` on the port `peer` describes.
bool connect_qp(Qp& q, const net::Endpoint& peer, const net::QpInfo& rq, std::string* error) {
  const Device& d = *q.d;
  const bool roce = d.port.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (roce != peer.roce) {
    *error = "verbs: " + d.name + " is " + (roce ? "RoCE" : "InfiniBand") + ", the peer's " + peer.device + " is " +
             (peer.roce ? "RoCE" : "InfiniBand");
    return false;
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min<int>(d.port.active_mtu, net::mtu_code(peer.mtu)));
  a.dest_qp_num = rq.qpn;
  a.rq_psn = rq.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<uint8_t>(d.cfg.port);
  a.ah_attr.dlid = peer.lid;
  if (roce) {  // route by GID
    a.ah_attr.is_global = 1;
    std::copy(peer.gid.begin(), peer.gid.end(), a.ah_attr.grh.dgid.raw);
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(d.cfg.gid_index);
    a.ah_attr.grh.hop_limit = 64;
  }
  int rc = ibv_modify_qp(q.qp, &a,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) {
    *error = "verbs: QP " + std::to_string(q.qp->qp_num) + " to RTR (peer " + peer.device + " QP " +
             std::to_string(rq.qpn) + ") failed: " + errno_text(rc);
    return false;
  }
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = 14;
  s.retry_cnt = 7;
  s.rnr_retry = 7;
  s.sq_psn = q.psn;
  s.max_rd_atomic = 1;
  rc = ibv_modify_qp(q.qp, &s,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc) *error = "verbs: QP " + std::to_string(q.qp->qp_num) + " to RTS failed: " + errno_text(rc);
  return rc == 0;
}

// Where a channel's writes land: the peer's buffer.
struct Target {
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

class VerbsChannel : public proxy::Channel {
 public:
  // `keep` holds whatever else must live as long as the channel (the loopback peer QP).
  VerbsChannel(std::shared_ptr<Qp> q, Target t, std::shared_ptr<Qp> keep = nullptr)
      : q_(std::move(q)), keep_(std::move(keep)), t_(t) {}

  uint32_t room() const override { return q_->d->cfg.sq_depth - outstanding_; }

  bool post(const proxy::Desc* d, uint32_t n, std::string* error) override {
    ibv_send_wr wr[proxy::kMaxBatch];
    ibv_sge sge[proxy::kMaxBatch];
    uint64_t inline_values[proxy::kMaxBatch];  // inline data is copied at post time
    const Device& dev = *q_->d;
    for (uint32_t k = 0; k < n; ++k) {
      std::memset(&wr[k], 0, sizeof(wr[k]));
      const proxy::Op op = proxy::info_op(d[k].info);
      wr[k].wr_id = n;  // the signaled WR's wr_id says how many descriptors its CQE retires
      wr[k].next = k + 1 < n ? &wr[k + 1] : nullptr;
      wr[k].sg_list = &sge[k];
      wr[k].num_sge = 1;
      wr[k].opcode = IBV_WR_RDMA_WRITE;
      wr[k].send_flags = k + 1 == n ? IBV_SEND_SIGNALED : 0;
      wr[k].wr.rdma.remote_addr = t_.addr + 8ull * proxy::info_slot(d[k].info);
      wr[k].wr.rdma.rkey = t_.rkey;
      if (op == proxy::Op::write_inline) {
        inline_values[k] = d[k].value;
        sge[k].addr = reinterpret_cast<uint64_t>(&inline_values[k]);
        sge[k].length = 8;
        sge[k].lkey = 0;
        wr[k].send_flags |= IBV_SEND_INLINE;
      } else if (op == proxy::Op::write) {
        if (!dev.local_mr) {
          *error = "descriptor asks for a pointer write, but no source buffer is registered";
          return false;
        }
        sge[k].addr = reinterpret_cast<uint64_t>(dev.cfg.local) + (d[k].value & ((1ull << 40) - 1));
        sge[k].length = static_cast<uint32_t>(d[k].value >> 40);
        sge[k].lkey = dev.local_mr->lkey;
      } else if (op == proxy::Op::nop) {
        wr[k].num_sge = 0;  // a zero-length write: completes without moving data
      } else {
        *error = "descriptor with unknown op";
        return false;
      }
    }
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(q_->qp, wr, &bad);
    if (rc) {
      *error = "ibv_post_send of " + std::to_string(n) + " WRs failed: " + errno_text(rc);
      return false;
    }
    outstanding_ += n;
    return true;
  }

  int64_t poll(std::string* error) override {
    ibv_wc wc[16];
    const int got = ibv_poll_cq(q_->cq, 16, wc);
    if (got < 0) {
      *error = "ibv_poll_cq failed";
      return -1;
    }
    int64_t retired = 0;
    for (int i = 0; i < got; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        char vendor[16];
        std::snprintf(vendor, sizeof(vendor), "0x%x", wc[i].vendor_err);
        *error = std::string("work completion error: ") + ibv_wc_status_str(wc[i].status) + " (vendor " + vendor +
                 ", wr_id " + std::to_string(wc[i].wr_id) + ")";
        return -1;
      }
      retired += static_cast<int64_t>(wc[i].wr_id);
    }
    outstanding_ -= static_cast<uint32_t>(retired);
    return retired;
  }

 private:
  std::shared_ptr<Qp> q_;
  std::shared_ptr<Qp> keep_;
  Target t_;
  uint32_t outstanding_ = 0;
};

// Loopback: each worker's QP and a peer QP on the same port, connected to each other through the
// same path as two ports (connect_qp against the port's own address).
class LoopbackBackend : public proxy::Backend {
 public:
  explicit LoopbackBackend(std::shared_ptr<Device> d) : d_(std::move(d)) {}
  const char* name() const override { return "verbs"; }
  std::unique_ptr<proxy::Channel> open(uint32_t, std::string* error) override {
    auto q = make_qp(d_, d_->cfg.sq_depth, error);
    auto peer = q ? make_qp(d_, 16, error) : nullptr;
    if (!peer) return nullptr;
    const net::Endpoint self = d_->address();
    if (!connect_qp(*q, self, {peer->qp->qp_num, peer->psn}, error) ||
        !connect_qp(*peer, self, {q->qp->qp_num, q->psn}, error))
      return nullptr;
    return std::unique_ptr<proxy::Channel>(new VerbsChannel(q, {self.buffer_addr, self.rkey}, peer));
  }

 private:
  std::shared_ptr<Device> d_;
};

// Two ports: worker w posts on the endpoint's QP w into the peer's buffer.
class RemoteBackend : public proxy::Backend {
 public:
  RemoteBackend(std::vector<std::shared_ptr<Qp>> qps, Target t) : qps_(std::move(qps)), t_(t) {}
  const char* name() const override { return "verbs"; }
  std::unique_ptr<proxy::Channel> open(uint32_t worker, std::string* error) override {
    if (worker >= qps_.size()) {
      *error = "verbs: worker " + std::to_string(worker) + " has no QP (the endpoint was opened with " +
               std::to_string(qps_.size()) + ")";
      return nullptr;
    }
    return std::unique_ptr<proxy::Channel>(new VerbsChannel(qps_[worker], t_));
  }

 private:
  std::vector<std::shared_ptr<Qp>> qps_;
  Target t_;
};

}  // namespace

std::string describe_devices(int* count) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  std::string names;
  for (int i = 0; list && i < n; ++i) names += (i ? "," : "") + std::string(ibv_get_device_name(list[i]));
  if (list) ibv_free_device_list(list);
  if (count) *count = n;
  return names;
}

std::unique_ptr<proxy::Backend> make_verbs_backend(const VerbsConfig& cfg, std::string* error) {
  auto d = open_device(cfg, error);
  if (!d) return nullptr;
  if (!d->remote_mr) {
    if (error) *error = "verbs: no destination buffer";
    return nullptr;
  }
  return std::unique_ptr<proxy::Backend>(new LoopbackBackend(d));
}

struct VerbsEndpoint::Impl {
  std::shared_ptr<Device> d;
  std::vector<std::shared_ptr<Qp>> qps;
  net::Endpoint local;
  net::Endpoint peer;
  bool connected = false;
};

VerbsEndpoint::VerbsEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VerbsEndpoint::~VerbsEndpoint() = default;

std::unique_ptr<VerbsEndpoint> VerbsEndpoint::open(const VerbsConfig& cfg, uint32_t qps, std::string* error) {
  if (qps < 1 || qps > kMaxEndpointQps) {
    *error = "verbs: an endpoint has 1.." + std::to_string(kMaxEndpointQps) + " QPs, not " + std::to_string(qps);
    return nullptr;
  }
  std::unique_ptr<Impl> impl(new Impl);
  impl->d = open_device(cfg, error);
  if (!impl->d) return nullptr;
  impl->local = impl->d->address();
  for (uint32_t i = 0; i < qps; ++i) {
    auto q = make_qp(impl->d, cfg.sq_depth, error);
    if (!q) return nullptr;
    impl->local.qps.push_back({q->qp->qp_num, q->psn});
    impl->qps.push_back(std::move(q));
  }
  return std::unique_ptr<VerbsEndpoint>(new VerbsEndpoint(std::move(impl)));
}

const net::Endpoint& VerbsEndpoint::local() const { return impl_->local; }

bool VerbsEndpoint::connect(const net::Endpoint& peer, std::string* error) {
  if (impl_->connected) {
    *error = "verbs: endpoint on " + impl_->d->name + " is already connected";
    return false;
  }
  if (peer.qps.size() < impl_->qps.size()) {
    *error = "verbs: the peer's " + peer.device + " offers " + std::to_string(peer.qps.size()) + " QPs, this side has " +
             std::to_string(impl_->qps.size());
    return false;
  }
  for (size_t i = 0; i < impl_->qps.size(); ++i)
    if (!connect_qp(*impl_->qps[i], peer, peer.qps[i], error)) return false;
  impl_->peer = peer;
  impl_->connected = true;
  return true;
}

std::unique_ptr<proxy::Backend> VerbsEndpoint::backend(std::string* error) {
  if (impl_->connected && impl_->peer.buffer_bytes == 0) {
    *error = "verbs: the peer's " + impl_->peer.device + " offers no buffer to write into";
    return nullptr;
  }
  return backend_to(impl_->peer.buffer_addr, impl_->peer.rkey, error);
}

std::unique_ptr<proxy::Backend> VerbsEndpoint::backend_to(uint64_t addr, uint32_t rkey, std::string* error) {
  if (!impl_->connected) {
    *error = "verbs: connect() the endpoint on " + impl_->d->name + " before opening its backend";
    return nullptr;
  }
  return std::unique_ptr<proxy::Backend>(new RemoteBackend(impl_->qps, {addr, rkey}));
}

}  // namespace verbs
}  // namespace gicomm
