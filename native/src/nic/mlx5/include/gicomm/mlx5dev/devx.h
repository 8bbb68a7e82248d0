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
//   create_rc_qp()            DEVX CREATE_QP: RC, send queue in a umem (GPU memory), dbrec in a umem,
//                             zero-size RQ, the UAR page above
//   connect_rc_qp()           RST2INIT, INIT2RTR, RTR2RTS to a remote (or the same) QP, IB (LID) or
//                             RoCE (GID)
//   register_dmabuf_mr()      ibv_reg_dmabuf_mr of GPU memory: the lkey/rkey the WQEs carry
//   export_dmabuf()           a dmabuf fd for a GPU range (page-aligned), for register_dmabuf_mr
//   destroy() / release()     QP, CQ and umem teardown (QPs before their CQ, both before the umem)
//
// PRM layouts (bit offsets) are from mlx5_ifc.h (struct mlx5_ifc_*_bits). None of this has run
// against a NIC (there is none on our machines); the failure path (no device) is tested. Every
// step returns false with a one-line reason naming the command and the firmware status/syndrome.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct ibv_context;
struct ibv_pd;
struct ibv_mr;
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

struct Qp {
  mlx5dv_devx_obj* obj = nullptr;
  uint32_t qpn = 0;
};

// What a peer needs to connect to a QP.
struct QpAddress {
  uint32_t qpn = 0;
  uint16_t lid = 0;      // IB
  uint8_t gid[16] = {};  // RoCE (or IB with GRH)
  bool roce = false;
};

struct ConnectParams {
  uint8_t port = 1;
  uint8_t gid_index = 0;  // RoCE source GID index
  uint8_t mtu = 5;        // PRM encoding: 1=256 ... 5=4096
  uint8_t ack_timeout = 14;
  uint8_t retry_count = 7;
  uint8_t rnr_retry = 7;
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
  void* uar_host_doorbell() const; // its doorbell register (reg_addr: the page + the BF offset)
  uint32_t uar_page_id() const;    // page_id for the CQ/QP contexts
  // The GPU's pointer to the UAR doorbell register (offset 0x800 of the page, the send doorbell).
  bool map_uar_to_gpu(int gpu, uint64_t** gpu_doorbell, std::string* reason);

  bool register_gpu_umem(void* gpu_ptr, size_t bytes, Umem* out, std::string* reason);
  // A collapsed CQ of 1 CQE whose buffer and doorbell record live in `umem` at the given offsets.
  bool create_cq(const Umem& umem, uint64_t cqe_offset, uint64_t dbrec_offset, Cq* out, std::string* reason);
  // An RC QP whose send queue (2^log_sq_wqebbs WQEBBs) is at wq_offset of `wq` and whose doorbell
  // record is at dbr_offset of `dbr`; send and (unused) receive completions go to `cqn`.
  bool create_rc_qp(const Umem& wq, uint64_t wq_offset, uint32_t log_sq_wqebbs, const Umem& dbr,
                    uint64_t dbr_offset, uint32_t cqn, Qp* out, std::string* reason);
  // This QP's address as a peer sees it (port LID and the GID at params.gid_index).
  bool local_address(const Qp& qp, const ConnectParams& params, QpAddress* out, std::string* reason);
  bool connect_rc_qp(const Qp& qp, const QpAddress& remote, const ConnectParams& params, std::string* reason);
  // Registers GPU memory (exported as dmabuf) for RDMA; returns lkey and rkey. `gpu_ptr` is both
  // the MR's address (iova) and the start of the dmabuf `dmabuf_fd` exports (offset 0).
  bool register_dmabuf_mr(void* gpu_ptr, size_t bytes, int dmabuf_fd, uint32_t* lkey, uint32_t* rkey,
                          std::string* reason);
  // A dmabuf fd for [gpu_ptr, gpu_ptr + bytes): both page-aligned, inside one allocation.
  static bool export_dmabuf(void* gpu_ptr, size_t bytes, int* fd, std::string* reason);
  static void destroy(Qp* qp);
  static void destroy(Cq* cq);
  static void release(Umem* umem);

 private:
  DevxDevice() = default;
  std::string name_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint32_t pdn_ = 0;
  mlx5dv_devx_uar* uar_ = nullptr;
  const char* uar_type_ = "none";
  void* registered_uar_ = nullptr;
  std::vector<ibv_mr*> mrs_;
};

}  // namespace gicomm::mlx5dev
