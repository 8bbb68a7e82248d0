// Real ConnectX backend for mini-gda: the DEVX objects NVSHMEM IBGDA builds (ibgda.cpp), reduced
// to what mini-gda needs, on rdma-core's mlx5dv API. The same calls run unmodified over gicomm's
// emulated rdma-core (native/emu), which is how they are tested on machines without a NIC.
//
//   DevxDevice::open()        first (or the named) mlx5 device, DEVX context, PD and its pdn
//   alloc_uar()               mlx5dv_devx_alloc_uar: NC_DEDICATED, then NC, then BF (NVSHMEM's order)
//   map_uar_to_gpu()          the GPU's 8-byte doorbell target, chosen explicitly (DoorbellTarget):
//                               uar-iomem    cudaHostRegister(IoMemory | Mapped | Portable) of the
//                                            UAR page: a real UAR (BAR) page; needs the nvidia
//                                            module option PeerMappingOverride=1 on most systems
//                               pinned-host  cudaHostRegister(Mapped | Portable) of the UAR page:
//                                            only an ordinary page passes (the emulated device's
//                                            UAR); the GPU's doorbell store lands in host memory
//                               auto         uar-iomem, and pinned-host when the driver refuses
//                                            IoMemory for the page; doorbell_target() says which
//   register_umem()           queue memory as a DEVX umem: a dmabuf (GPU memory, through
//                             cuMemGetHandleForAddressRange, loaded with dlopen so hosts without a
//                             GPU driver still build and run the failure path) and, when that is
//                             refused or the memory is not GPU memory, by address
//   create_cq()               DEVX CREATE_CQ on a umem: collapsed (cc=1), overrun ignore (oi=1),
//                             64-byte CQEs, as NVSHMEM creates its CQs
//   create_rc_qp()            DEVX CREATE_QP: RC, send queue in a umem, dbrec in a umem,
//                             zero-size RQ, the UAR page above
//   connect_rc_qp()           RST2INIT, INIT2RTR, RTR2RTS to a remote (or the same) QP, IB (LID) or
//                             RoCE (GID)
//   register_mr()             a memory region for the WQEs' keys: dmabuf first (GPU memory), then
//                             ibv_reg_mr by address; mr_registration() says which
//   destroy() / release()     QP, CQ and umem teardown (QPs before their CQ, both before the umem)
//
// PRM layouts (bit offsets) are in gicomm/mlx5dev/prm.h, checked against the kernel's mlx5_ifc.h
// by a test. Every step returns false with a one-line reason naming the command and the status and
// syndrome the device returned.
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
  const char* registration = "none";  // "dmabuf" or "va" (by address)
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

// Where the GPU's doorbell store goes (see map_uar_to_gpu above).
enum class DoorbellTarget { automatic, uar_iomem, pinned_host };
// "auto", "uar-iomem", "pinned-host" <-> DoorbellTarget; false for any other name.
bool parse_doorbell_target(const std::string& name, DoorbellTarget* out);
const char* doorbell_target_name(DoorbellTarget t);

// Which rdma-core answers in this process: "emulated" (gicomm's emulated rdma-core, first on
// LD_LIBRARY_PATH) or "system rdma-core <version>" (from the loaded libibverbs' file name), or
// "unknown" when neither can be told.
std::string rdma_provider();

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
  // The GPU's pointer to the UAR doorbell register (offset 0x800 of the page, the send doorbell),
  // registered as `want` asks. doorbell_target() then names what was done.
  bool map_uar_to_gpu(int gpu, DoorbellTarget want, uint64_t** gpu_doorbell, std::string* reason);
  const char* doorbell_target() const { return doorbell_target_; }  // "none" before map_uar_to_gpu

  bool register_umem(void* ptr, size_t bytes, Umem* out, std::string* reason);
  // A collapsed CQ of 1 CQE whose buffer and doorbell record live in `umem` at the given offsets.
  bool create_cq(const Umem& umem, uint64_t cqe_offset, uint64_t dbrec_offset, Cq* out, std::string* reason);
  // An RC QP whose send queue (2^log_sq_wqebbs WQEBBs) is at wq_offset of `wq` and whose doorbell
  // record is at dbr_offset of `dbr`; send and (unused) receive completions go to `cqn`.
  bool create_rc_qp(const Umem& wq, uint64_t wq_offset, uint32_t log_sq_wqebbs, const Umem& dbr,
                    uint64_t dbr_offset, uint32_t cqn, Qp* out, std::string* reason);
  // This QP's address as a peer sees it (port LID and the GID at params.gid_index).
  bool local_address(const Qp& qp, const ConnectParams& params, QpAddress* out, std::string* reason);
  bool connect_rc_qp(const Qp& qp, const QpAddress& remote, const ConnectParams& params, std::string* reason);
  // Registers [ptr, ptr + bytes) for RDMA (local and remote read/write/atomic); returns lkey and
  // rkey. GPU memory goes through a dmabuf of the page-rounded range first.
  bool register_mr(void* ptr, size_t bytes, uint32_t* lkey, uint32_t* rkey, std::string* reason);
  const char* mr_registration() const { return mr_registration_; }  // of the last register_mr
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
  const char* doorbell_target_ = "none";
  const char* mr_registration_ = "none";
  void* registered_uar_ = nullptr;
  std::vector<ibv_mr*> mrs_;
};

}  // namespace gicomm::mlx5dev
