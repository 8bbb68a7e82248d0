// libibverbs entry points: devices, contexts, PDs, MRs, CQs, QPs (the control path). The data path
// (post_send, post_recv, poll_cq) is the provider in provider.cpp.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "verbs_objects.h"

// verbs.h turns these names into inline wrappers; we define the real entry points.
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_get_device_list

using namespace gicomm::emu;
namespace softnic = gicomm::softnic;
namespace mlx5 = gicomm::mlx5;

namespace gicomm::emu {

namespace {

uint32_t roundup_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

std::string dev_name(ibv_context* ctx) { return ctx && ctx->device ? ctx->device->name : "?"; }

int query_port_ex(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t size);
int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input*, ibv_device_attr_ex* attr, size_t size);
ibv_pd* alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr);

void fill_device_attr(const DeviceSpec& s, ibv_device_attr* a) {
  std::memset(a, 0, sizeof *a);
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "%s", kFwVersion);
  a->node_guid = htobe64(s.guid);
  a->sys_image_guid = htobe64(s.guid);
  a->max_mr_size = 1ull << 40;
  a->page_size_cap = 0xfffff000;
  a->vendor_id = kVendorMellanox;
  a->vendor_part_id = kPartConnectX7;
  a->max_qp = Nic::kMaxQps;
  a->max_qp_wr = kMaxQpWr;
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID;
  a->max_sge = kMaxSge;
  a->max_sge_rd = kMaxSge;
  a->max_cq = 1 << 16;
  a->max_cqe = kMaxCqe;
  a->max_mr = Nic::kMaxMrs - 1;
  a->max_pd = 1 << 20;
  a->max_qp_rd_atom = kMaxRdAtomic;
  a->max_res_rd_atom = kMaxRdAtomic * Nic::kMaxQps;
  a->max_qp_init_rd_atom = kMaxRdAtomic;
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_ah = 1 << 20;
  a->max_srq = 1 << 16;
  a->max_srq_wr = kMaxSrqWr;
  a->max_srq_sge = kMaxSge;
  a->max_pkeys = s.roce ? 1 : kPkeyTableIb;
  a->local_ca_ack_delay = 16;
  a->phys_port_cnt = 1;
}

// The address vector the mlx5 provider builds for an AH (mlx5_wqe_av): destination LID, SL and
// path bits; with a GRH the flag, source GID index, flow label, hop limit, traffic class and
// destination GID; on RoCE a destination MAC (the emulation's, from the GID: there is no
// neighbour table to ask).
void fill_av(const DeviceSpec& s, const ibv_ah_attr& a, mlx5_wqe_av* av) {
  std::memset(av, 0, sizeof *av);
  av->stat_rate_sl = static_cast<uint8_t>(((a.static_rate & 0xf) << 4) | (a.sl & 0xf));
  av->fl_mlid = a.src_path_bits & 0x7f;
  av->rlid = htobe16(a.dlid);
  if (a.is_global) {
    av->grh_gid_fl = htobe32((1u << 30) | (uint32_t(a.grh.sgid_index) << 20) | (a.grh.flow_label & 0xfffff));
    av->hop_limit = a.grh.hop_limit;
    av->tclass = a.grh.traffic_class;
    std::memcpy(av->rgid, a.grh.dgid.raw, 16);
  }
  if (s.roce) {
    const uint8_t mac[6] = {0x02, 0x00, a.grh.dgid.raw[12], a.grh.dgid.raw[13], a.grh.dgid.raw[14], a.grh.dgid.raw[15]};
    std::memcpy(av->rmac, mac, 6);
  }
}

void fill_port_attr(const DeviceSpec& s, ibv_port_attr* a) {
  std::memset(a, 0, sizeof *a);
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = IBV_MTU_4096;
  a->gid_tbl_len = kGidTableLen;
  a->port_cap_flags = s.roce ? 0 : IBV_PORT_CM_SUP;
  a->max_msg_sz = softnic::kMaxMessageBytes;
  a->pkey_tbl_len = s.roce ? 1 : kPkeyTableIb;
  a->lid = s.lid;
  a->sm_lid = s.roce ? 0 : 1;
  a->max_vl_num = 4;
  a->subnet_timeout = 18;
  a->active_width = 2;   // 4X
  a->active_speed = 64;  // HDR per lane (ibv_rate reporting only: the emulation has no link)
  a->phys_state = 5;     // LinkUp
  a->link_layer = s.roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
}

}  // namespace

VDevice* device_table(size_t* count) {
  static std::vector<VDevice>* table = [] {
    auto* t = new std::vector<VDevice>;
    for (const DeviceSpec& s : device_specs()) {
      VDevice d;
      std::memset(&d, 0, sizeof d);
      d.dev.node_type = IBV_NODE_CA;
      d.dev.transport_type = IBV_TRANSPORT_IB;
      std::snprintf(d.dev.name, sizeof d.dev.name, "%s", s.name.c_str());
      std::snprintf(d.dev.dev_name, sizeof d.dev.dev_name, "uverbs%u", s.index);
      std::snprintf(d.dev.dev_path, sizeof d.dev.dev_path, "/sys/class/infiniband_verbs/uverbs%u", s.index);
      std::snprintf(d.dev.ibdev_path, sizeof d.dev.ibdev_path, "/sys/class/infiniband/%s", s.name.c_str());
      d.index = s.index;
      t->push_back(d);
    }
    return t;
  }();
  *count = table->size();
  return table->data();
}

bool is_emulated_device(ibv_device* dev) {
  size_t n = 0;
  VDevice* t = device_table(&n);
  return n > 0 && reinterpret_cast<VDevice*>(dev) >= t && reinterpret_cast<VDevice*>(dev) < t + n;
}

Context* context_of(ibv_context* ctx) {
  if (ctx == nullptr || !is_emulated_device(ctx->device)) return nullptr;
  return &vctx_of(ctx)->core;
}

uint32_t pd_number(ibv_pd* pd) { return vpd(pd)->pdn; }
Srq* srq_of(ibv_srq* srq) { return &vsrq(srq)->core; }
const void* ah_av(ibv_ah* ah) { return &reinterpret_cast<VAh*>(ah)->av; }

ibv_qp* create_dct(ibv_context* ctx, ibv_qp_init_attr_ex* attr, uint64_t dc_key) {
  const char* call = "mlx5dv_create_qp";
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr || attr->pd->context != ctx)
    return fail(EINVAL, call, dev_name(ctx), "a DC target needs attr->pd (IBV_QP_INIT_ATTR_PD) of this context"), nullptr;
  if (attr->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD))
    return fail(EOPNOTSUPP, call, dev_name(ctx), "init attribute mask " + hex(attr->comp_mask) + " (only PD is emulated)"), nullptr;
  ibv_qp_init_attr base{};
  base.qp_context = attr->qp_context;
  base.send_cq = attr->send_cq;
  base.recv_cq = attr->recv_cq;
  base.srq = attr->srq;
  base.cap = attr->cap;
  base.qp_type = IBV_QPT_RC;
  ibv_qp* qp = create_qp(attr->pd, &base, QpType::dct, dc_key, call);
  if (qp != nullptr) attr->cap = base.cap;
  return qp;
}
Qp* qp_of(ibv_qp* qp) { return &vqp(qp)->core; }
Cq* cq_of(ibv_cq* cq) { return &vcq(cq)->core; }

ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr, QpType type, uint64_t dc_key, const char* call) {
  Context* c = context_of(pd->context);
  const std::string obj = std::string(type == QpType::dct ? "DCT" : "QP") + " on " + dev_name(pd->context);
  if (attr->srq != nullptr && attr->srq->context != pd->context)
    return fail(EINVAL, call, obj, "the SRQ belongs to another context"), nullptr;
  if (type == QpType::dct && attr->srq == nullptr) return fail(EINVAL, call, obj, "a DC target needs an SRQ"), nullptr;
  if (attr->recv_cq == nullptr || (type != QpType::dct && attr->send_cq == nullptr))
    return fail(EINVAL, call, obj, "send_cq and recv_cq are required"), nullptr;
  if ((attr->send_cq != nullptr && attr->send_cq->context != pd->context) || attr->recv_cq->context != pd->context)
    return fail(EINVAL, call, obj, "the CQs belong to another context"), nullptr;
  ibv_qp_cap& cap = attr->cap;
  if (attr->srq != nullptr) cap.max_recv_wr = cap.max_recv_sge = 0;  // receives come from the SRQ
  if (type == QpType::dct) cap.max_send_wr = cap.max_send_sge = cap.max_inline_data = 0;  // it only answers
  if (cap.max_send_wr > kMaxQpWr || cap.max_recv_wr > kMaxQpWr)
    return fail(EINVAL, call, obj, "max_send_wr/max_recv_wr above the device's " + std::to_string(kMaxQpWr)), nullptr;
  if (cap.max_send_sge > kMaxSge || cap.max_recv_sge > kMaxSge)
    return fail(EINVAL, call, obj, "max_send_sge/max_recv_sge above the device's " + std::to_string(kMaxSge)), nullptr;
  if (cap.max_inline_data > kMaxInline)
    return fail(EINVAL, call, obj, "max_inline_data " + std::to_string(cap.max_inline_data) + " above the device's " + std::to_string(kMaxInline)), nullptr;
  // Send WQE budget: ctrl + raddr + the larger of the gather list, the inline run, an atomic (as
  // the mlx5 provider sizes it), in whole WQEBBs.
  const uint32_t data = std::max({16 * std::max(cap.max_send_sge, 1u), (4 + cap.max_inline_data + 15) / 16 * 16, 32u});
  const uint32_t wqe_bytes = (32 + data + 63) / 64 * 64;
  const uint32_t sq_wqebbs = cap.max_send_wr ? roundup_pow2(cap.max_send_wr * (wqe_bytes / 64)) : 0;
  const uint32_t rq_cnt = cap.max_recv_wr ? roundup_pow2(cap.max_recv_wr) : 0;
  const uint32_t rq_stride = roundup_pow2(16 * std::max(cap.max_recv_sge, 1u));
  const size_t sq_bytes = size_t(sq_wqebbs) * 64, rq_bytes = size_t(rq_cnt) * rq_stride;
  void* mem = std::aligned_alloc(4096, (rq_bytes + sq_bytes + 64 + 4095) & ~size_t(4095));
  if (mem == nullptr) return fail(ENOMEM, call, obj, "out of memory"), nullptr;
  std::memset(mem, 0, rq_bytes + sq_bytes + 64);
  auto* v = new VQp();
  Qp& q = v->core;
  q.kind = QpKind::verbs;
  q.type = type;
  q.dc_key = dc_key;
  q.ctx = c;
  q.pdn = vpd(pd)->pdn;
  q.sq_sig_all = attr->sq_sig_all != 0;
  q.owned_mem = mem;
  q.rq_buf = static_cast<uint8_t*>(mem);  // mlx5 places the RQ first, then the SQ
  q.rq_wqe_cnt = rq_cnt;
  q.rq_stride = rq_stride;
  q.sq.buf = static_cast<uint8_t*>(mem) + rq_bytes;
  q.sq.wqe_cnt = sq_wqebbs;
  q.sq.dbrec = reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(mem) + rq_bytes + sq_bytes);
  q.sq.doorbell = &q.private_doorbell;
  q.sq_wqe_bytes = wqe_bytes;
  q.max_send_wr = sq_wqebbs / (wqe_bytes / 64);
  q.max_recv_wr = rq_cnt;
  q.max_send_sge = type == QpType::dct ? 0 : (wqe_bytes - 32) / 16;
  q.max_recv_sge = rq_cnt ? rq_stride / 16 : 0;
  q.max_inline = type == QpType::dct ? 0 : std::min(kMaxInline, wqe_bytes - 36);
  q.sq_wrid.assign(std::max(sq_wqebbs, 1u), 0);
  q.sq_wqe_head.assign(std::max(sq_wqebbs, 1u), 0);
  q.rq_wrid.assign(std::max(rq_cnt, 1u), 0);
  q.send_cq = attr->send_cq ? cq_of(attr->send_cq) : nullptr;
  q.recv_cq = cq_of(attr->recv_cq);
  q.srq = attr->srq ? &vsrq(attr->srq)->core : nullptr;
  q.ibv = &v->qp;
  v->pd = vpd(pd);
  std::lock_guard<std::mutex> lock(registry().mu);
  q.nic = c->nic;
  if (c->nic->add_qp(&q) == 0) {
    std::free(mem);
    delete v;
    return fail(ENOMEM, call, obj, "the device's QP table is full"), nullptr;
  }
  q.sq.qpn = q.qpn;
  if (q.send_cq) ++q.send_cq->refs;
  ++q.recv_cq->refs;
  if (q.srq) ++q.srq->refs;
  ++v->pd->refs;
  registry().qps.push_back(&q);
  v->qp.context = pd->context;
  v->qp.qp_context = attr->qp_context;
  v->qp.pd = pd;
  v->qp.send_cq = attr->send_cq;
  v->qp.recv_cq = attr->recv_cq;
  v->qp.srq = attr->srq;
  v->qp.handle = q.qpn;
  v->qp.qp_num = q.qpn;
  v->qp.state = IBV_QPS_RESET;
  v->qp.qp_type = type == QpType::dct ? IBV_QPT_DRIVER : IBV_QPT_RC;
  pthread_mutex_init(&v->qp.mutex, nullptr);
  pthread_cond_init(&v->qp.cond, nullptr);
  cap.max_send_wr = q.max_send_wr;
  cap.max_recv_wr = q.max_recv_wr;
  cap.max_send_sge = q.max_send_sge;
  cap.max_recv_sge = q.max_recv_sge;
  cap.max_inline_data = q.max_inline;
  note(std::string(call) + ": " + obj + ": qpn " + hex(q.qpn) + ", pd " + hex(q.pdn) + (q.srq ? ", SRQ " + hex(q.srq->srqn) : "") +
       ", " + std::to_string(q.max_send_wr) + " send WRs, " + std::to_string(q.max_recv_wr) + " receive WRs");
  return &v->qp;
}

ibv_context* open_context(ibv_device* dev) {
  if (!is_emulated_device(dev)) {
    fail(ENODEV, "ibv_open_device", dev ? dev->name : "(null)", "not a device of the emulated rdma-core");
    return nullptr;
  }
  const uint32_t index = reinterpret_cast<VDevice*>(dev)->index;
  auto* v = new (std::nothrow) VContext();
  if (v == nullptr) {
    fail(ENOMEM, "ibv_open_device", dev->name, "out of memory");
    return nullptr;
  }
  ibv_context* ctx = &v->vctx.context;
  v->vctx.sz = sizeof(verbs_context);
  v->vctx.query_port = query_port_ex;
  v->vctx.query_device_ex = query_device_ex;
  v->vctx.alloc_parent_domain = alloc_parent_domain;
  ctx->device = dev;
  ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
  ctx->ops.post_send = provider_post_send;
  ctx->ops.post_recv = provider_post_recv;
  ctx->ops.poll_cq = provider_poll_cq;
  ctx->ops.req_notify_cq = provider_req_notify_cq;
  ctx->ops.post_srq_recv = provider_post_srq_recv;
  ctx->num_comp_vectors = 1;
  pthread_mutex_init(&ctx->mutex, nullptr);
  if (pipe(v->core.async_pipe) != 0) {
    fail(errno, "ibv_open_device", dev->name, "cannot create the async event pipe");
    delete v;
    return nullptr;
  }
  fcntl(v->core.async_pipe[1], F_SETFL, O_NONBLOCK);
  ctx->async_fd = v->core.async_pipe[0];
  ctx->cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);  // a valid descriptor for callers that poll it
  v->core.ibv = ctx;
  std::lock_guard<std::mutex> lock(registry().mu);
  v->core.nic = &nic_for(index);
  ++registry().open_contexts;
  engine_start();
  return ctx;
}

}  // namespace gicomm::emu

namespace {

int query_port_ex_impl(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t size) {
  Context* c = context_of(ctx);
  if (c == nullptr) return fail(EINVAL, "ibv_query_port", "context", "not an emulated context");
  if (port != 1) return fail(EINVAL, "ibv_query_port", dev_name(ctx), "port " + std::to_string(port) + " does not exist (one port: 1)");
  ibv_port_attr a;
  fill_port_attr(c->nic->spec(), &a);
  std::memset(attr, 0, size);  // a caller built with newer headers may pass a larger struct
  std::memcpy(attr, &a, std::min(size, sizeof a));
  return 0;
}

}  // namespace

namespace gicomm::emu {
namespace {
int query_port_ex(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t size) {
  return query_port_ex_impl(ctx, port, attr, size);
}
// A parent domain: a PD that wraps another (thread domains and custom allocators are not
// emulated). Objects created on it belong to its parent's protection domain.
ibv_pd* alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr) {
  const char* call = "ibv_alloc_parent_domain";
  if (context_of(ctx) == nullptr) return fail(EINVAL, call, "context", "not an emulated context"), nullptr;
  if (attr == nullptr || attr->pd == nullptr || attr->pd->context != ctx)
    return fail(EINVAL, call, dev_name(ctx), "attr->pd must be a PD of this context"), nullptr;
  if (attr->td != nullptr || attr->comp_mask != 0)
    return fail(EOPNOTSUPP, call, dev_name(ctx), "thread domains and custom allocators (comp_mask " + hex(attr->comp_mask) + ") are not emulated"), nullptr;
  VPd* parent = vpd(attr->pd);
  auto* p = new VPd();
  std::lock_guard<std::mutex> lock(registry().mu);
  p->pd.context = ctx;
  p->pdn = parent->pdn;
  p->pd.handle = parent->pd.handle;
  p->parent = parent;
  ++parent->refs;
  return &p->pd;
}

int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input*, ibv_device_attr_ex* attr, size_t size) {
  Context* c = context_of(ctx);
  if (c == nullptr) return fail(EINVAL, "ibv_query_device_ex", "context", "not an emulated context");
  ibv_device_attr_ex a;
  std::memset(&a, 0, sizeof a);
  fill_device_attr(c->nic->spec(), &a.orig_attr);
  a.max_dm_size = 0;
  std::memset(attr, 0, size);  // a caller built with newer headers may pass a larger struct
  std::memcpy(attr, &a, std::min(size, sizeof a));
  return 0;
}
}  // namespace
}  // namespace gicomm::emu

#pragma GCC visibility push(default)  // the public entry points (the version script picks them)
extern "C" {

// ---- devices -------------------------------------------------------------------------------------
ibv_device** ibv_get_device_list(int* num_devices) {
  size_t n = 0;
  VDevice* t = device_table(&n);
  auto** list = static_cast<ibv_device**>(std::calloc(n + 1, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < n; ++i) list[i] = &t[i].dev;
  if (num_devices) *num_devices = static_cast<int>(n);
  return list;
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(ibv_device* device) { return device ? device->name : nullptr; }

__be64 ibv_get_device_guid(ibv_device* device) {
  if (!is_emulated_device(device)) return 0;
  return htobe64(device_specs()[reinterpret_cast<VDevice*>(device)->index].guid);
}

int ibv_get_device_index(ibv_device* device) {
  return is_emulated_device(device) ? static_cast<int>(reinterpret_cast<VDevice*>(device)->index) : -1;
}

// rdma-core's mlx5 provider opens every context with DEVX when the device allows it (since
// "mlx5: Enable devx by default"), so NVSHMEM issues DEVX commands on an ibv_open_device context.
ibv_context* ibv_open_device(ibv_device* device) { return open_context(device); }

int ibv_close_device(ibv_context* context) {
  Context* c = context_of(context);
  if (c == nullptr) return fail(EINVAL, "ibv_close_device", "context", "not an emulated context");
  VContext* v = vctx_of(context);
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    destroy_context_objects(c);
    --registry().open_contexts;
  }
  engine_stop();  // joins the engine when this was the last open context
  close(c->async_pipe[0]);
  close(c->async_pipe[1]);
  if (context->cmd_fd >= 0) close(context->cmd_fd);
  pthread_mutex_destroy(&context->mutex);
  delete v;
  return 0;
}

ibv_context* ibv_import_device(int) {
  fail(EOPNOTSUPP, "ibv_import_device", "command fd", "the emulated rdma-core has no kernel objects to import");
  return nullptr;
}

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  Context* c = context_of(context);
  if (c == nullptr) return fail(EINVAL, "ibv_get_async_event", "context", "not an emulated context"), -1;
  const ssize_t n = read(context->async_fd, event, sizeof *event);
  if (n == static_cast<ssize_t>(sizeof *event)) return 0;
  if (n >= 0) errno = EIO;
  return -1;  // errno from read (EAGAIN when the descriptor is non-blocking and nothing is queued)
}

void ibv_ack_async_event(ibv_async_event*) {}

int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  Context* c = context_of(context);
  if (c == nullptr) return fail(EINVAL, "ibv_query_device", "context", "not an emulated context");
  fill_device_attr(c->nic->spec(), attr);
  return 0;
}

// The exported symbol takes the old (shorter) port attribute struct: copy up to its end.
int ibv_query_port(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* port_attr) {
  return query_port_ex_impl(context, port_num, reinterpret_cast<ibv_port_attr*>(port_attr),
                            offsetof(ibv_port_attr, port_cap_flags2));
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index, ibv_gid_entry* entry,
                      uint32_t flags, size_t entry_size) {
  Context* c = context_of(context);
  if (c == nullptr) return fail(EINVAL, "ibv_query_gid_ex", "context", "not an emulated context");
  if (flags != 0) return fail(EINVAL, "ibv_query_gid_ex", dev_name(context), "flags must be 0");
  if (port_num != 1) return fail(EINVAL, "ibv_query_gid_ex", dev_name(context), "no port " + std::to_string(port_num));
  const DeviceSpec& s = c->nic->spec();
  if (gid_index >= kGidTableLen) return fail(EINVAL, "ibv_query_gid_ex", dev_name(context), "GID index out of the table");
  if (gid_index >= s.gids.size()) return ENODATA;  // an empty entry, as the kernel reports it
  ibv_gid_entry e{};
  e.gid = s.gids[gid_index].gid;
  e.gid_index = gid_index;
  e.port_num = port_num;
  e.gid_type = s.gids[gid_index].type;
  e.ndev_ifindex = 0;
  std::memcpy(entry, &e, std::min(entry_size, sizeof e));
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries, uint32_t flags,
                             size_t entry_size) {
  Context* c = context_of(context);
  if (c == nullptr) return -fail(EINVAL, "ibv_query_gid_table", "context", "not an emulated context");
  if (flags != 0) return -fail(EINVAL, "ibv_query_gid_table", dev_name(context), "flags must be 0");
  const size_t n = c->nic->spec().gids.size();
  if (max_entries < n) return -fail(EINVAL, "ibv_query_gid_table", dev_name(context), "the table has " + std::to_string(n) + " entries");
  for (size_t i = 0; i < n; ++i)
    _ibv_query_gid_ex(context, 1, static_cast<uint32_t>(i),
                      reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<uint8_t*>(entries) + i * entry_size), 0, entry_size);
  return static_cast<ssize_t>(n);
}

int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  ibv_gid_entry e{};
  const int rc = _ibv_query_gid_ex(context, port_num, static_cast<uint32_t>(index), &e, 0, sizeof e);
  if (rc == ENODATA) {
    std::memset(gid, 0, sizeof *gid);
    return 0;
  }
  if (rc != 0) return -1;
  *gid = e.gid;
  return 0;
}

int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  Context* c = context_of(context);
  if (c == nullptr || port_num != 1) return fail(EINVAL, "ibv_query_pkey", dev_name(context), "no such port"), -1;
  const int len = c->nic->spec().roce ? 1 : static_cast<int>(kPkeyTableIb);
  if (index < 0 || index >= len) return fail(EINVAL, "ibv_query_pkey", dev_name(context), "P_Key index out of the table"), -1;
  *pkey = index == 0 ? htobe16(0xffff) : 0;
  return 0;
}

int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (context_of(context) == nullptr || port_num != 1) return -1;
  return be16toh(pkey) == 0xffff ? 0 : -1;
}

// ---- protection domains ---------------------------------------------------------------------------
ibv_pd* ibv_alloc_pd(ibv_context* context) {
  Context* c = context_of(context);
  if (c == nullptr) return fail(EINVAL, "ibv_alloc_pd", "context", "not an emulated context"), nullptr;
  auto* p = new VPd();
  std::lock_guard<std::mutex> lock(registry().mu);
  p->pd.context = context;
  p->pdn = c->nic->alloc_pdn();
  p->pd.handle = p->pdn;
  return &p->pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  VPd* p = vpd(pd);
  std::lock_guard<std::mutex> lock(registry().mu);
  if (p->refs != 0)
    return fail(EBUSY, "ibv_dealloc_pd", "PD " + std::to_string(p->pdn),
                std::to_string(p->refs) + " memory regions, QPs, SRQs, address handles or parent domains still use it");
  if (p->parent != nullptr)
    --p->parent->refs;  // a parent domain: the PD number stays its parent's
  else
    context_of(pd->context)->nic->free_pdn(p->pdn);
  delete p;
  return 0;
}

// ---- memory regions ---------------------------------------------------------------------------------
ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  const char* call = "ibv_reg_mr";
  if (pd == nullptr || context_of(pd->context) == nullptr) return fail(EINVAL, call, "PD", "not a PD of an emulated context"), nullptr;
  VPd* p = vpd(pd);
  const std::string obj = "region of " + std::to_string(length) + " bytes at " + hex(reinterpret_cast<uint64_t>(addr)) +
                          " on " + dev_name(pd->context);
  const unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING;
  if ((access & ~(known | IBV_ACCESS_OPTIONAL_RANGE)) != 0)
    return fail(EINVAL, call, obj, "access flags " + hex(access & ~known) + " are not supported by the emulated device"), nullptr;
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return fail(EINVAL, call, obj, "remote write or atomic access needs local write access"), nullptr;
  if (length == 0) return fail(EINVAL, call, obj, "length is 0"), nullptr;
  Loc loc;
  std::string why;
  if (!classify(addr, length, &loc, &why)) return fail(EFAULT, call, obj, why), nullptr;
  uint32_t need = 0;
  if (access & IBV_ACCESS_LOCAL_WRITE) need |= softnic::kAccessLocalWrite;
  if (access & IBV_ACCESS_REMOTE_WRITE) need |= softnic::kAccessRemoteWrite;
  if (access & IBV_ACCESS_REMOTE_READ) need |= softnic::kAccessRemoteRead;
  if (access & IBV_ACCESS_REMOTE_ATOMIC) need |= softnic::kAccessRemoteAtomic;
  std::lock_guard<std::mutex> lock(registry().mu);
  Nic* nic = context_of(pd->context)->nic;
  const uint32_t key = nic->add_mr(reinterpret_cast<uint64_t>(addr), iova, length, need, p->pdn, loc);
  if (key == 0) return fail(ENOMEM, call, obj, "the device's memory key table is full"), nullptr;
  auto* m = new VMr();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = key;
  m->mr.lkey = key;
  m->mr.rkey = key;
  m->nic = nic;
  m->pd = p;
  m->key = key;
  ++p->refs;
  note("MR " + hex(key) + ": " + obj + (loc.is_device() ? " (GPU " + std::to_string(loc.device) + " memory)" : " (host memory)"));
  return &m->mr;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uint64_t>(addr), static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

// dmabuf: the engine would need to map the buffer, which a GPU dmabuf does not allow on our
// machines; refused the way a device without dmabuf support refuses it, so callers fall back to
// registration by address.
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int) {
  fail(EOPNOTSUPP, "ibv_reg_dmabuf_mr",
       "dmabuf fd " + std::to_string(fd) + " offset " + std::to_string(offset) + " length " + std::to_string(length) +
           " iova " + hex(iova) + " on " + (pd ? dev_name(pd->context) : std::string("?")),
       "the emulated device cannot map dmabufs; register the memory by address (ibv_reg_mr)");
  return nullptr;
}

int ibv_rereg_mr(ibv_mr* mr, int, ibv_pd*, void*, size_t, int) {
  fail(EOPNOTSUPP, "ibv_rereg_mr", mr ? "MR " + hex(mr->lkey) : "MR", "not emulated: deregister and register again");
  return IBV_REREG_MR_ERR_INPUT;
}

int ibv_dereg_mr(ibv_mr* mr) {
  VMr* m = vmr(mr);
  std::lock_guard<std::mutex> lock(registry().mu);
  m->nic->remove_mr(m->key);
  --m->pd->refs;
  delete m;
  return 0;
}

// ---- completion channels and CQs --------------------------------------------------------------------
ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  if (context_of(context) == nullptr) return fail(EINVAL, "ibv_create_comp_channel", "context", "not an emulated context"), nullptr;
  auto* ch = new VChannel();
  int fds[2];
  if (pipe(fds) != 0) {
    fail(errno, "ibv_create_comp_channel", dev_name(context), "cannot create its pipe");
    delete ch;
    return nullptr;
  }
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  ch->ch.context = context;
  ch->ch.fd = fds[0];
  ch->ch.refcnt = 0;
  ch->write_fd = fds[1];
  return &ch->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  auto* ch = reinterpret_cast<VChannel*>(channel);
  if (channel->refcnt != 0)
    return fail(EBUSY, "ibv_destroy_comp_channel", "channel", std::to_string(channel->refcnt) + " CQs still use it");
  close(ch->ch.fd);
  close(ch->write_fd);
  delete ch;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector) {
  const char* call = "ibv_create_cq";
  Context* c = context_of(context);
  if (c == nullptr) return fail(EINVAL, call, "context", "not an emulated context"), nullptr;
  const std::string obj = "CQ of " + std::to_string(cqe) + " entries on " + dev_name(context);
  if (cqe < 1 || static_cast<uint32_t>(cqe) > kMaxCqe)
    return fail(EINVAL, call, obj, "cqe must be 1.." + std::to_string(kMaxCqe)), nullptr;
  if (comp_vector < 0 || comp_vector >= context->num_comp_vectors)
    return fail(EINVAL, call, obj, "comp_vector " + std::to_string(comp_vector) + " out of range"), nullptr;
  // mlx5 sizing: a power of two above the request; the caller is told cqe = entries - 1.
  const uint32_t entries = roundup_pow2(static_cast<uint32_t>(cqe) + 1);
  void* mem = std::aligned_alloc(4096, (size_t(entries) * sizeof(mlx5::Cqe64) + 64 + 4095) & ~size_t(4095));
  if (mem == nullptr) return fail(ENOMEM, call, obj, "out of memory"), nullptr;
  auto* v = new VCq();
  Cq& q = v->core;
  q.buf = static_cast<mlx5::Cqe64*>(mem);
  for (uint32_t i = 0; i < entries; ++i) mlx5::init_cqe(q.buf[i]);
  q.dbrec = reinterpret_cast<uint32_t*>(q.buf + entries);
  q.dbrec[0] = q.dbrec[1] = 0;
  q.cqe_cnt = entries;
  q.owned_mem = mem;
  q.ctx = c;
  q.ibv = &v->cq;
  v->cq.context = context;
  v->cq.channel = channel;
  v->cq.cq_context = cq_context;
  v->cq.cqe = static_cast<int>(entries - 1);
  pthread_mutex_init(&v->cq.mutex, nullptr);
  pthread_cond_init(&v->cq.cond, nullptr);
  if (channel != nullptr) {
    q.notify_fd = reinterpret_cast<VChannel*>(channel)->write_fd;
    ++channel->refcnt;
  }
  std::lock_guard<std::mutex> lock(registry().mu);
  q.nic = c->nic;
  q.cqn = c->nic->alloc_cqn();
  v->cq.handle = q.cqn;
  registry().cqs.push_back(&q);
  return &v->cq;
}

int ibv_resize_cq(ibv_cq* cq, int) {
  return fail(EOPNOTSUPP, "ibv_resize_cq", "CQ " + hex(cq_of(cq)->cqn), "not emulated");
}

int ibv_destroy_cq(ibv_cq* cq) {
  VCq* v = vcq(cq);
  std::lock_guard<std::mutex> lock(registry().mu);
  if (v->core.refs != 0)
    return fail(EBUSY, "ibv_destroy_cq", "CQ " + hex(v->core.cqn), std::to_string(v->core.refs) + " QPs still use it");
  destroy_cq_locked(v);
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  ibv_cq* handle = nullptr;
  const ssize_t n = read(channel->fd, &handle, sizeof handle);
  if (n != static_cast<ssize_t>(sizeof handle)) {
    if (n >= 0) errno = EIO;
    return -1;
  }
  *cq = handle;
  *cq_context = handle->cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

// ---- QPs ---------------------------------------------------------------------------------------------
ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  const char* call = "ibv_create_qp";
  if (pd == nullptr || context_of(pd->context) == nullptr) return fail(EINVAL, call, "PD", "not a PD of an emulated context"), nullptr;
  if (attr->qp_type != IBV_QPT_RC)
    return fail(EOPNOTSUPP, call, "QP on " + dev_name(pd->context),
                "QP type " + std::to_string(attr->qp_type) + " is not emulated (RC; DC targets through mlx5dv_create_qp)"),
           nullptr;
  return create_qp(pd, attr, QpType::rc, 0, call);
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  const char* call = "ibv_modify_qp";
  VQp* v = vqp(qp);
  Qp& q = v->core;
  const std::string obj = "QP " + hex(q.qpn) + " on " + dev_name(qp->context);
  std::lock_guard<std::mutex> lock(registry().mu);
  const int actual = q.state.load();
  if ((mask & IBV_QP_CUR_STATE) && static_cast<int>(attr->cur_qp_state) != actual)
    return fail(EINVAL, call, obj, "cur_qp_state " + std::to_string(attr->cur_qp_state) + " is not the QP's state " + std::to_string(actual));
  const int next = (mask & IBV_QP_STATE) ? static_cast<int>(attr->qp_state) : actual;
  std::string why;
  const bool ok = q.type == QpType::dct ? modify_dct_is_ok(actual, next, mask, &why) : modify_qp_is_ok(actual, next, mask, &why);
  if (!ok) return fail(EINVAL, call, obj, why);
  const DeviceSpec& spec = q.nic->spec();
  if ((mask & IBV_QP_PORT) && attr->port_num != 1)
    return fail(EINVAL, call, obj, "port_num " + std::to_string(attr->port_num) + " does not exist (one port: 1)");
  if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index >= (spec.roce ? 1u : kPkeyTableIb))
    return fail(EINVAL, call, obj, "pkey_index " + std::to_string(attr->pkey_index) + " is outside the P_Key table");
  if ((mask & IBV_QP_ACCESS_FLAGS) &&
      (attr->qp_access_flags & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)) != 0)
    return fail(EINVAL, call, obj, "qp_access_flags " + hex(attr->qp_access_flags) + " has unknown bits");
  if (mask & IBV_QP_AV) {
    const ibv_ah_attr& ah = attr->ah_attr;
    if (ah.port_num != 1) return fail(EINVAL, call, obj, "ah_attr.port_num " + std::to_string(ah.port_num) + " does not exist");
    if (spec.roce && !ah.is_global)
      return fail(EINVAL, call, obj, "a RoCE port needs a global route (ah_attr.is_global and a GID)");
    if (ah.is_global && ah.grh.sgid_index >= spec.gids.size())
      return fail(EINVAL, call, obj, "sgid_index " + std::to_string(ah.grh.sgid_index) + " names no GID of the port");
  }
  if ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096))
    return fail(EINVAL, call, obj, "path_mtu " + std::to_string(attr->path_mtu) + " is above the port's active MTU");
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > kMaxRdAtomic)
    return fail(EINVAL, call, obj, "max_rd_atomic " + std::to_string(attr->max_rd_atomic) + " above the device's " + std::to_string(kMaxRdAtomic));
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > kMaxRdAtomic)
    return fail(EINVAL, call, obj, "max_dest_rd_atomic " + std::to_string(attr->max_dest_rd_atomic) + " above the device's " + std::to_string(kMaxRdAtomic));
  if (((mask & IBV_QP_TIMEOUT) && attr->timeout > 31) || ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7) ||
      ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7) || ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31))
    return fail(EINVAL, call, obj, "timeout (0..31), retry_cnt (0..7), rnr_retry (0..7) or min_rnr_timer (0..31) out of range");
  if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > 0xffffff)
    return fail(EINVAL, call, obj, "dest_qp_num above 24 bits");
  if (mask & IBV_QP_PORT) q.port = attr->port_num;
  if (mask & IBV_QP_PKEY_INDEX) q.pkey_index = attr->pkey_index;
  if (mask & IBV_QP_ACCESS_FLAGS) q.access = attr->qp_access_flags;
  if (mask & IBV_QP_AV) q.ah = attr->ah_attr;
  if (mask & IBV_QP_PATH_MTU) q.path_mtu = attr->path_mtu;
  if (mask & IBV_QP_DEST_QPN) q.dest_qpn = attr->dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) q.rq_psn = attr->rq_psn;
  if (mask & IBV_QP_SQ_PSN) q.sq_psn = attr->sq_psn;
  if (mask & IBV_QP_TIMEOUT) q.timeout = attr->timeout;
  if (mask & IBV_QP_RETRY_CNT) q.retry_cnt = attr->retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) q.rnr_retry = attr->rnr_retry;
  if (mask & IBV_QP_MIN_RNR_TIMER) q.min_rnr_timer = attr->min_rnr_timer;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) q.max_rd_atomic = attr->max_rd_atomic;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) q.max_dest_rd_atomic = attr->max_dest_rd_atomic;
  if (next != actual || (mask & IBV_QP_STATE)) {
    qp_set_state(q, next);
    if (next == IBV_QPS_RESET) v->sq_enabled = false;
    if (next == IBV_QPS_RTS) v->sq_enabled = true;
  }
  qp->state = static_cast<ibv_qp_state>(next);
  note(std::string(call) + ": " + obj + ": mask " + hex(mask) + " -> state " + std::to_string(next) +
       ((mask & IBV_QP_DEST_QPN) ? ", remote QP " + hex(q.dest_qpn) : ""));
  return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init_attr) {
  VQp* v = vqp(qp);
  Qp& q = v->core;
  std::lock_guard<std::mutex> lock(registry().mu);
  std::memset(attr, 0, sizeof *attr);
  attr->qp_state = static_cast<ibv_qp_state>(q.state.load());
  attr->cur_qp_state = attr->qp_state;
  attr->path_mtu = static_cast<ibv_mtu>(q.path_mtu);
  attr->qp_access_flags = static_cast<int>(q.access);
  attr->rq_psn = q.rq_psn;
  attr->sq_psn = q.sq_psn;
  attr->dest_qp_num = q.dest_qpn;
  attr->ah_attr = q.ah;
  attr->pkey_index = q.pkey_index;
  attr->port_num = q.port;
  attr->timeout = q.timeout;
  attr->retry_cnt = q.retry_cnt;
  attr->rnr_retry = q.rnr_retry;
  attr->min_rnr_timer = q.min_rnr_timer;
  attr->max_rd_atomic = q.max_rd_atomic;
  attr->max_dest_rd_atomic = q.max_dest_rd_atomic;
  attr->cap.max_send_wr = q.max_send_wr;
  attr->cap.max_recv_wr = q.max_recv_wr;
  attr->cap.max_send_sge = q.max_send_sge;
  attr->cap.max_recv_sge = q.max_recv_sge;
  attr->cap.max_inline_data = q.max_inline;
  if (init_attr != nullptr) {
    std::memset(init_attr, 0, sizeof *init_attr);
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->cap = attr->cap;
    init_attr->qp_type = qp->qp_type;
    init_attr->srq = qp->srq;
    init_attr->sq_sig_all = q.sq_sig_all;
  }
  qp->state = attr->qp_state;
  return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lock(registry().mu);
  destroy_qp_locked(vqp(qp));
  return 0;
}

int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) { return 0; }

int ibv_query_ece(ibv_qp* qp, ibv_ece*) {
  return fail(EOPNOTSUPP, "ibv_query_ece", "QP " + hex(qp_of(qp)->qpn), "enhanced connection establishment is not emulated");
}
int ibv_set_ece(ibv_qp* qp, ibv_ece*) {
  return fail(EOPNOTSUPP, "ibv_set_ece", "QP " + hex(qp_of(qp)->qpn), "enhanced connection establishment is not emulated");
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  fail(EOPNOTSUPP, "ibv_qp_to_qp_ex", "QP " + hex(qp_of(qp)->qpn), "the extended send API is not emulated; use ibv_post_send");
  return nullptr;
}

// ---- SRQs --------------------------------------------------------------------------------------------
ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* init) {
  const char* call = "ibv_create_srq";
  if (pd == nullptr || context_of(pd->context) == nullptr) return fail(EINVAL, call, "PD", "not a PD of an emulated context"), nullptr;
  Context* c = context_of(pd->context);
  const std::string obj = "SRQ of " + std::to_string(init->attr.max_wr) + " WRs on " + dev_name(pd->context);
  if (init->attr.max_wr == 0 || init->attr.max_wr > kMaxSrqWr)
    return fail(EINVAL, call, obj, "max_wr must be 1.." + std::to_string(kMaxSrqWr)), nullptr;
  if (init->attr.max_sge == 0 || init->attr.max_sge > kMaxSge)
    return fail(EINVAL, call, obj, "max_sge must be 1.." + std::to_string(kMaxSge)), nullptr;
  // A ring of receive WQEs, one more than asked (mlx5 keeps one slot free), then the counter.
  const uint32_t cnt = roundup_pow2(init->attr.max_wr + 1);
  const uint32_t stride = roundup_pow2(16 * init->attr.max_sge);
  void* mem = std::aligned_alloc(4096, (size_t(cnt) * stride + 64 + 4095) & ~size_t(4095));
  if (mem == nullptr) return fail(ENOMEM, call, obj, "out of memory"), nullptr;
  std::memset(mem, 0, size_t(cnt) * stride + 64);
  auto* v = new VSrq();
  Srq& q = v->core;
  q.ctx = c;
  q.pdn = vpd(pd)->pdn;
  q.buf = static_cast<uint8_t*>(mem);
  q.wqe_cnt = cnt;
  q.stride = stride;
  q.dbrec = reinterpret_cast<uint32_t*>(q.buf + size_t(cnt) * stride);
  q.max_sge = stride / 16;
  q.limit = init->attr.srq_limit;
  q.wrid.assign(cnt, 0);
  q.owned_mem = mem;
  q.ibv = &v->srq;
  v->pd = vpd(pd);
  std::lock_guard<std::mutex> lock(registry().mu);
  q.nic = c->nic;
  q.srqn = c->nic->alloc_srqn();
  ++v->pd->refs;
  registry().srqs.push_back(&q);
  v->srq.context = pd->context;
  v->srq.srq_context = init->srq_context;
  v->srq.pd = pd;
  v->srq.handle = q.srqn;
  pthread_mutex_init(&v->srq.mutex, nullptr);
  pthread_cond_init(&v->srq.cond, nullptr);
  init->attr.max_wr = cnt - 1;
  init->attr.max_sge = q.max_sge;
  note(std::string(call) + ": " + obj + ": srqn " + hex(q.srqn) + ", pd " + hex(q.pdn));
  return &v->srq;
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  Srq& q = vsrq(srq)->core;
  if (mask & ~IBV_SRQ_LIMIT)
    return fail(EINVAL, "ibv_modify_srq", "SRQ " + hex(q.srqn), "only the limit (IBV_SRQ_LIMIT) can be changed (mask " + hex(mask) + ")");
  if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit >= q.wqe_cnt)
    return fail(EINVAL, "ibv_modify_srq", "SRQ " + hex(q.srqn), "srq_limit " + std::to_string(attr->srq_limit) + " is not below max_wr");
  std::lock_guard<std::mutex> lock(registry().mu);
  if (mask & IBV_SRQ_LIMIT) q.limit = attr->srq_limit;
  return 0;
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  const Srq& q = vsrq(srq)->core;
  attr->max_wr = q.wqe_cnt - 1;
  attr->max_sge = q.max_sge;
  attr->srq_limit = q.limit;
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  VSrq* v = vsrq(srq);
  std::lock_guard<std::mutex> lock(registry().mu);
  if (v->core.refs != 0)
    return fail(EBUSY, "ibv_destroy_srq", "SRQ " + hex(v->core.srqn), std::to_string(v->core.refs) + " QPs still use it");
  destroy_srq_locked(v);
  return 0;
}

// ---- AHs, multicast: what the emulation does not offer says so ----------------------------------------
ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (pd == nullptr || context_of(pd->context) == nullptr) return fail(EINVAL, "ibv_create_ah", "PD", "not a PD of an emulated context"), nullptr;
  if (attr->port_num != 1) return fail(EINVAL, "ibv_create_ah", dev_name(pd->context), "port_num must be 1"), nullptr;
  const DeviceSpec& spec = context_of(pd->context)->nic->spec();
  if (spec.roce && !attr->is_global)
    return fail(EINVAL, "ibv_create_ah", dev_name(pd->context), "a RoCE port needs a global route (is_global and a GID)"), nullptr;
  if (attr->is_global && attr->grh.sgid_index >= spec.gids.size())
    return fail(EINVAL, "ibv_create_ah", dev_name(pd->context), "sgid_index " + std::to_string(attr->grh.sgid_index) + " names no GID"), nullptr;
  auto* a = new VAh();
  a->ah.context = pd->context;
  a->ah.pd = pd;
  a->attr = *attr;
  a->pd = vpd(pd);
  fill_av(spec, *attr, &a->av);
  std::lock_guard<std::mutex> lock(registry().mu);
  ++a->pd->refs;
  return &a->ah;
}
int ibv_destroy_ah(ibv_ah* ah) {
  auto* a = reinterpret_cast<VAh*>(ah);
  std::lock_guard<std::mutex> lock(registry().mu);
  --a->pd->refs;
  delete a;
  return 0;
}
int ibv_init_ah_from_wc(ibv_context*, uint8_t, ibv_wc*, ibv_grh*, ibv_ah_attr*) {
  return fail(EOPNOTSUPP, "ibv_init_ah_from_wc", "work completion", "UD is not emulated"), -1;
}
ibv_ah* ibv_create_ah_from_wc(ibv_pd*, ibv_wc*, ibv_grh*, uint8_t) {
  fail(EOPNOTSUPP, "ibv_create_ah_from_wc", "work completion", "UD is not emulated");
  return nullptr;
}
int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return fail(EOPNOTSUPP, "ibv_attach_mcast", "QP", "multicast is not emulated"); }
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return fail(EOPNOTSUPP, "ibv_detach_mcast", "QP", "multicast is not emulated"); }

// ---- fork support: the emulation pins nothing, so fork needs no preparation ------------------------
int ibv_fork_init(void) { return 0; }
enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_dontfork_range(void*, size_t) { return 0; }
int ibv_dofork_range(void*, size_t) { return 0; }

}  // extern "C"
#pragma GCC visibility pop

namespace gicomm::emu {

void destroy_qp_locked(VQp* v) {
  Qp& q = v->core;
  Registry& reg = registry();
  forget_qp(q);
  reg.qps.erase(std::remove(reg.qps.begin(), reg.qps.end(), &q), reg.qps.end());
  q.nic->remove_qp(&q);
  if (q.send_cq) --q.send_cq->refs;
  if (q.recv_cq) --q.recv_cq->refs;
  if (q.srq) --q.srq->refs;
  if (v->pd) --v->pd->refs;
  std::free(q.owned_mem);
  pthread_mutex_destroy(&v->qp.mutex);
  pthread_cond_destroy(&v->qp.cond);
  delete v;
}

void destroy_cq_locked(VCq* v) {
  Cq& q = v->core;
  Registry& reg = registry();
  reg.cqs.erase(std::remove(reg.cqs.begin(), reg.cqs.end(), &q), reg.cqs.end());
  if (v->cq.channel) --v->cq.channel->refcnt;
  std::free(q.owned_mem);
  pthread_mutex_destroy(&v->cq.mutex);
  pthread_cond_destroy(&v->cq.cond);
  delete v;
}

void destroy_srq_locked(VSrq* v) {
  Srq& q = v->core;
  Registry& reg = registry();
  reg.srqs.erase(std::remove(reg.srqs.begin(), reg.srqs.end(), &q), reg.srqs.end());
  --v->pd->refs;
  std::free(q.owned_mem);
  pthread_mutex_destroy(&v->srq.mutex);
  pthread_cond_destroy(&v->srq.cond);
  delete v;
}

void destroy_context_objects(Context* ctx) {
  devx_destroy_context_objects(ctx);
  Registry& reg = registry();
  for (Qp* q : std::vector<Qp*>(reg.qps))
    if (q->ctx == ctx && q->kind == QpKind::verbs) destroy_qp_locked(vqp(q->ibv));
  for (Srq* q : std::vector<Srq*>(reg.srqs))
    if (q->ctx == ctx) destroy_srq_locked(vsrq(q->ibv));
  for (Cq* c : std::vector<Cq*>(reg.cqs))
    if (c->ctx == ctx && c->ibv != nullptr) destroy_cq_locked(vcq(c->ibv));
}

}  // namespace gicomm::emu
