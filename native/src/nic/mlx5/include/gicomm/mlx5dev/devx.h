// Real ConnectX backend for mini-gda: the DEVX objects NVSHMEM IBGDA builds (ibgda.cpp), reduced
// to what mini-gda needs, on rdma-core's mlx5dv API.
//
//   DevxDevice::open()        first (or the named) mlx5 device, DEVX context, PD and its pdn
//   alloc_uar()               mlx5dv_devx_alloc_uar: NC_DEDICATED, then NC, then BF (NVSHMEM's order)
//   map_uar_to_gpu()          cudaHostRegister(IoMemory | Mapped | Portable) of the UAR page and
//                             cudaHostGetDevicePointer: the GPU's 8-byte doorbell target (needs the
//                             nvidia module option PeerMappingOverride=1 on most systems)
//   register_gpu_umem()       GPU memory (queues) as a DEVX umem through a dmabuf fd from
//                             cuMemGetHandleForAddressRange (driver API, loaded with dlopen so hosts
//                             without a GPU driver still build and run the failure path)
//   create_cq()               DEVX CREATE_CQ on a umem: collapsed (cc=1), overrun ignore (oi=1),
//                             64-byte CQEs, as NVSHMEM creates its CQs
//
// Not implemented (see native/NOTES-gda.md): CREATE_QP and the RST->INIT->RTR->RTS transitions,
// so no work request reaches a real NIC yet. Every step returns false with a one-line reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

struct ibv_context;
struct ibv_pd;
struct mlx5dv_devx_uar;
struct mlx5dv_devx_umem;
struct mlx5dv_devx_obj;

namespace gicomm::mlx5dev {

struct Umem {
  mlx5dv_devx_umem* umem = nullptr;
  uint32_t id = 0;
  int dmabuf_fd = -1;
};

struct Cq {
  mlx5dv_devx_obj* obj = nullptr;
  uint32_t cqn = 0;
};

class DevxDevice {
 public:
  // Opens the mlx5 device `name` (empty: the first one). nullptr and a one-line reason on failure.
  static std::unique_ptr<DevxDevice> open(const std::string& name, std::string* reason);
  ~DevxDevice();
  DevxDevice(const DevxDevice&) = delete;
  DevxDevice& operator=(const DevxDevice&) = delete;

  const std::string& name() const { return name_; }
  uint32_t pdn() const { return pdn_; }

  bool alloc_uar(std::string* reason);
  const char* uar_type() const { return uar_type_; }
  void* uar_host_page() const;     // the UAR page (BAR) as mapped into this process
  uint32_t uar_page_id() const;    // page_id for the CQ/QP contexts
  // The GPU's pointer to the UAR doorbell register (offset 0x800 of the page, the send doorbell).
  bool map_uar_to_gpu(int gpu, uint64_t** gpu_doorbell, std::string* reason);

  bool register_gpu_umem(void* gpu_ptr, size_t bytes, Umem* out, std::string* reason);
  // A collapsed CQ of 1 CQE whose buffer and doorbell record live in `umem` at the given offsets.
  bool create_cq(const Umem& umem, uint64_t cqe_offset, uint64_t dbrec_offset, Cq* out, std::string* reason);

 private:
  DevxDevice() = default;
  std::string name_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint32_t pdn_ = 0;
  mlx5dv_devx_uar* uar_ = nullptr;
  const char* uar_type_ = "none";
  void* registered_uar_ = nullptr;
};

}  // namespace gicomm::mlx5dev
