// NVSHMEM 3.4.5's IBGDA transport, replayed on the CPU against the emulated rdma-core: the same
// calls, PRM commands and fields, in the same order, as its host code issues them (read from its
// source: transport init, the shared CQ/QP/DCT objects, DCIs, RC QPs and their transitions), then
// the WQEs its device code builds (RDMA write by pointer and inline, the warp-combined inline write
// with its trailing NOP, RDMA read, fetch-add and compare-swap, the masked 4- and 8-byte atomics
// that carry add, xor, and, or, set and compare-swap, NOP, DUMP with a fence, DCI writes with the
// full and the compact address vector) rung the way its CPU-assisted NIC handler rings them (the
// GPU bumps a producer index; the proxy writes the doorbell record, then the doorbell with the
// producer index in it), and completions polled the way its device code polls a collapsed CQ (CQE
// 0's wqe_counter; op_own for errors; the buffer starts filled with 0xff).
//
// Two PEs: PE 0 initiates, PE 1 is the target. --two-process runs them as two processes (forked
// before either touches the emulation, so each is its own emulated host and every operation crosses
// the wire); the handles NVSHMEM exchanges at connection (RC QP numbers and LIDs, DCT address
// vectors, heap keys) and the target's memory for the payload checks go over a socketpair.
// Otherwise both PEs live in this process on two devices.
//
// Exit 0 pass, 1 fail, 77 no emulated device.
#include <dlfcn.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "expect.h"
#include "gicomm/mlx5/cqe.h"
#include "gicomm/mlx5/wqe.h"
#include "gicomm/mlx5dev/prm.h"

namespace m = gicomm::mlx5;
namespace prm = gicomm::mlx5dev::prm;
using Clock = std::chrono::steady_clock;

namespace {

// NVSHMEM's constants (ibgda.cpp, ibgda_device.cuh).
constexpr uint64_t kDcAccessKey = 0x5623CEAF;
constexpr uint32_t kQpDepth = 128;       // NVSHMEM_QP_DEPTH (NVSHMEM rounds it to a power of two)
constexpr uint32_t kSrqDepth = 256;      // NVSHMEM_SRQ_DEPTH
constexpr uint32_t kDbrSize = 8;
constexpr uint8_t kOpcodeMaskedCs = 0x14, kOpcodeMaskedFa = 0x15, kOpcodeDump = 0x23;
constexpr uint8_t kOpmod4 = 0x08, kOpmod8 = 0x09;  // IBGDA_{4,8}_BYTE_EXT_AMO_OPMOD >> 24
constexpr uint8_t kFmFence = 2 << 5;                // IBGDA_MLX5_FM_FENCE
constexpr size_t kHeap = 1 << 20;

int ilog2(uint32_t v) {
  int l = 0;
  while ((1u << l) < v) ++l;
  return l;
}

// ---- what the PEs exchange (NVSHMEM's ibgda_rc_handle, ibgda_dct_handle, the heap's rkey) -------
struct Handles {
  uint32_t rc_qpn;
  uint16_t lid;
  uint8_t gid[16];
  uint8_t dct_av[48];  // the DCT's mlx5_wqe_av with dqp_dct and the DC key filled in
  uint64_t heap;       // the symmetric heap's address and key
  uint32_t rkey;
};

// ---- one PE -------------------------------------------------------------------------------------------
struct Endpoint {
  mlx5dv_devx_obj* qp = nullptr;
  uint32_t qpn = 0;
  mlx5dv_devx_uar* uar = nullptr;
  mlx5dv_devx_uar* cq_uar = nullptr;
  mlx5dv_devx_obj* cq = nullptr;
  uint32_t cqn = 0;
  m::Cqe64* cqe = nullptr;  // the collapsed CQ's single CQE
  uint8_t* wq = nullptr;
  uint32_t* dbrec = nullptr;  // [0] receive, [1] send
  uint64_t prod_idx = 0;      // the GPU's producer index (WQEBBs)
  uint64_t cons_idx = 0;
  bool dci = false;
};

struct Pe {
  std::string name;
  ibv_context* ctx = nullptr;
  ibv_device_attr dev_attr{};
  ibv_port_attr port{};
  ibv_gid gid{};
  ibv_pd* pd = nullptr;
  uint32_t pdn = 0;
  // qp_shared_object / cq_shared_object
  ibv_srq* srq = nullptr;
  uint32_t srqn = 0;
  ibv_cq* rcq = nullptr;
  uint32_t rcqn = 0;
  uint8_t* cq_buf = nullptr;
  uint8_t* cq_dbr = nullptr;
  uint8_t* wq_buf = nullptr;
  uint8_t* qp_dbr = nullptr;
  mlx5dv_devx_umem *cq_umem = nullptr, *cq_dbr_umem = nullptr, *wq_umem = nullptr, *qp_dbr_umem = nullptr;
  size_t next_cq = 0, next_qp = 0;
  // dct
  ibv_pd* dct_pd = nullptr;
  ibv_srq* dct_srq = nullptr;
  ibv_cq *dct_scq = nullptr, *dct_rcq = nullptr;
  ibv_ah* dct_ah = nullptr;
  mlx5dv_ah dah{};
  ibv_qp* dct = nullptr;
  // endpoints
  Endpoint dci, rc;
  // memory
  uint8_t* heap = nullptr;
  ibv_mr* heap_mr = nullptr;
  uint8_t* ibuf = nullptr;  // the internal buffer fetch results land in
  ibv_mr* ibuf_mr = nullptr;
};

uint32_t status_of(const void* out) { return prm::get(out, prm::create_qp_out::status); }

bool query_caps(Pe& pe, uint32_t type, uint32_t* out, size_t outlen) {
  uint32_t in[prm::kShortInBits / 32] = {};
  prm::set(in, prm::query_hca_cap_in::opcode, prm::kOpQueryHcaCap);
  prm::set(in, prm::query_hca_cap_in::op_mod, (type << 1) | 1);  // HCA_CAP_OPMOD_GET_CUR
  return mlx5dv_devx_general_cmd(pe.ctx, in, sizeof in, out, outlen) == 0 && status_of(out) == 0;
}

// Transport init and the per-device checks (nvshmemt_init): ibv_open_device, query_device, the
// mlx5 caps probe, the extended-atomics check, query_port/gid, alloc_pd, the endianness query,
// the data-direct probe (mlx5dv_reg_dmabuf_mr of nothing must fail with EOPNOTSUPP).
bool open_pe(Pe& pe, ibv_device* dev) {
  expect_label() = pe.name + " init";
  pe.ctx = ibv_open_device(dev);  // NVSHMEM opens with plain verbs; rdma-core's mlx5 enables DEVX
  EXPECT(pe.ctx != nullptr, "ibv_open_device: errno %d", errno);
  if (!pe.ctx) return false;
  EXPECT(mlx5dv_is_supported(dev), "mlx5dv_is_supported");
  EXPECT(ibv_query_device(pe.ctx, &pe.dev_attr) == 0 && pe.dev_attr.phys_port_cnt == 1, "ibv_query_device");
  static uint32_t caps[prm::kQueryHcaCapOutBits / 32];
  EXPECT(query_caps(pe, prm::kCapOpModGeneral, caps, sizeof caps), "QUERY_HCA_CAP general on an ibv_open_device context");
  const uint32_t cap = prm::query_hca_cap_out::capability.off;
  EXPECT(prm::get(caps, prm::cmd_hca_cap::cqe_version.at(cap)) == 1, "cqe_version 1 (NVSHMEM refuses others)");
  EXPECT(prm::get(caps, prm::cmd_hca_cap::log_bf_reg_size.at(cap)) >= 8, "log_bf_reg_size");
  EXPECT(prm::get(caps, prm::cmd_hca_cap::dct.at(cap)) == 1, "dct capability");
  EXPECT(query_caps(pe, prm::kCapOpModAtomic, caps, sizeof caps), "QUERY_HCA_CAP atomic");
  const uint32_t ops = prm::get(caps, prm::atomic_caps::atomic_operations.at(cap));
  EXPECT((ops & 0xf) == 0xf, "atomic_operations 0x%x: CAS, FA, masked CAS, masked FA", ops);
  EXPECT((prm::get(caps, prm::atomic_caps::atomic_size_qp.at(cap)) & 0xc) == 0xc &&
             (prm::get(caps, prm::atomic_caps::atomic_size_dc.at(cap)) & 0xc) == 0xc,
         "4- and 8-byte atomics on QPs and DCs");
  EXPECT(prm::get(caps, prm::atomic_caps::supported_atomic_req_8B_endianness_mode_1.at(cap)) == 1 &&
             prm::get(caps, prm::atomic_caps::atomic_req_8B_endianness_mode.at(cap)) == 1,
         "8-byte atomics in host byte order");
  EXPECT(ibv_query_port(pe.ctx, 1, &pe.port) == 0 && pe.port.state == IBV_PORT_ACTIVE, "ibv_query_port");
  EXPECT(ibv_query_gid(pe.ctx, 1, 0, &pe.gid) == 0, "ibv_query_gid");
  pe.pd = ibv_alloc_pd(pe.ctx);
  EXPECT(pe.pd != nullptr, "ibv_alloc_pd");
  if (!pe.pd) return false;
  // The data-direct probe: mlx5dv_reg_dmabuf_mr (MLX5_1.25, looked up as NVSHMEM does: rdma-core
  // before 54 does not declare it) of nothing must fail with EOPNOTSUPP.
  using RegDmabufMr = ibv_mr* (*)(ibv_pd*, uint64_t, size_t, uint64_t, int, int, int);
  void* lib = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_NOLOAD);
  auto reg = lib ? reinterpret_cast<RegDmabufMr>(dlvsym(lib, "mlx5dv_reg_dmabuf_mr", "MLX5_1.25")) : nullptr;
  EXPECT(reg != nullptr, "mlx5dv_reg_dmabuf_mr@MLX5_1.25 is exported");
  errno = 0;
  EXPECT(reg && reg(pe.pd, 0, 0, 0, -1, 0, 0) == nullptr && errno == EOPNOTSUPP,
         "data-direct probe: mlx5dv_reg_dmabuf_mr must fail with EOPNOTSUPP (errno %d)", errno);
  return true;
}

// ibgda_mobject_nic_map for host control memory: dmabuf refused, then umem by address.
mlx5dv_devx_umem* map_umem(Pe& pe, void* addr, size_t size) {
  mlx5dv_devx_umem_in in{};
  in.addr = nullptr;
  in.size = size;
  in.access = IBV_ACCESS_LOCAL_WRITE;
  in.pgsz_bitmap = ~uint64_t(4095);
  in.comp_mask = MLX5DV_UMEM_MASK_DMABUF;
  in.dmabuf_fd = 0;
  errno = 0;
  EXPECT(mlx5dv_devx_umem_reg_ex(pe.ctx, &in) == nullptr && errno == EOPNOTSUPP, "dmabuf umem refused (errno %d)", errno);
  mlx5dv_devx_umem* u = mlx5dv_devx_umem_reg(pe.ctx, addr, size, IBV_ACCESS_LOCAL_WRITE);
  EXPECT(u != nullptr, "mlx5dv_devx_umem_reg: errno %d", errno);
  return u;
}

void* host_alloc(size_t n, int fill) {
  void* p = std::aligned_alloc(1 << 16, (n + 0xffff) & ~size_t(0xffff));
  std::memset(p, fill, n);
  return p;
}

// ibgda_create_cq_shared_objects and ibgda_create_qp_shared_objects (two endpoints: one DCI, one RC).
bool shared_objects(Pe& pe) {
  expect_label() = pe.name + " shared objects";
  const size_t neps = 2;
  pe.cq_buf = static_cast<uint8_t*>(host_alloc(neps * kQpDepth * 64, 0xff));  // NVSHMEM fills CQs with 0xff
  pe.cq_dbr = static_cast<uint8_t*>(host_alloc(neps * kDbrSize, 0));
  pe.cq_umem = map_umem(pe, pe.cq_buf, neps * kQpDepth * 64);
  pe.cq_dbr_umem = map_umem(pe, pe.cq_dbr, neps * kDbrSize);
  mlx5dv_pd dvpd{};
  mlx5dv_obj obj{};
  obj.pd.in = pe.pd;
  obj.pd.out = &dvpd;
  EXPECT(mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD) == 0, "init_obj PD");
  pe.pdn = dvpd.pdn;
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = kSrqDepth;
  sa.attr.max_sge = 1;
  pe.srq = ibv_create_srq(pe.pd, &sa);
  EXPECT(pe.srq != nullptr, "ibv_create_srq: errno %d", errno);
  mlx5dv_srq dvsrq{};
  dvsrq.comp_mask = MLX5DV_SRQ_MASK_SRQN;
  obj = {};
  obj.srq.in = pe.srq;
  obj.srq.out = &dvsrq;
  EXPECT(pe.srq && mlx5dv_init_obj(&obj, MLX5DV_OBJ_SRQ) == 0 && dvsrq.srqn != 0, "init_obj SRQ gives an srqn");
  pe.srqn = dvsrq.srqn;
  pe.rcq = ibv_create_cq(pe.ctx, kSrqDepth, nullptr, nullptr, 0);
  mlx5dv_cq dvcq{};
  obj = {};
  obj.cq.in = pe.rcq;
  obj.cq.out = &dvcq;
  EXPECT(pe.rcq && mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ) == 0, "verbs recv CQ and init_obj CQ");
  pe.rcqn = dvcq.cqn;
  pe.wq_buf = static_cast<uint8_t*>(host_alloc(neps * kQpDepth * 64, 0));
  pe.qp_dbr = static_cast<uint8_t*>(host_alloc(neps * kDbrSize, 0));
  pe.wq_umem = map_umem(pe, pe.wq_buf, neps * kQpDepth * 64);
  pe.qp_dbr_umem = map_umem(pe, pe.qp_dbr, neps * kDbrSize);
  return pe.srq && pe.rcq && pe.cq_umem && pe.wq_umem && pe.qp_dbr_umem && pe.cq_dbr_umem;
}

// ibgda_create_cq: collapsed, overrun ignore, 64-byte CQEs, on an NC UAR it never rings.
bool create_cq(Pe& pe, Endpoint& ep) {
  uint32_t eqn = 99;
  EXPECT(mlx5dv_devx_query_eqn(pe.ctx, 0, &eqn) == 0 && eqn == 0, "query_eqn(0)");
  ep.cq_uar = mlx5dv_devx_alloc_uar(pe.ctx, MLX5DV_UAR_ALLOC_TYPE_NC);
  EXPECT(ep.cq_uar != nullptr, "NC UAR for the CQ");
  if (!ep.cq_uar) return false;
  uint32_t in[prm::kCqCmdInBits / 32] = {}, out[prm::kHdrOutBits / 32] = {};
  const uint32_t cqc = prm::create_cq_in::cq_context.off;
  const size_t off = pe.next_cq * kQpDepth * 64;
  prm::set(in, prm::create_cq_in::opcode, prm::kOpCreateCq);
  prm::set(in, prm::create_cq_in::cq_umem_id, pe.cq_umem->umem_id);
  prm::set(in, prm::create_cq_in::cq_umem_valid, 1);
  prm::set64(in, prm::create_cq_in::cq_umem_offset, off);
  prm::set(in, prm::cqc::dbr_umem_valid.at(cqc), 1);
  prm::set(in, prm::cqc::cqe_sz.at(cqc), 0);
  prm::set(in, prm::cqc::cc.at(cqc), 1);
  prm::set(in, prm::cqc::oi.at(cqc), 1);
  prm::set(in, prm::cqc::dbr_umem_id.at(cqc), pe.cq_dbr_umem->umem_id);
  prm::set(in, prm::cqc::log_cq_size.at(cqc), ilog2(kQpDepth));
  prm::set(in, prm::cqc::uar_page.at(cqc), ep.cq_uar->page_id);
  prm::set(in, prm::cqc::c_eqn_or_apu_element.at(cqc), eqn);
  prm::set(in, prm::cqc::log_page_size.at(cqc), 16 - 12);
  prm::set64(in, prm::cqc::dbr_addr.at(cqc), pe.next_cq * kDbrSize);
  ep.cq = mlx5dv_devx_obj_create(pe.ctx, in, sizeof in, out, sizeof out);
  EXPECT(ep.cq != nullptr, "CREATE_CQ: errno %d status 0x%x syndrome 0x%x", errno, status_of(out),
         prm::get(out, prm::create_cq_out::syndrome));
  ep.cqn = prm::get(out, prm::create_cq_out::cqn);
  ep.cqe = reinterpret_cast<m::Cqe64*>(pe.cq_buf + off);
  ++pe.next_cq;
  return ep.cq != nullptr;
}

// ibgda_create_qp: RC or DCI on the SRQ, the WQ and dbrec in the shared umems, a dedicated NC UAR.
bool create_qp(Pe& pe, Endpoint& ep, bool dci, uint32_t index) {
  if (!create_cq(pe, ep)) return false;
  ep.uar = mlx5dv_devx_alloc_uar(pe.ctx, 2 /* MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED */);
  EXPECT(ep.uar != nullptr, "NC_DEDICATED UAR");
  if (!ep.uar) return false;
  uint32_t in[prm::kQpCmdInBits / 32] = {}, out[prm::kHdrOutBits / 32] = {};
  const uint32_t c = prm::create_qp_in::qpc.off;
  const size_t wq_off = pe.next_qp * kQpDepth * 64;
  prm::set(in, prm::create_qp_in::opcode, prm::kOpCreateQp);
  prm::set(in, prm::create_qp_in::wq_umem_id, pe.wq_umem->umem_id);
  prm::set64(in, prm::create_qp_in::wq_umem_offset, wq_off);
  prm::set(in, prm::create_qp_in::wq_umem_valid, 1);
  prm::set(in, prm::qpc::st.at(c), dci ? prm::kQpStDci : prm::kQpStRc);
  prm::set(in, prm::qpc::pm_state.at(c), prm::kPmStateMigrated);
  prm::set(in, prm::qpc::pd.at(c), pe.pdn);
  prm::set(in, prm::qpc::uar_page.at(c), ep.uar->page_id);
  prm::set(in, prm::qpc::rq_type.at(c), prm::kRqTypeSrq);
  prm::set(in, prm::qpc::srqn_rmpn_xrqn.at(c), pe.srqn);
  prm::set(in, prm::qpc::cqn_snd.at(c), ep.cqn);
  prm::set(in, prm::qpc::cqn_rcv.at(c), pe.rcqn);
  prm::set(in, prm::qpc::log_sq_size.at(c), ilog2(kQpDepth));
  prm::set(in, prm::qpc::log_rq_size.at(c), 0);
  prm::set(in, prm::qpc::cs_req.at(c), 0);
  prm::set(in, prm::qpc::cs_res.at(c), 0);
  prm::set(in, prm::qpc::dbr_umem_valid.at(c), 1);
  prm::set64(in, prm::qpc::dbr_addr.at(c), pe.next_qp * kDbrSize);
  prm::set(in, prm::qpc::dbr_umem_id.at(c), pe.qp_dbr_umem->umem_id);
  prm::set(in, prm::qpc::user_index.at(c), index);
  prm::set(in, prm::qpc::page_offset.at(c), 0);
  ep.qp = mlx5dv_devx_obj_create(pe.ctx, in, sizeof in, out, sizeof out);
  EXPECT(ep.qp != nullptr, "CREATE_QP %s: errno %d status 0x%x syndrome 0x%x", dci ? "DCI" : "RC", errno,
         status_of(out), prm::get(out, prm::create_qp_out::syndrome));
  ep.qpn = prm::get(out, prm::create_qp_out::qpn);
  ep.wq = pe.wq_buf + wq_off;
  ep.dbrec = reinterpret_cast<uint32_t*>(pe.qp_dbr + pe.next_qp * kDbrSize);
  ep.dci = dci;
  ++pe.next_qp;
  return ep.qp != nullptr;
}

bool modify(Endpoint& ep, uint32_t opcode, uint32_t* in, size_t inlen, const char* what) {
  uint32_t out[prm::kHdrOutBits / 32] = {};
  prm::set(in, prm::rst2init_qp_in::opcode, opcode);
  prm::set(in, prm::rst2init_qp_in::qpn, ep.qpn);
  const int rc = mlx5dv_devx_obj_modify(ep.qp, in, inlen, out, sizeof out);
  EXPECT(rc == 0, "%s: rc %d status 0x%x syndrome 0x%x", what, rc, status_of(out), prm::get(out, prm::create_qp_out::syndrome));
  return rc == 0;
}

// ibgda_qp_rst2init (RC: access flags and atomic mode; DCI: the DC access key), then
// ibgda_rc_init2rtr / ibgda_dci_init2rtr (no vhca_port_num: the port stays RST2INIT's), then
// ibgda_qp_rtr2rts.
bool connect(Pe& pe, Endpoint& ep, const Handles* peer) {
  const uint32_t c = prm::rst2init_qp_in::qpc.off;
  const uint32_t path = c + prm::qpc::primary_address_path.off;
  const bool ib = pe.port.link_layer == IBV_LINK_LAYER_INFINIBAND;
  uint32_t in[prm::kQpCmdInBits / 32] = {};
  if (ep.dci) {
    prm::set64(in, prm::qpc::dc_access_key.at(c), kDcAccessKey);
  } else {
    prm::set(in, prm::qpc::rwe.at(c), 1);
    prm::set(in, prm::qpc::rre.at(c), 1);
    prm::set(in, prm::qpc::rae.at(c), 1);
    prm::set(in, prm::qpc::atomic_mode.at(c), prm::kQpcAtomicModeUpTo8B);
  }
  prm::set(in, prm::ads::vhca_port_num.at(path), 1);
  if (ib) prm::set(in, prm::ads::pkey_index.at(path), 0);
  prm::set(in, prm::qpc::pm_state.at(c), prm::kPmStateMigrated);
  prm::set(in, prm::qpc::counter_set_id.at(c), 0);
  if (!modify(ep, prm::kOpRst2InitQp, in, sizeof in, "RST2INIT")) return false;
  std::memset(in, 0, sizeof in);
  prm::set(in, prm::qpc::mtu.at(c), pe.port.active_mtu);
  prm::set(in, prm::qpc::log_msg_max.at(c), 30);
  if (!ep.dci) {
    prm::set(in, prm::qpc::remote_qpn.at(c), peer->rc_qpn);
    prm::set(in, prm::qpc::min_rnr_nak.at(c), 12);
    prm::set(in, prm::qpc::log_rra_max.at(c), ilog2(pe.dev_attr.max_qp_rd_atom));
  }
  if (ib) {
    prm::set(in, prm::ads::sl.at(path), 0);
    if (!ep.dci) {
      prm::set(in, prm::ads::tclass.at(path), 0);
      prm::set(in, prm::ads::rlid.at(path), peer->lid);
      prm::set(in, prm::ads::mlid.at(path), 0);
      prm::set(in, prm::ads::grh.at(path), 0);
    }
  } else {
    prm::set(in, prm::ads::tclass.at(path), 0);
    prm::set(in, prm::ads::eth_prio.at(path), 0);
    prm::set(in, prm::ads::dscp.at(path), 0);
    if (!ep.dci) {
      // RoCE: an AH for the peer's GID gives the rmac; rgid, hop limit, source GID index, UDP port.
      ibv_ah_attr ah{};
      ah.is_global = 1;
      ah.port_num = 1;
      std::memcpy(ah.grh.dgid.raw, peer->gid, 16);
      ah.grh.sgid_index = 0;
      ah.dlid = 0xc000;
      ibv_ah* a = ibv_create_ah(pe.pd, &ah);
      mlx5dv_ah dah{};
      mlx5dv_obj obj{};
      obj.ah.in = a;
      obj.ah.out = &dah;
      EXPECT(a && mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH) == 0 && std::memcmp(dah.av->rgid, peer->gid, 16) == 0,
             "RoCE AH and its address vector");
      if (!a) return false;
      std::memcpy(reinterpret_cast<uint8_t*>(in) + prm::ads::rmac_47_32.at(path).off / 8, dah.av->rmac, 6);
      prm::set(in, prm::ads::hop_limit.at(path), 255);
      prm::set(in, prm::ads::src_addr_index.at(path), 0);
      prm::set(in, prm::ads::udp_sport.at(path), ah.dlid);
      prm::set(in, prm::ads::grh.at(path), 1);
      prm::set_bytes(in, prm::ads::rgid_rip.at(path), dah.av->rgid, 16);
    }
  }
  if (!modify(ep, prm::kOpInit2RtrQp, in, sizeof in, ep.dci ? "DCI INIT2RTR" : "RC INIT2RTR")) return false;
  std::memset(in, 0, sizeof in);
  prm::set(in, prm::qpc::log_ack_req_freq.at(c), 0);
  prm::set(in, prm::qpc::log_sra_max.at(c), ilog2(pe.dev_attr.max_qp_rd_atom));
  prm::set(in, prm::qpc::next_send_psn.at(c), 0);
  prm::set(in, prm::qpc::retry_count.at(c), 7);
  prm::set(in, prm::qpc::rnr_retry.at(c), 7);
  prm::set(in, prm::ads::ack_timeout.at(path), 20);
  return modify(ep, prm::kOpRtr2RtsQp, in, sizeof in, "RTR2RTS");
}

// ibgda_create_dct_shared_objects + ibgda_create_dct: a parent domain, an SRQ and two CQs, an AH
// to the PE's own port (its address vector is the DCT handle), the DCT by mlx5dv_create_qp and
// two ibv_modify_qp transitions.
bool create_dct(Pe& pe) {
  expect_label() = pe.name + " DCT";
  ibv_parent_domain_init_attr pa{};
  pa.pd = pe.pd;
  pe.dct_pd = ibv_alloc_parent_domain(pe.ctx, &pa);
  EXPECT(pe.dct_pd != nullptr, "ibv_alloc_parent_domain: errno %d", errno);
  if (!pe.dct_pd) return false;
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = kSrqDepth;
  sa.attr.max_sge = 1;
  pe.dct_srq = ibv_create_srq(pe.dct_pd, &sa);
  pe.dct_scq = ibv_create_cq(pe.ctx, kSrqDepth, nullptr, nullptr, 0);
  pe.dct_rcq = ibv_create_cq(pe.ctx, kSrqDepth, nullptr, nullptr, 0);
  EXPECT(pe.dct_srq && pe.dct_scq && pe.dct_rcq, "DCT SRQ and CQs");
  ibv_ah_attr ah{};
  if (pe.port.lid == 0) {
    ah.is_global = 1;
    std::memcpy(ah.grh.dgid.raw, pe.gid.raw, 16);
    ah.grh.sgid_index = 0;
    ah.grh.hop_limit = 255;
  } else {
    ah.dlid = pe.port.lid;
  }
  ah.port_num = 1;
  pe.dct_ah = ibv_create_ah(pe.pd, &ah);
  mlx5dv_obj obj{};
  obj.ah.in = pe.dct_ah;
  obj.ah.out = &pe.dah;
  EXPECT(pe.dct_ah && mlx5dv_init_obj(&obj, MLX5DV_OBJ_AH) == 0 && pe.dah.av != nullptr, "AH and init_obj AH");
  if (!pe.dct_ah) return false;
  if (pe.port.lid != 0) EXPECT(be16toh(pe.dah.av->rlid) == pe.port.lid, "AV rlid");
  ibv_qp_init_attr_ex qa{};
  mlx5dv_qp_init_attr dv{};
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
  dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
  dv.dc_init_attr.dct_access_key = kDcAccessKey;
  qa.pd = pe.dct_pd;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD;
  qa.qp_type = IBV_QPT_DRIVER;
  qa.srq = pe.dct_srq;
  qa.send_cq = pe.dct_scq;
  qa.recv_cq = pe.dct_rcq;
  qa.cap.max_send_wr = kQpDepth;
  qa.cap.max_recv_wr = kQpDepth;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = 256;
  pe.dct = mlx5dv_create_qp(pe.ctx, &qa, &dv);
  EXPECT(pe.dct != nullptr, "mlx5dv_create_qp DCT: errno %d", errno);
  if (!pe.dct) return false;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
  EXPECT(ibv_modify_qp(pe.dct, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0, "DCT RST2INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = pe.port.active_mtu;
  a.min_rnr_timer = 12;
  a.ah_attr = ah;
  EXPECT(ibv_modify_qp(pe.dct, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_MIN_RNR_TIMER) == 0, "DCT INIT2RTR");
  // A transition the DCT does not take: EINVAL, state unchanged.
  a = {};
  a.qp_state = IBV_QPS_RTS;
  EXPECT(ibv_modify_qp(pe.dct, &a, IBV_QP_STATE) != 0, "DCT RTR->RTS is refused");
  return true;
}

bool register_heap(Pe& pe) {
  pe.heap = static_cast<uint8_t*>(host_alloc(kHeap, 0));
  pe.ibuf = static_cast<uint8_t*>(host_alloc(1 << 16, 0));
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  errno = 0;
  EXPECT(ibv_reg_dmabuf_mr(pe.pd, 0, kHeap, reinterpret_cast<uint64_t>(pe.heap), 3, access) == nullptr && errno == EOPNOTSUPP,
         "dmabuf MR refused (NVSHMEM falls back to ibv_reg_mr)");
  pe.heap_mr = ibv_reg_mr(pe.pd, pe.heap, kHeap, access);
  pe.ibuf_mr = ibv_reg_mr(pe.pd, pe.ibuf, 1 << 16, access);
  EXPECT(pe.heap_mr && pe.ibuf_mr, "ibv_reg_mr");
  return pe.heap_mr && pe.ibuf_mr;
}

// Everything NVSHMEM creates on a PE before the handle exchange.
bool setup(Pe& pe, ibv_device* dev) {
  return open_pe(pe, dev) && shared_objects(pe) && create_dct(pe) && register_heap(pe) &&
         (expect_label() = pe.name + " endpoints", create_qp(pe, pe.dci, true, 0) && create_qp(pe, pe.rc, false, 0));
}

Handles handles_of(const Pe& pe) {
  Handles h{};
  h.rc_qpn = pe.rc.qpn;
  h.lid = pe.port.lid;
  std::memcpy(h.gid, pe.gid.raw, 16);
  // ibgda_get_dct_handle + ibgda_get_device_dct: the AV, the DCT number with the extended-AV bit
  // (set unless the compact form is supported) and the DC key, in wire order.
  mlx5_wqe_av av = *pe.dah.av;
  av.key.dc_key = htobe64(kDcAccessKey);
  av.dqp_dct = htobe32((1u << 31) | pe.dct->qp_num);
  std::memcpy(h.dct_av, &av, 48);
  h.heap = reinterpret_cast<uint64_t>(pe.heap);
  h.rkey = pe.heap_mr->rkey;
  return h;
}

// ---- the device side, on the CPU -------------------------------------------------------------------
uint8_t* wqebb(Endpoint& ep, uint64_t idx) { return ep.wq + (idx & (kQpDepth - 1)) * 64; }

// The CPU-assisted handler: the GPU bumped prod_idx; the proxy writes the doorbell record, then the
// doorbell (ctrl word with the producer index, not the last WQE's) to the UAR register.
void ring(Endpoint& ep) {
  __atomic_store_n(&ep.dbrec[1], htobe32(static_cast<uint32_t>(ep.prod_idx & 0xffff)), __ATOMIC_RELEASE);
  std::atomic_thread_fence(std::memory_order_release);
  uint32_t ctrl[2] = {htobe32(static_cast<uint32_t>(ep.prod_idx << 8)), htobe32(ep.qpn << 8)};
  uint64_t v;
  std::memcpy(&v, ctrl, 8);
  __atomic_store_n(static_cast<uint64_t*>(ep.uar->reg_addr), v, __ATOMIC_RELEASE);
}

// ibgda_poll_cq: wait until CQE 0's wqe_counter reaches idx - 1; the opcode tells an error.
// Returns the CQE opcode (0 request ok, 0xd error), or -1 on timeout.
int poll(Endpoint& ep, uint64_t idx, uint8_t* syndrome = nullptr) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  for (;;) {
    const uint32_t tail = __atomic_load_n(&ep.cqe->w[15], __ATOMIC_ACQUIRE);
    const uint16_t wqe_counter = be16toh(static_cast<uint16_t>(tail & 0xffff));
    const uint8_t opcode = static_cast<uint8_t>(tail >> 24) >> 4;
    if (opcode == m::kCqeReqErr) {
      if (syndrome) *syndrome = reinterpret_cast<const uint8_t*>(ep.cqe)[55];
      return opcode;
    }
    if (static_cast<uint16_t>(static_cast<uint16_t>(idx) - wqe_counter - 2) >= kQpDepth) {
      ep.cons_idx = idx;
      return opcode;
    }
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "poll: QP 0x%x waited for %llu, CQE 0 wqe_counter %u opcode 0x%x\n", ep.qpn,
                   static_cast<unsigned long long>(idx), wqe_counter, opcode);
      return -1;
    }
    std::this_thread::yield();
  }
}

void put_ctrl(Endpoint& ep, uint64_t idx, uint8_t opcode, uint8_t opmod, uint32_t ds, uint8_t fm_ce_se) {
  m::Seg16 s;
  m::set_ctrl_seg(s, static_cast<uint16_t>(idx), opcode, opmod, ep.qpn, fm_ce_se, static_cast<uint8_t>(ds), 0, 0);
  std::memcpy(wqebb(ep, idx), &s, 16);
}

// Writes the segments after ctrl (and the DCI's AV) of a one-WQEBB-or-more WQE at idx.
struct Builder {
  Endpoint& ep;
  uint64_t idx;
  uint32_t n = 1;  // next segment
  void seg(const void* s16) {
    std::memcpy(wqebb(ep, idx + n / 4) + (n % 4) * 16, s16, 16);
    ++n;
  }
  void av(const uint8_t* av48, bool compact) {
    uint8_t a[48];
    std::memcpy(a, av48, 48);
    if (compact) a[8] &= 0x7f;  // dqp_dct without the extended bit: 16-byte AV
    for (int i = 0; i < (compact ? 1 : 3); ++i) seg(a + 16 * i);
  }
  void raddr(uint64_t addr, uint32_t rkey) {
    m::Seg16 s;
    m::set_raddr_seg(s, addr, rkey);
    seg(&s);
  }
  void data(uint64_t addr, uint32_t lkey, uint32_t len) {
    m::Seg16 s;
    m::set_data_seg(s, len, lkey, addr);
    seg(&s);
  }
};

// Closes a WQE as NVSHMEM's device code does: a one-WQEBB WQE carries the CQ update itself; a
// longer one goes unsignaled and a signaled NOP follows it (need_additional_wqe), so CQE 0's
// wqe_counter + 1 is always the producer index quiet waits for. Rings.
// (`tail_nop` false: the WQE is signaled whatever its size; the error cases use that, so the only
// CQE is the error's.)
void finish(Endpoint& ep, const Builder& b, uint8_t opcode, uint8_t opmod, uint8_t fm = 0, bool tail_nop = true) {
  const uint32_t nbb = (b.n * 16 + 63) / 64;
  const bool nop = nbb > 1 && tail_nop;
  put_ctrl(ep, ep.prod_idx, opcode, opmod, b.n, static_cast<uint8_t>(fm | (nop ? 0 : m::kCtrlCqUpdate)));
  ep.prod_idx += nbb;
  if (nop) {
    put_ctrl(ep, ep.prod_idx, m::kOpcodeNop, 0, 1, m::kCtrlCqUpdate);
    ep.prod_idx += 1;
  }
  ring(ep);
}

// One PE's view of its peer: the handles, and access to its memory (directly, or over the socket).
struct Peer {
  Handles h;
  uint8_t* local_heap = nullptr;  // same process: the peer's heap
  int sock = -1;                  // two processes: ask the peer
  std::vector<uint8_t> read(uint64_t off, size_t n) {
    std::vector<uint8_t> v(n);
    if (local_heap) {
      std::memcpy(v.data(), local_heap + off, n);
    } else {
      uint64_t req[2] = {off, n};
      if (write(sock, req, sizeof req) != sizeof req) return {};
      size_t got = 0;
      while (got < n) {
        const ssize_t r = ::read(sock, v.data() + got, n - got);
        if (r <= 0) return {};
        got += static_cast<size_t>(r);
      }
    }
    return v;
  }
  uint64_t u64(uint64_t off) {
    const auto v = read(off, 8);
    uint64_t x = 0;
    if (v.size() == 8) std::memcpy(&x, v.data(), 8);
    return x;
  }
  uint32_t u32(uint64_t off) {
    const auto v = read(off, 4);
    uint32_t x = 0;
    if (v.size() == 4) std::memcpy(&x, v.data(), 4);
    return x;
  }
};

// The target side in two-process mode: serve reads of its heap until the initiator closes.
void serve(Pe& pe, int sock) {
  uint64_t req[2];
  while (::read(sock, req, sizeof req) == sizeof req) {
    if (req[0] + req[1] > kHeap) break;
    if (write(sock, pe.heap + req[0], req[1]) != static_cast<ssize_t>(req[1])) break;
  }
}

uint64_t be64(uint64_t v) { return htobe64(v); }

// One atomic in NVSHMEM's layout (ibgda_write_atomic_wqe), RC or DCI, result into ibuf + rslot.
void post_atomic(Pe& pe, Endpoint& ep, const Peer& peer, bool compact, uint8_t opcode, uint8_t opmod,
                 const m::Seg16* segs, int nsegs, uint64_t roff, uint32_t bytes, uint32_t rslot) {
  Builder b{ep, ep.prod_idx};
  if (ep.dci) b.av(peer.h.dct_av, compact);
  b.raddr(peer.h.heap + roff, peer.h.rkey);
  for (int i = 0; i < nsegs; ++i) b.seg(&segs[i]);
  b.data(reinterpret_cast<uint64_t>(pe.ibuf + rslot), pe.ibuf_mr->lkey, bytes);
  finish(ep, b, opcode, opmod);
}

m::Seg16 seg_words(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return m::Seg16{{a, b, c, d}}; }
m::Seg16 seg_dwords(uint64_t a, uint64_t b) {
  return m::Seg16{{static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32), static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32)}};
}

// The data path of PE 0 (initiator) against PE 1's heap, through endpoint `ep` (RC, or the DCI
// addressing PE 1's DCT with the full or the compact AV).
void exercise(Pe& pe, Endpoint& ep, Peer& peer, bool compact, uint64_t base) {
  std::vector<uint8_t> pattern(4096);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 7 + base);
  std::memcpy(pe.heap + base, pattern.data(), pattern.size());
  // 1. RDMA write by pointer (ibgda_write_rdma_write_wqe), signaled.
  {
    Builder b{ep, ep.prod_idx};
    if (ep.dci) b.av(peer.h.dct_av, compact);
    b.raddr(peer.h.heap + base, peer.h.rkey);
    b.data(reinterpret_cast<uint64_t>(pe.heap + base), pe.heap_mr->lkey, 4096);
    finish(ep, b, m::kOpcodeRdmaWrite, 0);
    EXPECT(poll(ep, ep.prod_idx) == m::kCqeReq, "write by pointer completes");
    EXPECT(peer.read(base, 4096) == pattern, "write by pointer: payload at the target");
  }
  // 2. Inline write of 8 bytes (ibgda_write_rdma_write_inl_wqe, nvshmem_p).
  {
    Builder b{ep, ep.prod_idx};
    if (ep.dci) b.av(peer.h.dct_av, compact);
    b.raddr(peer.h.heap + base + 8192, peer.h.rkey);
    const uint64_t v = 0x1122334455667788ull ^ base;
    m::Seg16 s{};
    m::set_inline_seg(&s, &v, 8);
    b.seg(&s);
    finish(ep, b, m::kOpcodeRdmaWrite, 0);
    EXPECT(poll(ep, ep.prod_idx) == m::kCqeReq, "inline write completes");
    EXPECT(peer.u64(base + 8192) == v, "inline write: value at the target");
  }
  // 3. RC: the warp-combined inline write of 32 x 8 bytes (ds 19, 5 WQEBBs, unsignaled) and the
  //    signaled NOP after it (ibgda_write_rdma_write_inl_wqe_combine_warp).
  if (!ep.dci) {
    uint8_t data[256];
    for (int i = 0; i < 256; ++i) data[i] = static_cast<uint8_t>(255 - i);
    std::vector<uint8_t> image(5 * 64, 0);
    m::Seg16 raddr;
    m::set_raddr_seg(raddr, peer.h.heap + base + 12288, peer.h.rkey);
    std::memcpy(image.data() + 16, &raddr, 16);
    const uint32_t hdr = htobe32(256 | m::kInlineSeg);
    std::memcpy(image.data() + 32, &hdr, 4);
    std::memcpy(image.data() + 36, data, 256);
    for (int w = 0; w < 5; ++w) std::memcpy(wqebb(ep, ep.prod_idx + w), image.data() + 64 * w, 64);
    put_ctrl(ep, ep.prod_idx, m::kOpcodeRdmaWrite, 0, 19, 0);
    put_ctrl(ep, ep.prod_idx + 5, m::kOpcodeNop, 0, 1, m::kCtrlCqUpdate);
    ep.prod_idx += 6;
    ring(ep);
    EXPECT(poll(ep, ep.prod_idx) == m::kCqeReq, "combined inline write + NOP complete");
    EXPECT(peer.read(base + 12288, 256) == std::vector<uint8_t>(data, data + 256), "combined inline write: 256 bytes at the target");
  }
  // 4. RDMA read back into ibuf (ibgda_write_rdma_read_wqe).
  {
    std::memset(pe.ibuf, 0, 4096);
    Builder b{ep, ep.prod_idx};
    if (ep.dci) b.av(peer.h.dct_av, compact);
    b.raddr(peer.h.heap + base, peer.h.rkey);
    b.data(reinterpret_cast<uint64_t>(pe.ibuf), pe.ibuf_mr->lkey, 4096);
    finish(ep, b, m::kOpcodeRdmaRead, 0);
    EXPECT(poll(ep, ep.prod_idx) == m::kCqeReq, "read completes");
    EXPECT(std::memcmp(pe.ibuf, pattern.data(), 4096) == 0, "read: the target's bytes landed");
  }
  // 5. Atomics. 8-byte words at base + 16384, 4-byte words at base + 16512.
  const uint64_t a8 = base + 16384, a4 = base + 16512;
  uint64_t w8 = 1000;
  uint32_t w4 = 0x0f0f00f0;
  {
    // Initial values through an 8-byte masked compare-swap "set" (NVSHMEMI_AMO_SET, 8 B).
    const m::Seg16 s[2] = {seg_dwords(be64(w8), 0), seg_dwords(be64(~0ull), 0)};
    post_atomic(pe, ep, peer, compact, kOpcodeMaskedCs, kOpmod8, s, 2, a8, 8, 0);
    EXPECT(poll(ep, ep.prod_idx) == m::kCqeReq, "8-byte masked CS (set) completes");
    const m::Seg16 t = seg_words(htobe32(w4), 0, 0xffffffffu, 0);
    post_atomic(pe, ep, peer, compact, kOpcodeMaskedCs, kOpmod4, &t, 1, a4, 4, 8);
    EXPECT(poll(ep, ep.prod_idx) == m::kCqeReq, "4-byte masked CS (set) completes");
    EXPECT(peer.u64(a8) == w8 && peer.u32(a4) == w4, "set: 8-byte %llu, 4-byte 0x%x at the target",
           static_cast<unsigned long long>(peer.u64(a8)), peer.u32(a4));
  }
  struct Case {
    const char* what;
    uint8_t opcode, opmod;
    std::vector<m::Seg16> segs;
    bool four;
    uint64_t want_old, want_new;
  };
  const std::vector<Case> cases = {
      {"FA 8 (ATOMIC_FA)", m::kOpcodeAtomicFa, 0, {seg_dwords(be64(5), 0)}, false, w8, w8 + 5},
      {"CS 8 hit", m::kOpcodeAtomicCs, 0, {seg_dwords(be64(77), be64(w8 + 5))}, false, w8 + 5, 77},
      {"CS 8 miss", m::kOpcodeAtomicCs, 0, {seg_dwords(be64(99), be64(1))}, false, 77, 77},
      {"masked FA 8 (add)", kOpcodeMaskedFa, kOpmod8, {seg_dwords(be64(3), 0)}, false, 77, 80},
      {"masked FA 8 (xor)", kOpcodeMaskedFa, kOpmod8, {seg_dwords(be64(0xff), be64(~0ull))}, false, 80, 80 ^ 0xff},
      {"masked CS 8 (and)", kOpcodeMaskedCs, kOpmod8, {seg_dwords(be64(0xf0), 0), seg_dwords(be64(~0xf0ull), 0)}, false,
       80 ^ 0xff, (80 ^ 0xff) & 0xf0},
      {"masked CS 8 (or)", kOpcodeMaskedCs, kOpmod8, {seg_dwords(be64(0x101), 0), seg_dwords(be64(0x101), 0)}, false,
       (80 ^ 0xff) & 0xf0, ((80 ^ 0xff) & 0xf0) | 0x101},
      {"masked FA 4 (add)", kOpcodeMaskedFa, kOpmod4, {seg_words(htobe32(0x10), 0, 0, 0)}, true, w4, w4 + 0x10},
      {"masked FA 4 (xor)", kOpcodeMaskedFa, kOpmod4, {seg_words(htobe32(0xffff), 0xffffffffu, 0, 0)}, true, w4 + 0x10,
       (w4 + 0x10) ^ 0xffff},
      {"masked CS 4 (and)", kOpcodeMaskedCs, kOpmod4, {seg_words(htobe32(0xff00ff00), 0, htobe32(~0xff00ff00u), 0)}, true,
       (w4 + 0x10) ^ 0xffff, ((w4 + 0x10) ^ 0xffff) & 0xff00ff00},
      {"masked CS 4 (or)", kOpcodeMaskedCs, kOpmod4, {seg_words(htobe32(0x3), 0, htobe32(0x3), 0)}, true,
       ((w4 + 0x10) ^ 0xffff) & 0xff00ff00, (((w4 + 0x10) ^ 0xffff) & 0xff00ff00) | 3},
      {"masked CS 4 (compare-swap hit)", kOpcodeMaskedCs, kOpmod4,
       {seg_words(htobe32(42), htobe32((((w4 + 0x10) ^ 0xffff) & 0xff00ff00) | 3), 0xffffffffu, 0xffffffffu)}, true,
       (((w4 + 0x10) ^ 0xffff) & 0xff00ff00) | 3, 42},
      {"masked CS 4 (compare-swap miss)", kOpcodeMaskedCs, kOpmod4,
       {seg_words(htobe32(7), htobe32(1), 0xffffffffu, 0xffffffffu)}, true, 42, 42},
  };
  for (const Case& c : cases) {
    std::memset(pe.ibuf + 64, 0xee, 8);
    post_atomic(pe, ep, peer, compact, c.opcode, c.opmod, c.segs.data(), static_cast<int>(c.segs.size()), c.four ? a4 : a8,
                c.four ? 4 : 8, 64);
    const int op = poll(ep, ep.prod_idx);
    uint64_t old = 0, now = 0;
    if (c.four) {
      uint32_t be = 0;
      std::memcpy(&be, pe.ibuf + 64, 4);
      old = be32toh(be);  // 4-byte results come back in network order (NVSHMEM swaps them)
      now = peer.u32(a4);
    } else {
      std::memcpy(&old, pe.ibuf + 64, 8);
      now = peer.u64(a8);
    }
    EXPECT(op == m::kCqeReq && old == c.want_old && now == c.want_new, "%s: CQE 0x%x, old 0x%llx (want 0x%llx), now 0x%llx (want 0x%llx)",
           c.what, op, static_cast<unsigned long long>(old), static_cast<unsigned long long>(c.want_old),
           static_cast<unsigned long long>(now), static_cast<unsigned long long>(c.want_new));
  }
  // 6. NOP (ibgda_write_nop_wqe: ds 2) and DUMP with a fence (ibgda_write_dump_wqe, the CST op).
  {
    put_ctrl(ep, ep.prod_idx, m::kOpcodeNop, 0, 2, m::kCtrlCqUpdate);
    ep.prod_idx += 1;
    ring(ep);
    EXPECT(poll(ep, ep.prod_idx) == m::kCqeReq, "NOP completes");
    Builder b{ep, ep.prod_idx};
    b.data(reinterpret_cast<uint64_t>(pe.ibuf), pe.ibuf_mr->lkey, 1);
    finish(ep, b, kOpcodeDump, 0, kFmFence);
    EXPECT(poll(ep, ep.prod_idx) == m::kCqeReq, "DUMP with a fence completes");
  }
  // 7. A batch: 16 unsignaled inline writes, then one signaled, one doorbell (NVSHMEM batches
  //    requests and rings once).
  {
    for (int i = 0; i < 17; ++i) {
      Builder b{ep, ep.prod_idx};
      if (ep.dci) b.av(peer.h.dct_av, compact);
      b.raddr(peer.h.heap + base + 20480 + 8 * i, peer.h.rkey);
      const uint64_t v = 0xabc000 + i;
      m::Seg16 s{};
      m::set_inline_seg(&s, &v, 8);
      b.seg(&s);
      put_ctrl(ep, ep.prod_idx, m::kOpcodeRdmaWrite, 0, b.n, 0);
      ep.prod_idx += (b.n * 16 + 63) / 64;
    }
    put_ctrl(ep, ep.prod_idx, m::kOpcodeNop, 0, 1, m::kCtrlCqUpdate);
    ep.prod_idx += 1;
    ring(ep);
    EXPECT(poll(ep, ep.prod_idx) == m::kCqeReq, "batch of 17 completes");
    bool all = true;
    for (int i = 0; i < 17; ++i) all = all && peer.u64(base + 20480 + 8 * i) == 0xabc000u + i;
    EXPECT(all, "batch: every value at the target");
  }
}

int run_initiator(Pe& pe, Peer& peer) {
  expect_label() = pe.name + " RC";
  exercise(pe, pe.rc, peer, false, 0);
  expect_label() = pe.name + " DCI (full AV)";
  exercise(pe, pe.dci, peer, false, 65536);
  if (pe.port.lid != 0) {  // the 16-byte AV has a LID, no GID: IB only (as NVSHMEM uses it)
    expect_label() = pe.name + " DCI (compact AV)";
    exercise(pe, pe.dci, peer, true, 131072);
  }
  // Errors last (they leave the QPs in ERR): a bad rkey on RC, a wrong DC key on the DCI.
  expect_label() = pe.name + " errors";
  {
    Endpoint& ep = pe.rc;
    Builder b{ep, ep.prod_idx};
    b.raddr(peer.h.heap, peer.h.rkey ^ 0x5500);
    b.data(reinterpret_cast<uint64_t>(pe.heap), pe.heap_mr->lkey, 64);
    finish(ep, b, m::kOpcodeRdmaWrite, 0, 0, false);
    uint8_t syn = 0;
    EXPECT(poll(ep, ep.prod_idx, &syn) == m::kCqeReqErr && syn == m::kSyndromeRemoteAccess,
           "bad rkey: REQ_ERR with REMOTE_ACCESS (syndrome 0x%x)", syn);
  }
  {
    Endpoint& ep = pe.dci;
    uint8_t av[48];
    std::memcpy(av, peer.h.dct_av, 48);
    av[0] ^= 0x5a;  // the DC key, first byte
    Builder b{ep, ep.prod_idx};
    b.av(av, false);
    b.raddr(peer.h.heap, peer.h.rkey);
    b.data(reinterpret_cast<uint64_t>(pe.heap), pe.heap_mr->lkey, 64);
    finish(ep, b, m::kOpcodeRdmaWrite, 0, 0, false);
    uint8_t syn = 0;
    EXPECT(poll(ep, ep.prod_idx, &syn) == m::kCqeReqErr && syn == m::kSyndromeRemoteAccess,
           "wrong DC key: REQ_ERR with REMOTE_ACCESS (syndrome 0x%x)", syn);
  }
  return expect_failures();
}

ibv_device* device(ibv_device** list, int n, int i) { return i < n ? list[i] : nullptr; }

}  // namespace

int main(int argc, char** argv) {
  const bool two_process = argc > 1 && std::strcmp(argv[1], "--two-process") == 0;
  if (!two_process) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (n < 2 || !mlx5dv_is_supported(list[0])) {
      std::printf("nvshmem_replay: needs two emulated mlx5 devices (found %d)\n", n);
      return 77;
    }
    Pe pe0, pe1;
    pe0.name = "PE 0 (" + std::string(list[0]->name) + ")";
    pe1.name = "PE 1 (" + std::string(list[1]->name) + ")";
    if (!setup(pe0, device(list, n, 0)) || !setup(pe1, device(list, n, 1))) return 1;
    const Handles h0 = handles_of(pe0), h1 = handles_of(pe1);
    expect_label() = "connect";
    if (!connect(pe0, pe0.dci, nullptr) || !connect(pe1, pe1.dci, nullptr) || !connect(pe0, pe0.rc, &h1) ||
        !connect(pe1, pe1.rc, &h0))
      return 1;
    Peer peer{h1, pe1.heap, -1};
    const int fails = run_initiator(pe0, peer);
    std::printf("nvshmem_replay: %s (one process, %s and %s)\n", fails ? "FAILED" : "ok", list[0]->name, list[1]->name);
    return fails ? 1 : 0;
  }
  // Two processes: fork first, so each claims its own emulated host.
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  const pid_t child = fork();
  const int rank = child == 0 ? 1 : 0;
  const int sock = sv[rank];
  close(sv[1 - rank]);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (n < 1) {
    std::printf("nvshmem_replay: no emulated device\n");
    return 77;
  }
  Pe pe;
  pe.name = "PE " + std::to_string(rank);
  if (!setup(pe, list[0])) return 1;
  const Handles mine = handles_of(pe);
  Handles theirs{};
  if (write(sock, &mine, sizeof mine) != sizeof mine || ::read(sock, &theirs, sizeof theirs) != sizeof theirs) return 1;
  expect_label() = pe.name + " connect";
  if (!connect(pe, pe.dci, nullptr) || !connect(pe, pe.rc, &theirs)) return 1;
  char go = 'g';
  if (write(sock, &go, 1) != 1 || ::read(sock, &go, 1) != 1) return 1;  // both connected
  if (rank == 1) {
    serve(pe, sock);
    std::_Exit(expect_failures() ? 1 : 0);
  }
  Peer peer{theirs, nullptr, sock};
  const int fails = run_initiator(pe, peer);
  shutdown(sock, SHUT_WR);
  int status = 0;
  waitpid(child, &status, 0);
  const bool target_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  EXPECT(target_ok, "the target process exited with status %d", status);
  std::printf("nvshmem_replay: %s (two processes, %s each, over the wire)\n", fails || !target_ok ? "FAILED" : "ok",
              list[0]->name);
  return fails || !target_ok ? 1 : 0;
}
