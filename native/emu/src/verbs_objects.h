// The public verbs structs of the emulated libibverbs, each with our object beside it.
#pragma once

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "emu.h"

namespace gicomm::emu {

// Device limits the emulated mlx5 reports (and enforces). A WQE is at most 4 WQEBBs (256 bytes),
// what the softnic core reads, so: 14 gather entries after ctrl and raddr, 220 inline bytes.
constexpr uint32_t kMaxQpWr = 8192;
constexpr uint32_t kMaxSrqWr = 32767;
constexpr uint32_t kMaxSge = 14;
constexpr uint32_t kMaxInline = 220;
constexpr uint32_t kMaxCqe = (1u << 22) - 1;
constexpr uint32_t kMaxRdAtomic = 16;
constexpr uint32_t kPkeyTableIb = 128;
constexpr uint32_t kGidTableLen = 16;
constexpr uint32_t kVendorMellanox = 0x02c9;
constexpr uint32_t kPartConnectX7 = 4129;
constexpr const char* kFwVersion = "gicomm-emu 1.0 (emulated mlx5, softnic engine)";

struct VDevice {
  ibv_device dev;  // first: ibv_device* points here
  uint32_t index;
};

struct VContext {
  verbs_context vctx;  // ends with the ibv_context applications hold
  Context core;
};

struct VPd {
  ibv_pd pd;
  uint32_t pdn = 0;
  uint32_t refs = 0;       // MRs, QPs, SRQs, AHs and parent domains that use it
  VPd* parent = nullptr;   // a parent domain: the PD it wraps (its pdn is the parent's)
};

struct VMr {
  ibv_mr mr;
  Nic* nic = nullptr;
  VPd* pd = nullptr;
  uint32_t key = 0;
};

struct VCq {
  ibv_cq cq;
  Cq core;
};

struct VQp {
  ibv_qp qp;
  Qp core;
  VPd* pd = nullptr;
  bool sq_enabled = false;  // mlx5 accepts send WRs once the QP has reached RTS (until RESET)
};

struct VAh {
  ibv_ah ah;
  ibv_ah_attr attr;
  VPd* pd = nullptr;
  mlx5_wqe_av av;  // what mlx5dv_init_obj(MLX5DV_OBJ_AH) hands out, as the mlx5 provider fills it
};

struct VSrq {
  ibv_srq srq;
  Srq core;
  VPd* pd = nullptr;
};

struct VChannel {
  ibv_comp_channel ch;
  int write_fd = -1;
};

inline VContext* vctx_of(ibv_context* ctx) {
  return reinterpret_cast<VContext*>(reinterpret_cast<uint8_t*>(ctx) - offsetof(verbs_context, context));
}
inline VPd* vpd(ibv_pd* p) { return reinterpret_cast<VPd*>(p); }
inline VMr* vmr(ibv_mr* m) { return reinterpret_cast<VMr*>(m); }
inline VCq* vcq(ibv_cq* c) { return reinterpret_cast<VCq*>(c); }
inline VQp* vqp(ibv_qp* q) { return reinterpret_cast<VQp*>(q); }
inline VSrq* vsrq(ibv_srq* s) { return reinterpret_cast<VSrq*>(s); }

// Provider ops (provider.cpp), installed in every context.
int provider_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int provider_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int provider_poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int provider_req_notify_cq(ibv_cq* cq, int solicited_only);
int provider_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);

// Destroys every object still owned by `ctx` (as closing the device file does). Under the lock.
void destroy_context_objects(Context* ctx);
void destroy_qp_locked(VQp* q);
void destroy_srq_locked(VSrq* s);
// Creates an RC QP or a DC target (verbs object) on `pd`; `call` names the API for errors.
ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr, QpType type, uint64_t dc_key, const char* call);
void destroy_cq_locked(VCq* c);

// The emulated devices' public structs (stable for the life of the process).
VDevice* device_table(size_t* count);

}  // namespace gicomm::emu
