// mini-proxy verbs backend (see gicomm/verbs/verbs_backend.h).
#include "gicomm/verbs/verbs_backend.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <vector>

namespace gicomm {
namespace verbs {

namespace {

std::string errno_text(int e) { return std::string(std::strerror(e)); }

// Device-level resources shared by all workers: the context, PD and the two memory regions.
struct Device {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_mr* remote_mr = nullptr;
  ibv_mr* local_mr = nullptr;
  ibv_port_attr port{};
  ibv_gid gid{};
  VerbsConfig cfg;
  ~Device() {
    if (local_mr) ibv_dereg_mr(local_mr);
    if (remote_mr) ibv_dereg_mr(remote_mr);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

bool to_init(ibv_qp* qp, int port, std::string* error) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(port);
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  const int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc) *error = "verbs: QP to INIT failed: " + errno_text(rc);
  return rc == 0;
}

bool to_rtr_rts(ibv_qp* qp, uint32_t dest_qpn, const Device& d, std::string* error) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = d.port.active_mtu;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<uint8_t>(d.cfg.port);
  a.ah_attr.dlid = d.port.lid;
  if (d.port.link_layer == IBV_LINK_LAYER_ETHERNET) {  // RoCE: route by GID
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = d.gid;
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(d.cfg.gid_index);
    a.ah_attr.grh.hop_limit = 1;
  }
  int rc = ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) {
    *error = "verbs: QP to RTR failed: " + errno_text(rc);
    return false;
  }
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = 14;
  s.retry_cnt = 7;
  s.rnr_retry = 7;
  s.sq_psn = 0;
  s.max_rd_atomic = 1;
  rc = ibv_modify_qp(qp, &s,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc) *error = "verbs: QP to RTS failed: " + errno_text(rc);
  return rc == 0;
}

class VerbsChannel : public proxy::Channel {
 public:
  VerbsChannel(std::shared_ptr<Device> d) : d_(std::move(d)) {}
  ~VerbsChannel() override {
    if (qp_) ibv_destroy_qp(qp_);
    if (peer_) ibv_destroy_qp(peer_);
    if (cq_) ibv_destroy_cq(cq_);
    if (peer_cq_) ibv_destroy_cq(peer_cq_);
  }

  bool init(std::string* error) {
    const int depth = static_cast<int>(d_->cfg.sq_depth);
    cq_ = ibv_create_cq(d_->ctx, depth, nullptr, nullptr, 0);
    peer_cq_ = ibv_create_cq(d_->ctx, 16, nullptr, nullptr, 0);
    if (!cq_ || !peer_cq_) {
      *error = "verbs: ibv_create_cq failed: " + errno_text(errno);
      return false;
    }
    ibv_qp_init_attr ia{};
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = 0;  // selective signaling: only the last WR of a chain
    ia.cap.max_send_wr = d_->cfg.sq_depth;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = 8;
    qp_ = ibv_create_qp(d_->pd, &ia);
    ibv_qp_init_attr pa = ia;
    pa.send_cq = peer_cq_;
    pa.recv_cq = peer_cq_;
    pa.cap.max_send_wr = 1;
    peer_ = ibv_create_qp(d_->pd, &pa);
    if (!qp_ || !peer_) {
      *error = "verbs: ibv_create_qp failed: " + errno_text(errno);
      return false;
    }
    return to_init(qp_, d_->cfg.port, error) && to_init(peer_, d_->cfg.port, error) &&
           to_rtr_rts(qp_, peer_->qp_num, *d_, error) && to_rtr_rts(peer_, qp_->qp_num, *d_, error);
  }

  uint32_t room() const override { return d_->cfg.sq_depth - outstanding_; }

  bool post(const proxy::Desc* d, uint32_t n, std::string* error) override {
    ibv_send_wr wr[proxy::kMaxBatch];
    ibv_sge sge[proxy::kMaxBatch];
    uint64_t inline_values[proxy::kMaxBatch];  // inline data is copied at post time
    for (uint32_t k = 0; k < n; ++k) {
      std::memset(&wr[k], 0, sizeof(wr[k]));
      const proxy::Op op = proxy::info_op(d[k].info);
      wr[k].wr_id = n;  // the signaled WR's wr_id says how many descriptors its CQE retires
      wr[k].next = k + 1 < n ? &wr[k + 1] : nullptr;
      wr[k].sg_list = &sge[k];
      wr[k].num_sge = 1;
      wr[k].opcode = IBV_WR_RDMA_WRITE;
      wr[k].send_flags = k + 1 == n ? IBV_SEND_SIGNALED : 0;
      wr[k].wr.rdma.remote_addr = reinterpret_cast<uint64_t>(d_->cfg.remote) + 8ull * proxy::info_slot(d[k].info);
      wr[k].wr.rdma.rkey = d_->remote_mr->rkey;
      if (op == proxy::Op::write_inline) {
        inline_values[k] = d[k].value;
        sge[k].addr = reinterpret_cast<uint64_t>(&inline_values[k]);
        sge[k].length = 8;
        sge[k].lkey = 0;
        wr[k].send_flags |= IBV_SEND_INLINE;
      } else if (op == proxy::Op::write) {
        sge[k].addr = reinterpret_cast<uint64_t>(d_->cfg.local) + (d[k].value & ((1ull << 40) - 1));
        sge[k].length = static_cast<uint32_t>(d[k].value >> 40);
        sge[k].lkey = d_->local_mr->lkey;
      } else if (op == proxy::Op::nop) {
        wr[k].num_sge = 0;  // a zero-length write: completes without moving data
      } else {
        *error = "descriptor with unknown op";
        return false;
      }
    }
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(qp_, wr, &bad);
    if (rc) {
      *error = "ibv_post_send of " + std::to_string(n) + " WRs failed: " + errno_text(rc);
      return false;
    }
    outstanding_ += n;
    return true;
  }

  int64_t poll(std::string* error) override {
    ibv_wc wc[16];
    const int got = ibv_poll_cq(cq_, 16, wc);
    if (got < 0) {
      *error = "ibv_poll_cq failed";
      return -1;
    }
    int64_t retired = 0;
    for (int i = 0; i < got; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        char vendor[16];
        std::snprintf(vendor, sizeof(vendor), "0x%x", wc[i].vendor_err);
        *error = std::string("work completion error: ") + ibv_wc_status_str(wc[i].status) + " (vendor " +
                 vendor + ", wr_id " + std::to_string(wc[i].wr_id) + ")";
        return -1;
      }
      retired += static_cast<int64_t>(wc[i].wr_id);
    }
    outstanding_ -= static_cast<uint32_t>(retired);
    return retired;
  }

 private:
  std::shared_ptr<Device> d_;
  ibv_cq* cq_ = nullptr;
  ibv_cq* peer_cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_qp* peer_ = nullptr;
  uint32_t outstanding_ = 0;
};

class VerbsBackend : public proxy::Backend {
 public:
  explicit VerbsBackend(std::shared_ptr<Device> d) : d_(std::move(d)) {}
  const char* name() const override { return "verbs"; }
  std::unique_ptr<proxy::Channel> open(uint32_t, std::string* error) override {
    std::unique_ptr<VerbsChannel> ch(new VerbsChannel(d_));
    if (!ch->init(error)) return nullptr;
    return ch;
  }

 private:
  std::shared_ptr<Device> d_;
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
  auto fail = [&](const std::string& m) {
    if (error) *error = m;
    return std::unique_ptr<proxy::Backend>();
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
  d->ctx = ibv_open_device(dev);
  ibv_free_device_list(list);
  if (!d->ctx) return fail("verbs: ibv_open_device failed: " + errno_text(errno));
  if (ibv_query_port(d->ctx, static_cast<uint8_t>(cfg.port), &d->port))
    return fail("verbs: cannot query port " + std::to_string(cfg.port));
  if (d->port.state != IBV_PORT_ACTIVE)
    return fail("verbs: port " + std::to_string(cfg.port) + " is not active (state " +
                ibv_port_state_str(d->port.state) + ")");
  if (d->port.link_layer == IBV_LINK_LAYER_ETHERNET &&
      ibv_query_gid(d->ctx, static_cast<uint8_t>(cfg.port), cfg.gid_index, &d->gid))
    return fail("verbs: cannot read GID " + std::to_string(cfg.gid_index));
  d->pd = ibv_alloc_pd(d->ctx);
  if (!d->pd) return fail("verbs: ibv_alloc_pd failed");
  if (!cfg.remote || cfg.remote_bytes == 0) return fail("verbs: no destination buffer");
  d->remote_mr = ibv_reg_mr(d->pd, cfg.remote, cfg.remote_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!d->remote_mr) return fail("verbs: ibv_reg_mr (destination) failed: " + errno_text(errno));
  if (cfg.local && cfg.local_bytes) {
    d->local_mr = ibv_reg_mr(d->pd, cfg.local, cfg.local_bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!d->local_mr) return fail("verbs: ibv_reg_mr (source) failed: " + errno_text(errno));
  }
  return std::unique_ptr<proxy::Backend>(new VerbsBackend(d));
}

}  // namespace verbs
}  // namespace gicomm
