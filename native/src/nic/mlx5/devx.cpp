#include "gicomm/mlx5dev/devx.h"

#include <dlfcn.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gicomm/mlx5dev/prm.h"

#if defined(GICOMM_MLX5_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace gicomm::mlx5dev {

namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

// The reason a command failed: errno, and the PRM status and syndrome the device put in the output.
std::string cmd_error(const char* what, const void* out) {
  return errno_text(what) + " (status " + hex(prm::get(out, prm::create_qp_out::status)) + ", syndrome " +
         hex(prm::get(out, prm::create_qp_out::syndrome)) + ")";
}

constexpr int kRdmaAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

}  // namespace

bool parse_doorbell_target(const std::string& name, DoorbellTarget* out) {
  if (name == "auto") {
    *out = DoorbellTarget::automatic;
  } else if (name == "uar-iomem") {
    *out = DoorbellTarget::uar_iomem;
  } else if (name == "pinned-host") {
    *out = DoorbellTarget::pinned_host;
  } else {
    return false;
  }
  return true;
}

const char* doorbell_target_name(DoorbellTarget t) {
  switch (t) {
    case DoorbellTarget::uar_iomem: return "uar-iomem";
    case DoorbellTarget::pinned_host: return "pinned-host";
    default: return "auto";
  }
}

std::string rdma_provider() {
  // The emulated libibverbs exports this under its private version node.
  if (dlsym(RTLD_DEFAULT, "gicomm_emu_provider") != nullptr) return "emulated";
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ibv_get_device_list), &info) == 0 || info.dli_fname == nullptr) return "unknown";
  char real[PATH_MAX];
  if (realpath(info.dli_fname, real) == nullptr) return "unknown";
  // rdma-core installs libibverbs.so.1.<abi>.<release>, e.g. libibverbs.so.1.14.50.0.
  const std::string file = std::strrchr(real, '/') ? std::strrchr(real, '/') + 1 : real;
  const std::string stem = "libibverbs.so.1.";
  if (file.compare(0, stem.size(), stem) != 0) return "system rdma-core (" + file + ")";
  const std::string rest = file.substr(stem.size());
  const size_t dot = rest.find('.');
  return "system rdma-core " + (dot == std::string::npos ? rest : rest.substr(dot + 1));
}

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

bool DevxDevice::map_uar_to_gpu(int gpu, DoorbellTarget want, uint64_t** gpu_doorbell, std::string* reason) {
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
  std::string iomem_error;
  if (want != DoorbellTarget::pinned_host) {
    const cudaError_t e = cudaHostRegister(page_base, static_cast<size_t>(page),
                                           cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory);
    if (e == cudaSuccess) {
      doorbell_target_ = "uar-iomem";
    } else {
      cudaGetLastError();
      iomem_error = std::string("cudaHostRegister(UAR, IoMemory): ") + cudaGetErrorString(e) +
                    " (the nvidia module may need PeerMappingOverride=1)";
      if (want == DoorbellTarget::uar_iomem) {
        *reason = iomem_error;
        return false;
      }
    }
  }
  if (doorbell_target_ != std::string("uar-iomem")) {
    // An ordinary page (the emulated device's UAR): the GPU stores to pinned host memory, where the
    // emulated NIC watches it. A real UAR (a BAR page) cannot be registered this way.
    const cudaError_t e = cudaHostRegister(page_base, static_cast<size_t>(page), cudaHostRegisterPortable | cudaHostRegisterMapped);
    if (e != cudaSuccess) {
      cudaGetLastError();
      *reason = (iomem_error.empty() ? std::string() : iomem_error + "; ") + "cudaHostRegister(UAR, Mapped): " + cudaGetErrorString(e);
      return false;
    }
    doorbell_target_ = "pinned-host";
  }
  registered_uar_ = page_base;
  void* dev = nullptr;
  const cudaError_t e = cudaHostGetDevicePointer(&dev, uar_->reg_addr, 0);
  if (e != cudaSuccess) {
    *reason = std::string("cudaHostGetDevicePointer(UAR): ") + cudaGetErrorString(e);
    return false;
  }
  *gpu_doorbell = static_cast<uint64_t*>(dev);
  return true;
#else
  (void)gpu;
  (void)want;
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

bool DevxDevice::register_umem(void* ptr, size_t bytes, Umem* out, std::string* reason) {
  std::string dmabuf_reason;
  int fd = -1;
  if (export_dmabuf(ptr, bytes, &fd, &dmabuf_reason)) {
    mlx5dv_devx_umem_in in{};
    in.addr = ptr;
    in.size = bytes;
    in.access = kRdmaAccess;
    in.pgsz_bitmap = ~0ull & ~0xfffull;  // any page size from 4 KiB
    in.comp_mask = MLX5DV_UMEM_MASK_DMABUF;
    in.dmabuf_fd = fd;
    out->umem = mlx5dv_devx_umem_reg_ex(ctx_, &in);
    if (out->umem != nullptr) {
      out->id = out->umem->umem_id;
      out->dmabuf_fd = fd;
      out->registration = "dmabuf";
      return true;
    }
    dmabuf_reason = errno_text("mlx5dv_devx_umem_reg_ex(dmabuf)");
    close(fd);
  }
  // By address: host memory, or GPU memory where the device refuses dmabufs (the emulated one) and
  // the GPU driver's peer-memory support maps it (nvidia-peermem on a real NIC).
  out->umem = mlx5dv_devx_umem_reg(ctx_, ptr, bytes, kRdmaAccess);
  if (out->umem == nullptr) {
    *reason = "umem of " + std::to_string(bytes) + " bytes: dmabuf: " + dmabuf_reason + "; by address: " +
              errno_text("mlx5dv_devx_umem_reg");
    return false;
  }
  out->id = out->umem->umem_id;
  out->registration = "va";
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
  uint32_t in[prm::kCqCmdInBits / 32] = {};
  uint32_t outbuf[prm::kHdrOutBits / 32] = {};
  const uint32_t cqc = prm::create_cq_in::cq_context.off;
  prm::set(in, prm::create_cq_in::opcode, prm::kOpCreateCq);
  prm::set64(in, prm::create_cq_in::cq_umem_offset, cqe_offset);
  prm::set(in, prm::create_cq_in::cq_umem_id, umem.id);
  prm::set(in, prm::create_cq_in::cq_umem_valid, 1);
  prm::set(in, prm::cqc::dbr_umem_valid.at(cqc), 1);
  prm::set(in, prm::cqc::cqe_sz.at(cqc), 0);  // 64-byte CQEs
  prm::set(in, prm::cqc::cc.at(cqc), 1);      // collapsed
  prm::set(in, prm::cqc::oi.at(cqc), 1);      // overrun ignore
  prm::set(in, prm::cqc::dbr_umem_id.at(cqc), umem.id);
  prm::set(in, prm::cqc::log_cq_size.at(cqc), 0);  // one entry
  prm::set(in, prm::cqc::uar_page.at(cqc), uar_->page_id);
  prm::set(in, prm::cqc::c_eqn_or_apu_element.at(cqc), eqn);
  prm::set(in, prm::cqc::log_page_size.at(cqc), 0);  // 4 KiB units
  prm::set64(in, prm::cqc::dbr_addr.at(cqc), dbrec_offset);  // an offset into the doorbell umem
  out->obj = mlx5dv_devx_obj_create(ctx_, in, sizeof(in), outbuf, sizeof(outbuf));
  if (out->obj == nullptr) {
    *reason = cmd_error("DEVX CREATE_CQ", outbuf);
    return false;
  }
  out->cqn = prm::get(outbuf, prm::create_cq_out::cqn);
  return true;
}

bool DevxDevice::create_rc_qp(const Umem& wq, uint64_t wq_offset, uint32_t log_sq_wqebbs, const Umem& dbr,
                              uint64_t dbr_offset, uint32_t cqn, Qp* out, std::string* reason) {
  if (!uar_) {
    *reason = "create_rc_qp needs a UAR";
    return false;
  }
  uint32_t in[prm::kQpCmdInBits / 32] = {};
  uint32_t outbuf[prm::kHdrOutBits / 32] = {};
  const uint32_t c = prm::create_qp_in::qpc.off;
  prm::set(in, prm::create_qp_in::opcode, prm::kOpCreateQp);
  prm::set(in, prm::qpc::st.at(c), prm::kQpStRc);
  prm::set(in, prm::qpc::pm_state.at(c), prm::kPmStateMigrated);
  prm::set(in, prm::qpc::pd.at(c), pdn_);
  prm::set(in, prm::qpc::uar_page.at(c), uar_->page_id);
  prm::set(in, prm::qpc::rq_type.at(c), 0x3);  // zero-size RQ: mini-gda only sends
  prm::set(in, prm::qpc::cqn_snd.at(c), cqn);
  prm::set(in, prm::qpc::cqn_rcv.at(c), cqn);
  prm::set(in, prm::qpc::log_sq_size.at(c), log_sq_wqebbs);
  prm::set(in, prm::qpc::log_rq_size.at(c), 0);
  prm::set(in, prm::qpc::ts_format.at(c), prm::kTimestampDefault);  // required by newer firmware
  prm::set(in, prm::qpc::cs_req.at(c), 0);
  prm::set(in, prm::qpc::cs_res.at(c), 0);
  prm::set(in, prm::qpc::dbr_umem_valid.at(c), 1);
  prm::set64(in, prm::qpc::dbr_addr.at(c), dbr_offset);  // an offset into dbr_umem_id when dbr_umem_valid
  prm::set(in, prm::qpc::dbr_umem_id.at(c), dbr.id);
  prm::set(in, prm::qpc::page_offset.at(c), 0);
  prm::set64(in, prm::create_qp_in::wq_umem_offset, wq_offset);
  prm::set(in, prm::create_qp_in::wq_umem_id, wq.id);
  prm::set(in, prm::create_qp_in::wq_umem_valid, 1);
  out->obj = mlx5dv_devx_obj_create(ctx_, in, sizeof(in), outbuf, sizeof(outbuf));
  if (out->obj == nullptr) {
    *reason = cmd_error("DEVX CREATE_QP", outbuf);
    return false;
  }
  out->qpn = prm::get(outbuf, prm::create_qp_out::qpn);
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
  const Step steps[] = {{prm::kOpRst2InitQp, "DEVX RST2INIT_QP"}, {prm::kOpInit2RtrQp, "DEVX INIT2RTR_QP"},
                        {prm::kOpRtr2RtsQp, "DEVX RTR2RTS_QP"}};
  for (const Step& step : steps) {
    // The three transitions share one layout (rst2init_qp_in, init2rtr_qp_in, rtr2rts_qp_in).
    uint32_t in[prm::kQpCmdInBits / 32] = {};
    uint32_t outbuf[prm::kHdrOutBits / 32] = {};
    prm::set(in, prm::rst2init_qp_in::opcode, step.opcode);
    prm::set(in, prm::rst2init_qp_in::qpn, qp.qpn);
    const uint32_t c = prm::rst2init_qp_in::qpc.off;
    const uint32_t path = c + prm::qpc::primary_address_path.off;
    if (step.opcode == prm::kOpRst2InitQp) {
      prm::set(in, prm::qpc::pm_state.at(c), prm::kPmStateMigrated);
      prm::set(in, prm::ads::vhca_port_num.at(path), p.port);
      prm::set(in, prm::ads::pkey_index.at(path), 0);
      prm::set(in, prm::qpc::rre.at(c), 1);
      prm::set(in, prm::qpc::rwe.at(c), 1);
      prm::set(in, prm::qpc::rae.at(c), 1);
    } else if (step.opcode == prm::kOpInit2RtrQp) {
      prm::set(in, prm::qpc::mtu.at(c), p.mtu);
      prm::set(in, prm::qpc::log_msg_max.at(c), 30);
      prm::set(in, prm::qpc::remote_qpn.at(c), remote.qpn);
      prm::set(in, prm::qpc::next_rcv_psn.at(c), 0);
      prm::set(in, prm::qpc::log_rra_max.at(c), 4);
      prm::set(in, prm::qpc::min_rnr_nak.at(c), 12);
      prm::set(in, prm::ads::vhca_port_num.at(path), p.port);
      if (remote.roce) {
        prm::set(in, prm::ads::grh.at(path), 1);
        prm::set(in, prm::ads::hop_limit.at(path), 64);
        prm::set(in, prm::ads::src_addr_index.at(path), p.gid_index);
        prm::set(in, prm::ads::udp_sport.at(path), 0xc000);
        prm::set_bytes(in, prm::ads::rgid_rip.at(path), remote.gid, 16);
      } else {
        prm::set(in, prm::ads::rlid.at(path), remote.lid);
      }
    } else {
      prm::set(in, prm::qpc::log_sra_max.at(c), 4);
      prm::set(in, prm::qpc::retry_count.at(c), p.retry_count);
      prm::set(in, prm::qpc::rnr_retry.at(c), p.rnr_retry);
      prm::set(in, prm::qpc::next_send_psn.at(c), 0);
      prm::set(in, prm::ads::ack_timeout.at(path), p.ack_timeout);
    }
    if (mlx5dv_devx_obj_modify(qp.obj, in, sizeof(in), outbuf, sizeof(outbuf)) != 0) {
      *reason = cmd_error(step.name, outbuf);
      return false;
    }
  }
  return true;
}

bool DevxDevice::register_mr(void* ptr, size_t bytes, uint32_t* lkey, uint32_t* rkey, std::string* reason) {
  // GPU memory: a dmabuf of the page-rounded range (the caller allocates whole pages).
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t rounded = (bytes + page - 1) / page * page;
  std::string dmabuf_reason;
  int fd = -1;
  ibv_mr* mr = nullptr;
  if (export_dmabuf(ptr, rounded, &fd, &dmabuf_reason)) {
    mr = ibv_reg_dmabuf_mr(pd_, 0, rounded, reinterpret_cast<uint64_t>(ptr), fd, kRdmaAccess);
    if (mr == nullptr) dmabuf_reason = errno_text("ibv_reg_dmabuf_mr");
    close(fd);  // the MR holds its own reference to the dmabuf
    if (mr != nullptr) mr_registration_ = "dmabuf";
  }
  if (mr == nullptr) {
    mr = ibv_reg_mr(pd_, ptr, bytes, kRdmaAccess);
    if (mr == nullptr) {
      *reason = "memory region of " + std::to_string(bytes) + " bytes: dmabuf: " + dmabuf_reason + "; by address: " +
                errno_text("ibv_reg_mr");
      return false;
    }
    mr_registration_ = "va";
  }
  mrs_.push_back(mr);
  *lkey = mr->lkey;
  *rkey = mr->rkey;
  return true;
}

}  // namespace gicomm::mlx5dev
