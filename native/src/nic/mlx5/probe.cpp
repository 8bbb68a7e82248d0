// gicomm-mlx5-probe: checks the real-NIC path of mini-gda on this host, step by step: mlx5 device
// with DEVX; UAR; UAR mapped into GPU 0; GPU memory as a umem and MR (dmabuf, else by address); a
// collapsed CQ and an
// RC QP on it (queues in GPU memory, as NVSHMEM IBGDA places them); the QP connected to itself;
// one 8-byte inline RDMA write posted from the host with the shared encoders (WQE and dbrec copied
// into GPU memory, 8-byte doorbell to the UAR) and its CQE and payload checked.
// Prints one line. Exit 0 when every step worked, 3 (the bench contract's "hardware missing") when
// no mlx5 device (or no GPU) is there, 1 when a device is there but a step failed.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "gicomm/mlx5/cqe.h"
#include "gicomm/mlx5/doorbell.h"
#include "gicomm/mlx5/wqe.h"
#include "gicomm/mlx5dev/devx.h"

#if defined(GICOMM_MLX5_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace {
int fail(const std::string& device, const std::string& reason, int code) {
  std::fprintf(stderr, "gicomm-mlx5-probe: %s%s\n", device.empty() ? "" : (device + ": ").c_str(), reason.c_str());
  return code;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string want = argc > 1 ? argv[1] : "";
  std::string reason;
  auto dev = gicomm::mlx5dev::DevxDevice::open(want, &reason);
  if (!dev) return fail("", reason, 3);
  const std::string name = dev->name();
  if (!dev->alloc_uar(&reason)) return fail(name, reason, 1);
#if defined(GICOMM_MLX5_WITH_CUDA)
  namespace m = gicomm::mlx5;
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) return fail(name, "no CUDA GPU visible", 3);
  uint64_t* gpu_db = nullptr;
  if (!dev->map_uar_to_gpu(0, gicomm::mlx5dev::DoorbellTarget::automatic, &gpu_db, &reason)) return fail(name, reason, 1);
  // One 2 MiB GPU buffer: CQE at 0, CQ dbrec at 4096, QP dbrec at 4160, SQ (64 WQEBBs) at 8192,
  // payload target at 1 MiB.
  const size_t kBytes = 2 << 20, kCqDbr = 4096, kQpDbr = 4160, kSq = 8192, kData = 1 << 20;
  uint8_t* buf = nullptr;
  if (cudaMalloc(&buf, kBytes) != cudaSuccess || cudaMemset(buf, 0, kBytes) != cudaSuccess)
    return fail(name, "cudaMalloc failed", 1);
  m::Cqe64 fresh;
  m::init_cqe(fresh);
  cudaMemcpy(buf, &fresh, sizeof fresh, cudaMemcpyHostToDevice);
  gicomm::mlx5dev::Umem umem;
  gicomm::mlx5dev::Cq cq;
  gicomm::mlx5dev::Qp qp;
  if (!dev->register_umem(buf, kBytes, &umem, &reason)) return fail(name, reason, 1);
  if (!dev->create_cq(umem, 0, kCqDbr, &cq, &reason)) return fail(name, reason, 1);
  if (!dev->create_rc_qp(umem, kSq, 6, umem, kQpDbr, cq.cqn, &qp, &reason)) return fail(name, reason, 1);
  gicomm::mlx5dev::ConnectParams params;
  gicomm::mlx5dev::QpAddress self;
  if (!dev->local_address(qp, params, &self, &reason)) return fail(name, reason, 1);
  if (!dev->connect_rc_qp(qp, self, params, &reason)) return fail(name, reason, 1);
  uint32_t lkey = 0, rkey = 0;
  if (!dev->register_mr(buf, kBytes, &lkey, &rkey, &reason)) return fail(name, reason, 1);
  // Post one signaled 8-byte inline RDMA write to ourselves.
  const uint64_t value = 0x6769636f6d6d2121ull;
  m::WqeHeader h;
  h.pi = 0;
  h.qpn = qp.qpn;
  h.signaled = true;
  m::WqeImage img;
  const uint32_t ds = m::build_rdma_write_inline_u64(img, h, reinterpret_cast<uint64_t>(buf + kData), rkey, value);
  cudaMemcpy(buf + kSq, &img, ds * 16, cudaMemcpyHostToDevice);
  const uint32_t dbrec = m::sq_dbrec_value(1);
  cudaMemcpy(buf + kQpDbr + 4 * m::kSndDbr, &dbrec, 4, cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();
  // The host rings through its own mapping of the UAR (the GPU mapping was checked above).
  volatile uint64_t* uar = static_cast<volatile uint64_t*>(dev->uar_host_doorbell());
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  *uar = m::doorbell_value(img.seg[0]);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  m::Cqe64 cqe;
  for (;;) {
    cudaMemcpy(&cqe, buf, sizeof cqe, cudaMemcpyDeviceToHost);
    const m::CqeFields f = m::decode_cqe(cqe);
    if (f.opcode == m::kCqeReqErr)
      return fail(name, "error CQE for the test write: syndrome 0x" + std::to_string(f.syndrome), 1);
    if (f.opcode == m::kCqeReq && f.wqe_counter == 0) break;
    if (std::chrono::steady_clock::now() > deadline)
      return fail(name, "no CQE for the test write within 2 s (QP 0x" + std::to_string(qp.qpn) + ")", 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  uint64_t landed = 0;
  cudaMemcpy(&landed, buf + kData, 8, cudaMemcpyDeviceToHost);
  if (landed != value) return fail(name, "the test write completed but its payload is wrong", 1);
  std::printf("gicomm-mlx5-probe: %s (%s): DEVX ok, pdn %u, UAR %s mapped into GPU 0 (%s), umem %u (%s), MR (%s), "
              "CQ 0x%x, RC QP 0x%x connected to itself, 8-byte write completed and verified\n",
              name.c_str(), gicomm::mlx5dev::rdma_provider().c_str(), dev->pdn(), dev->uar_type(), dev->doorbell_target(),
              umem.id, umem.registration, dev->mr_registration(), cq.cqn, qp.qpn);
#else
  std::printf("gicomm-mlx5-probe: %s: DEVX ok, pdn %u, UAR %s (no CUDA in this build: GPU path not checked)\n",
              name.c_str(), dev->pdn(), dev->uar_type());
#endif
  return 0;
}
