// gicomm-mlx5-probe: checks the real-NIC path of mini-gda on this host, step by step: mlx5 device
// with DEVX, UAR (type), UAR mapped into GPU 0, a GPU buffer registered as a dmabuf umem, a
// collapsed CQ on it. Prints one line. Exit 0 when every step worked, 3 (hardware missing, the
// bench contract's code) with the first failing step's reason otherwise.
#include <cstdio>
#include <string>

#include "gicomm/mlx5dev/devx.h"

#if defined(GICOMM_MLX5_WITH_CUDA)
#include <cuda_runtime.h>
#endif

int main(int argc, char** argv) {
  const std::string want = argc > 1 ? argv[1] : "";
  std::string reason;
  auto dev = gicomm::mlx5dev::DevxDevice::open(want, &reason);
  if (!dev) {
    std::fprintf(stderr, "gicomm-mlx5-probe: %s\n", reason.c_str());
    return 3;
  }
  if (!dev->alloc_uar(&reason)) {
    std::fprintf(stderr, "gicomm-mlx5-probe: %s: %s\n", dev->name().c_str(), reason.c_str());
    return 3;
  }
#if defined(GICOMM_MLX5_WITH_CUDA)
  uint64_t* gpu_db = nullptr;
  if (!dev->map_uar_to_gpu(0, &gpu_db, &reason)) {
    std::fprintf(stderr, "gicomm-mlx5-probe: %s: %s\n", dev->name().c_str(), reason.c_str());
    return 3;
  }
  void* buf = nullptr;
  if (cudaMalloc(&buf, 2 << 20) != cudaSuccess) {
    std::fprintf(stderr, "gicomm-mlx5-probe: %s: cudaMalloc failed\n", dev->name().c_str());
    return 3;
  }
  gicomm::mlx5dev::Umem umem;
  gicomm::mlx5dev::Cq cq;
  if (!dev->register_gpu_umem(buf, 2 << 20, &umem, &reason) || !dev->create_cq(umem, 0, 4096, &cq, &reason)) {
    std::fprintf(stderr, "gicomm-mlx5-probe: %s: %s\n", dev->name().c_str(), reason.c_str());
    return 3;
  }
  std::printf("gicomm-mlx5-probe: %s: DEVX ok, pdn %u, UAR %s mapped into GPU 0, dmabuf umem %u, CQ 0x%x\n",
              dev->name().c_str(), dev->pdn(), dev->uar_type(), umem.id, cq.cqn);
#else
  std::printf("gicomm-mlx5-probe: %s: DEVX ok, pdn %u, UAR %s (no CUDA in this build: GPU mapping not checked)\n",
              dev->name().c_str(), dev->pdn(), dev->uar_type());
#endif
  return 0;
}
