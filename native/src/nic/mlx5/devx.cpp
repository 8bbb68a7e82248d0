#include "gicomm/mlx5dev/devx.h"

#include <dlfcn.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#if defined(GICOMM_MLX5_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace gicomm::mlx5dev {

namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// PRM command layouts are big-endian bit fields; these set a field given its bit offset and width
// as listed in mlx5_ifc.h (struct mlx5_ifc_*_bits), the way rdma-core's DEVX_SET does.
void prm_set(void* base, uint32_t bit_off, uint32_t bits, uint32_t value) {
  uint32_t* words = static_cast<uint32_t*>(base);
  const uint32_t word = bit_off / 32;
  const uint32_t shift = 32 - (bit_off % 32) - bits;  // fields are MSB-first within each BE word
  const uint32_t mask = bits == 32 ? 0xffffffffu : ((1u << bits) - 1) << shift;
  uint32_t host = be32toh(words[word]);
  host = (host & ~mask) | ((value << shift) & mask);
  words[word] = htobe32(host);
}
uint32_t prm_get(const void* base, uint32_t bit_off, uint32_t bits) {
  const uint32_t* words = static_cast<const uint32_t*>(base);
  const uint32_t host = be32toh(words[bit_off / 32]);
  const uint32_t shift = 32 - (bit_off % 32) - bits;
  return bits == 32 ? host : (host >> shift) & ((1u << bits) - 1);
}
void prm_set64(void* base, uint32_t bit_off, uint64_t value) {
  prm_set(base, bit_off, 32, static_cast<uint32_t>(value >> 32));
  prm_set(base, bit_off + 32, 32, static_cast<uint32_t>(value));
}

constexpr uint32_t kCmdCreateCq = 0x400;
constexpr uint32_t kCmdCreateQp = 0x500;
constexpr uint32_t kCmdRst2Init = 0x502;
constexpr uint32_t kCmdInit2Rtr = 0x503;
constexpr uint32_t kCmdRtr2Rts = 0x504;

// Bit offsets in struct mlx5_ifc_qpc_bits (0x740 bits), mlx5_ifc.h.
namespace qpc {
constexpr uint32_t st = 0x8, pm_state = 0x13, pd = 0x28, mtu = 0x40, log_msg_max = 0x43, log_rq_size = 0x49,
                   log_sq_size = 0x51, ts_format = 0x58, uar_page = 0x68, remote_qpn = 0xa8,
                   primary_path = 0xc0, log_sra_max = 0x388, retry_count = 0x38d, rnr_retry = 0x390,
                   next_send_psn = 0x3c8, cqn_snd = 0x3e8, log_rra_max = 0x488, rre = 0x490, rwe = 0x491,
                   rae = 0x492, page_offset = 0x494, min_rnr_nak = 0x4a3, next_rcv_psn = 0x4a8, cqn_rcv = 0x4e8,
                   dbr_addr = 0x500, rq_type = 0x565, cs_req = 0x630, cs_res = 0x638, dbr_umem_valid = 0x683,
                   dbr_umem_id = 0x720;
}  // namespace qpc
// Bit offsets in struct mlx5_ifc_ads_bits (the address path, 0x160 bits).
namespace ads {
constexpr uint32_t pkey_index = 0x10, grh = 0x28, rlid = 0x30, ack_timeout = 0x40, src_addr_index = 0x48,
                   hop_limit = 0x58, rgid = 0x80, udp_sport = 0x110, vhca_port_num = 0x128;
}  // namespace ads
// create_qp_in: qpc at 0xc0, wq_umem_offset 0x800, wq_umem_id 0x840, wq_umem_valid 0x860; 0x880 bits.
// modify_qp_in (RST2INIT, INIT2RTR, RTR2RTS): qpn 0x48, opt_param_mask 0x80, qpc at 0xc0; 0x880 bits.
constexpr uint32_t kQpInBits = 0x880;
constexpr uint32_t kQpcAt = 0xc0;

std::string cmd_error(const char* what, const uint32_t* out) {
  return errno_text(what) + " (status " + std::to_string(prm_get(out, 0, 8)) + ", syndrome 0x" +
         [](uint32_t v) {
           char b[16];
           std::snprintf(b, sizeof b, "%x", v);
           return std::string(b);
         }(prm_get(out, 0x20, 32)) + ")";
}

}  // namespace

std::unique_ptr<DevxDevice> DevxDevice::open(const std::string& name, std::string* reason) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    *reason = errno_text("no RDMA devices (ibv_get_device_list)");
    return nullptr;
  }
  ibv_device* chosen = nullptr;
  int mlx5_count = 0;
  for (int i = 0; i < n; ++i) {
    if (!mlx5dv_is_supported(list[i])) continue;
    ++mlx5_count;
    if (chosen == nullptr && (name.empty() || name == ibv_get_device_name(list[i]))) chosen = list[i];
  }
  if (chosen == nullptr) {
    *reason = "no mlx5 device" + (name.empty() ? std::string() : " named " + name) + " (" + std::to_string(n) +
              " RDMA devices, " + std::to_string(mlx5_count) + " mlx5)";
    ibv_free_device_list(list);
    return nullptr;
  }
  std::unique_ptr<DevxDevice> d(new DevxDevice);
  d->name_ = ibv_get_device_name(chosen);
  mlx5dv_context_attr attr{};
  attr.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
  d->ctx_ = mlx5dv_open_device(chosen, &attr);
  ibv_free_device_list(list);
  if (d->ctx_ == nullptr) {
    *reason = errno_text(("mlx5dv_open_device(" + d->name_ + ", DEVX)").c_str());
    return nullptr;
  }
  d->pd_ = ibv_alloc_pd(d->ctx_);
  if (d->pd_ == nullptr) {
    *reason = errno_text("ibv_alloc_pd");
    return nullptr;
  }
  mlx5dv_pd dvpd{};
  mlx5dv_obj obj{};
  obj.pd.in = d->pd_;
  obj.pd.out = &dvpd;
  if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD) != 0) {
    *reason = errno_text("mlx5dv_init_obj(PD)");
    return nullptr;
  }
  d->pdn_ = dvpd.pdn;
  return d;
}

DevxDevice::~DevxDevice() {
  for (ibv_mr* mr : mrs_) ibv_dereg_mr(mr);
#if defined(GICOMM_MLX5_WITH_CUDA)
  if (registered_uar_) cudaHostUnregister(registered_uar_);
#endif
  if (uar_) mlx5dv_devx_free_uar(uar_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

bool DevxDevice::alloc_uar(std::string* reason) {
  struct Kind {
    uint32_t flag;
    const char* name;
  };
  const Kind kinds[] = {
#if defined(MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED)  // newer rdma-core only
      {MLX5DV_UAR_ALLOC_TYPE_NC_DEDICATED, "NC_DEDICATED"},
#endif
      {MLX5DV_UAR_ALLOC_TYPE_NC, "NC"},
      {MLX5DV_UAR_ALLOC_TYPE_BF, "BF"}};
  for (const Kind& k : kinds) {
    uar_ = mlx5dv_devx_alloc_uar(ctx_, k.flag);
    if (uar_ != nullptr) {
      uar_type_ = k.name;
      return true;
    }
  }
  *reason = errno_text("mlx5dv_devx_alloc_uar (every UAR type refused)");
  return false;
}

void* DevxDevice::uar_host_page() const { return uar_ ? uar_->base_addr : nullptr; }
void* DevxDevice::uar_host_doorbell() const { return uar_ ? uar_->reg_addr : nullptr; }
uint32_t DevxDevice::uar_page_id() const { return uar_ ? uar_->page_id : 0; }

bool DevxDevice::map_uar_to_gpu(int gpu, uint64_t** gpu_doorbell, std::string* reason) {
#if defined(GICOMM_MLX5_WITH_CUDA)
  if (!uar_) {
    *reason = "no UAR allocated";
    return false;
  }
  if (cudaSetDevice(gpu) != cudaSuccess) {
    *reason = "cudaSetDevice(" + std::to_string(gpu) + ") failed";
    return false;
  }
  const long page = sysconf(_SC_PAGESIZE);
  void* page_base = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(uar_->base_addr) & ~uintptr_t(page - 1));
  cudaError_t e = cudaHostRegister(page_base, static_cast<size_t>(page),
                                   cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory);
  if (e != cudaSuccess) {
    *reason = std::string("cudaHostRegister(UAR, IoMemory): ") + cudaGetErrorString(e) +
              " (the nvidia module may need PeerMappingOverride=1)";
    return false;
  }
  registered_uar_ = page_base;
  void* dev = nullptr;
  e = cudaHostGetDevicePointer(&dev, uar_->reg_addr, 0);
  if (e != cudaSuccess) {
    *reason = std::string("cudaHostGetDevicePointer(UAR): ") + cudaGetErrorString(e);
    return false;
  }
  *gpu_doorbell = static_cast<uint64_t*>(dev);
  return true;
#else
  (void)gpu;
  (void)gpu_doorbell;
  *reason = "built without CUDA: cannot map the UAR into a GPU";
  return false;
#endif
}

bool DevxDevice::export_dmabuf(void* gpu_ptr, size_t bytes, int* fd, std::string* reason) {
  // cuMemGetHandleForAddressRange(&fd, ptr, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1, 0)
  using GetHandle = int (*)(void*, unsigned long long, size_t, int, unsigned long long);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    *reason = "libcuda.so.1 not found (no GPU driver): cannot export GPU memory as dmabuf";
    return false;
  }
  auto get = reinterpret_cast<GetHandle>(dlsym(lib, "cuMemGetHandleForAddressRange"));
  if (get == nullptr) {
    *reason = "driver lacks cuMemGetHandleForAddressRange (dmabuf export needs CUDA 11.7+ and driver 515+)";
    return false;
  }
  const long page = sysconf(_SC_PAGESIZE);
  if (reinterpret_cast<uintptr_t>(gpu_ptr) % static_cast<uintptr_t>(page) != 0 || bytes % static_cast<size_t>(page) != 0) {
    *reason = "dmabuf export needs a page-aligned GPU range (" + std::to_string(bytes) + " bytes)";
    return false;
  }
  *fd = -1;
  const int rc = get(fd, reinterpret_cast<unsigned long long>(gpu_ptr), bytes, 1, 0);
  if (rc != 0 || *fd < 0) {
    *reason = "cuMemGetHandleForAddressRange(DMA_BUF_FD) failed with CUresult " + std::to_string(rc);
    return false;
  }
  return true;
}

void DevxDevice::destroy(Qp* qp) {
  if (qp->obj) mlx5dv_devx_obj_destroy(qp->obj);
  qp->obj = nullptr;
}
void DevxDevice::destroy(Cq* cq) {
  if (cq->obj) mlx5dv_devx_obj_destroy(cq->obj);
  cq->obj = nullptr;
}
void DevxDevice::release(Umem* umem) {
  if (umem->umem) mlx5dv_devx_umem_dereg(umem->umem);
  if (umem->dmabuf_fd >= 0) close(umem->dmabuf_fd);
  umem->umem = nullptr;
  umem->dmabuf_fd = -1;
}

bool DevxDevice::register_gpu_umem(void* gpu_ptr, size_t bytes, Umem* out, std::string* reason) {
  int fd = -1;
  if (!export_dmabuf(gpu_ptr, bytes, &fd, reason)) return false;
  mlx5dv_devx_umem_in in{};
  in.addr = gpu_ptr;
  in.size = bytes;
  in.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  in.pgsz_bitmap = ~0ull & ~0xfffull;  // any page size from 4 KiB
  in.comp_mask = MLX5DV_UMEM_MASK_DMABUF;
  in.dmabuf_fd = fd;
  out->umem = mlx5dv_devx_umem_reg_ex(ctx_, &in);
  if (out->umem == nullptr) {
    *reason = errno_text("mlx5dv_devx_umem_reg_ex(dmabuf)");
    close(fd);
    return false;
  }
  out->id = out->umem->umem_id;
  out->dmabuf_fd = fd;
  return true;
}

bool DevxDevice::create_cq(const Umem& umem, uint64_t cqe_offset, uint64_t dbrec_offset, Cq* out,
                           std::string* reason) {
  if (!uar_) {
    *reason = "create_cq needs a UAR";
    return false;
  }
  uint32_t eqn = 0;
  if (mlx5dv_devx_query_eqn(ctx_, 0, &eqn) != 0) {
    *reason = errno_text("mlx5dv_devx_query_eqn");
    return false;
  }
  // struct mlx5_ifc_create_cq_in_bits (mlx5_ifc.h): opcode [0x00,16], cq_context (mlx5_ifc_cqc_bits,
  // 0x200 bits) at 0x80, cq_umem_offset [0x280,64], cq_umem_id [0x2c0,32], cq_umem_valid [0x2e0,1];
  // 0x880 bits in all (no pas[] with a umem).
  uint32_t in[0x880 / 32] = {};
  uint32_t outbuf[4] = {};
  prm_set(in, 0x00, 16, kCmdCreateCq);
  prm_set64(in, 0x280, cqe_offset);
  prm_set(in, 0x2c0, 32, umem.id);
  prm_set(in, 0x2e0, 1, 1);
  const uint32_t cqc = 0x80;
  prm_set(in, cqc + 0x06, 1, 1);             // dbr_umem_valid
  prm_set(in, cqc + 0x08, 3, 0);             // cqe_sz: 64 bytes
  prm_set(in, cqc + 0x0b, 1, 1);             // cc: collapsed
  prm_set(in, cqc + 0x0f, 1, 1);             // oi: overrun ignore
  prm_set(in, cqc + 0x20, 32, umem.id);      // dbr_umem_id
  prm_set(in, cqc + 0x63, 5, 0);             // log_cq_size: 1 entry
  prm_set(in, cqc + 0x68, 24, uar_->page_id);  // uar_page
  prm_set(in, cqc + 0xb8, 8, eqn);           // c_eqn
  prm_set(in, cqc + 0xc3, 5, 0);             // log_page_size (4 KiB units)
  prm_set64(in, cqc + 0x1c0, dbrec_offset);  // dbr_addr: an offset into the doorbell umem
  out->obj = mlx5dv_devx_obj_create(ctx_, in, sizeof(in), outbuf, sizeof(outbuf));
  if (out->obj == nullptr) {
    *reason = errno_text("DEVX CREATE_CQ") + " (status " + std::to_string(prm_get(outbuf, 0, 8)) + ", syndrome " +
              std::to_string(prm_get(outbuf, 0x20, 32)) + ")";
    return false;
  }
  out->cqn = prm_get(outbuf, 0x48, 24);
  return true;
}

bool DevxDevice::create_rc_qp(const Umem& wq, uint64_t wq_offset, uint32_t log_sq_wqebbs, const Umem& dbr,
                              uint64_t dbr_offset, uint32_t cqn, Qp* out, std::string* reason) {
  if (!uar_) {
    *reason = "create_rc_qp needs a UAR";
    return false;
  }
  uint32_t in[kQpInBits / 32] = {};
  uint32_t outbuf[4] = {};
  prm_set(in, 0x00, 16, kCmdCreateQp);
  const uint32_t c = kQpcAt;
  prm_set(in, c + qpc::st, 8, 0x0);        // RC
  prm_set(in, c + qpc::pm_state, 2, 0x3);  // migrated
  prm_set(in, c + qpc::pd, 24, pdn_);
  prm_set(in, c + qpc::uar_page, 24, uar_->page_id);
  prm_set(in, c + qpc::rq_type, 3, 0x3);   // zero-size RQ: mini-gda only sends
  prm_set(in, c + qpc::cqn_snd, 24, cqn);
  prm_set(in, c + qpc::cqn_rcv, 24, cqn);
  prm_set(in, c + qpc::log_sq_size, 4, log_sq_wqebbs);
  prm_set(in, c + qpc::log_rq_size, 4, 0);
  prm_set(in, c + qpc::ts_format, 2, 0x1);  // default timestamp format (required by newer firmware)
  prm_set(in, c + qpc::cs_req, 8, 0);
  prm_set(in, c + qpc::cs_res, 8, 0);
  prm_set(in, c + qpc::dbr_umem_valid, 1, 1);
  prm_set64(in, c + qpc::dbr_addr, dbr_offset);  // an offset into dbr_umem_id when dbr_umem_valid
  prm_set(in, c + qpc::dbr_umem_id, 32, dbr.id);
  prm_set(in, c + qpc::page_offset, 6, 0);
  prm_set64(in, 0x800, wq_offset);
  prm_set(in, 0x840, 32, wq.id);
  prm_set(in, 0x860, 1, 1);
  out->obj = mlx5dv_devx_obj_create(ctx_, in, sizeof(in), outbuf, sizeof(outbuf));
  if (out->obj == nullptr) {
    *reason = cmd_error("DEVX CREATE_QP", outbuf);
    return false;
  }
  out->qpn = prm_get(outbuf, 0x48, 24);
  return true;
}

bool DevxDevice::local_address(const Qp& qp, const ConnectParams& params, QpAddress* out, std::string* reason) {
  ibv_port_attr attr{};
  if (ibv_query_port(ctx_, params.port, &attr) != 0) {
    *reason = errno_text("ibv_query_port");
    return false;
  }
  out->qpn = qp.qpn;
  out->lid = attr.lid;
  out->roce = attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  ibv_gid gid{};
  if (ibv_query_gid(ctx_, params.port, params.gid_index, &gid) != 0) {
    *reason = errno_text("ibv_query_gid");
    return false;
  }
  std::memcpy(out->gid, gid.raw, 16);
  return true;
}

bool DevxDevice::connect_rc_qp(const Qp& qp, const QpAddress& remote, const ConnectParams& p, std::string* reason) {
  struct Step {
    uint32_t opcode;
    const char* name;
  };
  const Step steps[] = {{kCmdRst2Init, "DEVX RST2INIT_QP"}, {kCmdInit2Rtr, "DEVX INIT2RTR_QP"},
                        {kCmdRtr2Rts, "DEVX RTR2RTS_QP"}};
  for (const Step& step : steps) {
    uint32_t in[kQpInBits / 32] = {};
    uint32_t outbuf[4] = {};
    prm_set(in, 0x00, 16, step.opcode);
    prm_set(in, 0x48, 24, qp.qpn);
    const uint32_t c = kQpcAt;
    const uint32_t path = c + qpc::primary_path;
    if (step.opcode == kCmdRst2Init) {
      prm_set(in, c + qpc::pm_state, 2, 0x3);
      prm_set(in, path + ads::vhca_port_num, 8, p.port);
      prm_set(in, path + ads::pkey_index, 16, 0);
      prm_set(in, c + qpc::rre, 1, 1);
      prm_set(in, c + qpc::rwe, 1, 1);
      prm_set(in, c + qpc::rae, 1, 1);
    } else if (step.opcode == kCmdInit2Rtr) {
      prm_set(in, c + qpc::mtu, 3, p.mtu);
      prm_set(in, c + qpc::log_msg_max, 5, 30);
      prm_set(in, c + qpc::remote_qpn, 24, remote.qpn);
      prm_set(in, c + qpc::next_rcv_psn, 24, 0);
      prm_set(in, c + qpc::log_rra_max, 3, 4);
      prm_set(in, c + qpc::min_rnr_nak, 5, 12);
      prm_set(in, path + ads::vhca_port_num, 8, p.port);
      if (remote.roce) {
        prm_set(in, path + ads::grh, 1, 1);
        prm_set(in, path + ads::hop_limit, 8, 64);
        prm_set(in, path + ads::src_addr_index, 8, p.gid_index);
        prm_set(in, path + ads::udp_sport, 16, 0xc000);
        for (int i = 0; i < 16; ++i) prm_set(in, path + ads::rgid + 8 * i, 8, remote.gid[i]);
      } else {
        prm_set(in, path + ads::rlid, 16, remote.lid);
      }
    } else {
      prm_set(in, c + qpc::log_sra_max, 3, 4);
      prm_set(in, c + qpc::retry_count, 3, p.retry_count);
      prm_set(in, c + qpc::rnr_retry, 3, p.rnr_retry);
      prm_set(in, c + qpc::next_send_psn, 24, 0);
      prm_set(in, path + ads::ack_timeout, 5, p.ack_timeout);
    }
    if (mlx5dv_devx_obj_modify(qp.obj, in, sizeof(in), outbuf, sizeof(outbuf)) != 0) {
      *reason = cmd_error(step.name, outbuf);
      return false;
    }
  }
  return true;
}

bool DevxDevice::register_dmabuf_mr(void* gpu_ptr, size_t bytes, int dmabuf_fd, uint32_t* lkey, uint32_t* rkey,
                                    std::string* reason) {
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
  ibv_mr* mr = ibv_reg_dmabuf_mr(pd_, 0, bytes, reinterpret_cast<uint64_t>(gpu_ptr), dmabuf_fd, access);
  if (mr == nullptr) {
    *reason = errno_text("ibv_reg_dmabuf_mr");
    return false;
  }
  mrs_.push_back(mr);
  *lkey = mr->lkey;
  *rkey = mr->rkey;
  return true;
}

}  // namespace gicomm::mlx5dev
