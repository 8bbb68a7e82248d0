// libmlx5 entry points of the emulated rdma-core: mlx5dv device queries, object introspection
// (mlx5dv_init_obj) and the DEVX surface. The work happens in libibverbs.so.1 (devx_cmd.cpp); this
// library holds the public structs the mlx5dv API hands out.
#include <infiniband/mlx5dv.h>

#include <cerrno>
#include <cstring>

#include "emu.h"

using namespace gicomm::emu;

namespace {

struct VUmem {
  mlx5dv_devx_umem pub;
  Umem* umem;
};

struct VUar {
  mlx5dv_devx_uar pub;
  Uar* uar;
};

DevxObj* obj_of(mlx5dv_devx_obj* o) { return reinterpret_cast<DevxObj*>(o); }

std::string name_of(ibv_context* ctx) { return ctx && ctx->device ? ctx->device->name : "context"; }

}  // namespace

#pragma GCC visibility push(default)  // the public entry points (the version script picks them)
extern "C" {

// Declared by rdma-core 54 and later only (the API has the same shape there).
GICOMM_EMU_API ibv_mr* mlx5dv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access,
                                            int mlx5_access);
GICOMM_EMU_API int mlx5dv_get_data_direct_sysfs_path(ibv_context* context, char* buf, size_t buf_len);

bool mlx5dv_is_supported(ibv_device* device) { return is_emulated_device(device); }

ibv_context* mlx5dv_open_device(ibv_device* device, mlx5dv_context_attr* attr) {
  const uint32_t flags = attr ? attr->flags : 0;
  if (flags & ~uint32_t(MLX5DV_CONTEXT_FLAGS_DEVX)) {
    fail(EOPNOTSUPP, "mlx5dv_open_device", device ? device->name : "device", "context flags " + hex(flags) + " (DEVX only)");
    return nullptr;
  }
  return open_context(device);  // DEVX with or without the flag, as rdma-core's mlx5 does
}

int mlx5dv_query_device(ibv_context* ctx_in, mlx5dv_context* attrs_out) {
  if (context_of(ctx_in) == nullptr) return fail(EOPNOTSUPP, "mlx5dv_query_device", name_of(ctx_in), "not an emulated mlx5 context");
  const uint64_t asked = attrs_out->comp_mask;
  std::memset(attrs_out, 0, sizeof *attrs_out);
  attrs_out->version = 1;
  attrs_out->flags = MLX5DV_CONTEXT_FLAGS_CQE_V1;
  attrs_out->comp_mask = 0;  // none of the optional capability blocks (asked: see `asked`) is emulated
  (void)asked;
  return 0;
}

int mlx5dv_set_context_attr(ibv_context* ctx, mlx5dv_set_ctx_attr_type, void*) {
  return fail(EOPNOTSUPP, "mlx5dv_set_context_attr", name_of(ctx), "not emulated");
}

int mlx5dv_init_obj(mlx5dv_obj* obj, uint64_t obj_type) {
  const uint64_t known = MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_PD | MLX5DV_OBJ_SRQ | MLX5DV_OBJ_AH;
  if (obj_type & ~known)
    return fail(EOPNOTSUPP, "mlx5dv_init_obj", "object types " + hex(obj_type), "only QP, CQ, SRQ, AH and PD are emulated");
  if (obj_type & MLX5DV_OBJ_SRQ) {
    if (context_of(obj->srq.in->context) == nullptr) return fail(EINVAL, "mlx5dv_init_obj", "SRQ", "not an emulated SRQ");
    const Srq* q = srq_of(obj->srq.in);
    mlx5dv_srq& o = *obj->srq.out;
    const uint64_t asked = o.comp_mask;
    o.buf = q->buf;  // the emulation's own ring format (see Srq), not mlx5's linked list
    o.dbrec = reinterpret_cast<__be32*>(q->dbrec);
    o.stride = q->stride;
    o.head = 0;
    o.tail = q->wqe_cnt - 1;
    o.comp_mask = asked & MLX5DV_SRQ_MASK_SRQN;
    o.srqn = q->srqn;
  }
  if (obj_type & MLX5DV_OBJ_AH) {
    if (context_of(obj->ah.in->context) == nullptr) return fail(EINVAL, "mlx5dv_init_obj", "AH", "not an emulated AH");
    obj->ah.out->av = static_cast<mlx5_wqe_av*>(const_cast<void*>(ah_av(obj->ah.in)));
    obj->ah.out->comp_mask = 0;
  }
  if (obj_type & MLX5DV_OBJ_PD) {
    if (context_of(obj->pd.in->context) == nullptr) return fail(EINVAL, "mlx5dv_init_obj", "PD", "not an emulated PD");
    obj->pd.out->pdn = pd_number(obj->pd.in);
    obj->pd.out->comp_mask = 0;
  }
  if (obj_type & MLX5DV_OBJ_CQ) {
    if (context_of(obj->cq.in->context) == nullptr) return fail(EINVAL, "mlx5dv_init_obj", "CQ", "not an emulated CQ");
    const Cq* c = cq_of(obj->cq.in);
    mlx5dv_cq& o = *obj->cq.out;
    o.buf = c->buf;
    o.dbrec = reinterpret_cast<__be32*>(c->dbrec);
    o.cqe_cnt = c->cqe_cnt;
    o.cqe_size = 64;
    o.cq_uar = nullptr;  // arming goes through ibv_req_notify_cq
    o.cqn = c->cqn;
    o.comp_mask = 0;
  }
  if (obj_type & MLX5DV_OBJ_QP) {
    if (context_of(obj->qp.in->context) == nullptr) return fail(EINVAL, "mlx5dv_init_obj", "QP", "not an emulated QP");
    Qp* q = qp_of(obj->qp.in);
    mlx5dv_qp& o = *obj->qp.out;
    std::memset(&o, 0, sizeof o);
    o.dbrec = reinterpret_cast<__be32*>(q->sq.dbrec);
    o.sq.buf = q->sq.buf;
    o.sq.wqe_cnt = q->sq.wqe_cnt;
    o.sq.stride = 64;
    o.rq.buf = q->rq_buf;
    o.rq.wqe_cnt = q->rq_wqe_cnt;
    o.rq.stride = q->rq_stride;
    o.bf.reg = &q->private_doorbell;  // the QP's doorbell register: an 8-byte store rings it
    o.bf.size = 0;                    // no BlueFlame (write-combining WQE copies) in the emulation
  }
  return 0;
}

ibv_cq_ex* mlx5dv_create_cq(ibv_context* context, ibv_cq_init_attr_ex*, mlx5dv_cq_init_attr*) {
  fail(EOPNOTSUPP, "mlx5dv_create_cq", name_of(context), "extended CQs are not emulated; use ibv_create_cq or DEVX CREATE_CQ");
  return nullptr;
}

// DC targets (what NVSHMEM creates this way); DC initiators are created with DEVX CREATE_QP
// (st DCI), RC QPs with ibv_create_qp.
ibv_qp* mlx5dv_create_qp(ibv_context* context, ibv_qp_init_attr_ex* attr, mlx5dv_qp_init_attr* dv) {
  if (context_of(context) == nullptr) {
    fail(EOPNOTSUPP, "mlx5dv_create_qp", name_of(context), "not an emulated mlx5 context");
    return nullptr;
  }
  if (attr == nullptr || dv == nullptr || attr->qp_type != IBV_QPT_DRIVER || dv->comp_mask != MLX5DV_QP_INIT_ATTR_MASK_DC ||
      dv->dc_init_attr.dc_type != MLX5DV_DCTYPE_DCT) {
    fail(EOPNOTSUPP, "mlx5dv_create_qp", name_of(context),
         "only DC targets are emulated here (qp_type IBV_QPT_DRIVER, comp_mask MLX5DV_QP_INIT_ATTR_MASK_DC, "
         "dc_type MLX5DV_DCTYPE_DCT); RC QPs: ibv_create_qp; DC initiators: DEVX CREATE_QP st DCI");
    return nullptr;
  }
  return create_dct(context, attr, dv->dc_init_attr.dct_access_key);
}

// ---- DEVX ---------------------------------------------------------------------------------------------
int mlx5dv_devx_general_cmd(ibv_context* context, const void* in, size_t inlen, void* out, size_t outlen) {
  return devx_general_cmd(context, in, inlen, out, outlen);
}

mlx5dv_devx_obj* mlx5dv_devx_obj_create(ibv_context* context, const void* in, size_t inlen, void* out, size_t outlen) {
  return reinterpret_cast<mlx5dv_devx_obj*>(devx_obj_create(context, in, inlen, out, outlen));
}

int mlx5dv_devx_obj_modify(mlx5dv_devx_obj* obj, const void* in, size_t inlen, void* out, size_t outlen) {
  return devx_obj_modify(obj_of(obj), in, inlen, out, outlen);
}

int mlx5dv_devx_obj_query(mlx5dv_devx_obj* obj, const void* in, size_t inlen, void* out, size_t outlen) {
  return devx_obj_query(obj_of(obj), in, inlen, out, outlen);
}

int mlx5dv_devx_obj_destroy(mlx5dv_devx_obj* obj) { return devx_obj_destroy(obj_of(obj)); }

mlx5dv_devx_umem* mlx5dv_devx_umem_reg(ibv_context* ctx, void* addr, size_t size, uint32_t access) {
  Umem* u = devx_umem_reg(ctx, addr, size, access);
  if (u == nullptr) return nullptr;
  auto* v = new VUmem{{u->id}, u};
  return &v->pub;
}

// dmabuf umems: refused (the engine cannot map a dmabuf), so callers register by address.
mlx5dv_devx_umem* mlx5dv_devx_umem_reg_ex(ibv_context* ctx, mlx5dv_devx_umem_in* in) {
  if (in->comp_mask & MLX5DV_UMEM_MASK_DMABUF) {
    fail(EOPNOTSUPP, "mlx5dv_devx_umem_reg_ex", "dmabuf fd " + std::to_string(in->dmabuf_fd) + " on " + name_of(ctx),
         "the emulated device cannot map dmabufs; register the memory by address (mlx5dv_devx_umem_reg)");
    return nullptr;
  }
  return mlx5dv_devx_umem_reg(ctx, in->addr, in->size, in->access);
}

int mlx5dv_devx_umem_dereg(mlx5dv_devx_umem* umem) {
  auto* v = reinterpret_cast<VUmem*>(umem);
  const int rc = devx_umem_dereg(v->umem);
  delete v;
  return rc;
}

mlx5dv_devx_uar* mlx5dv_devx_alloc_uar(ibv_context* context, uint32_t flags) {
  Uar* u = devx_alloc_uar(context, flags);
  if (u == nullptr) return nullptr;
  auto* v = new VUar();
  v->pub.base_addr = u->page;
  v->pub.reg_addr = u->page + 0x800;  // the first BlueFlame register, where doorbells go
  v->pub.page_id = u->page_id;
  v->pub.mmap_off = 0;
  v->pub.comp_mask = 0;
  v->uar = u;
  return &v->pub;
}

void mlx5dv_devx_free_uar(mlx5dv_devx_uar* dv_devx_uar) {
  auto* v = reinterpret_cast<VUar*>(dv_devx_uar);
  devx_free_uar(v->uar);
  delete v;
}

int mlx5dv_devx_query_eqn(ibv_context* context, uint32_t vector, uint32_t* eqn) { return devx_query_eqn(context, vector, eqn); }

ibv_mr* mlx5dv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int, int) {
  fail(EOPNOTSUPP, "mlx5dv_reg_dmabuf_mr",
       "dmabuf fd " + std::to_string(fd) + " offset " + std::to_string(offset) + " length " + std::to_string(length) +
           " iova " + hex(iova) + " on " + (pd ? name_of(pd->context) : std::string("?")),
       "the emulated device cannot map dmabufs; register the memory by address (ibv_reg_mr)");
  return nullptr;
}

int mlx5dv_get_data_direct_sysfs_path(ibv_context* context, char*, size_t) {
  return fail(ENODEV, "mlx5dv_get_data_direct_sysfs_path", name_of(context), "the emulated device has no data-direct function");
}

}  // extern "C"
#pragma GCC visibility pop
