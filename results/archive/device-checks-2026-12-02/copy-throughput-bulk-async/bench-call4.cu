// Scratch: per-SM copy throughput on 16 SMs, LDG/STG (the engine's aligned rounds: 8 warps, 16 x
// 16 B a lane in flight) against bulk async copies (one thread, a ring of shared-memory slots).
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <cstdlib>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr uint32_t kPass = 128 * 1024;  // 32 x 4 KiB per pass and block

__global__ void ldst(const uint8_t* src, uint8_t* dst, uint32_t region, int iters) {
  const uint8_t* s0 = src + (size_t)blockIdx.x * region;
  uint8_t* d0 = dst + (size_t)blockIdx.x * region;
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int it = 0; it < iters; ++it) {
    const uint32_t off = (uint32_t)(((uint64_t)it * kPass) % region);
    const uint32_t units = kPass / 16;  // 8192
    for (uint32_t r = warp; r * 512 < units; r += warps) {
      uint4 v[16];
#pragma unroll
      for (int j = 0; j < 16; ++j) v[j] = __ldcv(reinterpret_cast<const uint4*>(s0 + off) + r * 512 + j * 32 + lane);
#pragma unroll
      for (int j = 0; j < 16; ++j) reinterpret_cast<uint4*>(d0 + off)[r * 512 + j * 32 + lane] = v[j];
    }
    __syncthreads();
  }
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// One thread: pieces of `piece` bytes through `slots` slots; loads up to slots-1 ahead of stores.
__global__ void tma(const uint8_t* src, uint8_t* dst, uint32_t region, int iters, uint32_t piece, uint32_t slots) {
  extern __shared__ __align__(128) uint8_t buf[];
  __shared__ __align__(8) uint64_t bar[64];
  if (threadIdx.x != 0) return;
  for (uint32_t i = 0; i < slots; ++i)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bar[i])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const uint8_t* s0 = src + (size_t)blockIdx.x * region;
  uint8_t* d0 = dst + (size_t)blockIdx.x * region;
  const uint64_t n = (uint64_t)iters * (kPass / piece);
  auto addr = [&](uint64_t i) { return (uint32_t)((i * piece) % region); };
  auto load = [&](uint64_t i) {
    const uint32_t s = (uint32_t)(i % slots);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(&bar[s])), "r"(piece) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_u32(buf + (size_t)s * piece)),
                 "l"(s0 + addr(i)), "r"(piece), "r"(smem_u32(&bar[s]))
                 : "memory");
  };
  asm volatile("fence.proxy.async.global;" ::: "memory");
  const uint32_t P = slots / 2;  // stores in flight
  for (uint64_t i = 0; i < n && i < slots - P; ++i) load(i);
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t s = (uint32_t)(i % slots), parity = (uint32_t)((i / slots) & 1);
    uint32_t done = 0;
    while (!done)
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done) : "r"(smem_u32(&bar[s])), "r"(parity) : "memory");
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(d0 + addr(i)),
                 "r"(smem_u32(buf + (size_t)s * piece)), "r"(piece) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    // The slot of piece i-1 is free once its store has read it (at most the newest group pending).
    switch (P) {
      case 2: asm volatile("cp.async.bulk.wait_group.read 2;" ::: "memory"); break;
      case 4: asm volatile("cp.async.bulk.wait_group.read 4;" ::: "memory"); break;
      case 6: asm volatile("cp.async.bulk.wait_group.read 6;" ::: "memory"); break;
      case 8: asm volatile("cp.async.bulk.wait_group.read 8;" ::: "memory"); break;
      case 12: asm volatile("cp.async.bulk.wait_group.read 12;" ::: "memory"); break;
      case 16: asm volatile("cp.async.bulk.wait_group.read 16;" ::: "memory"); break;
      case 24: asm volatile("cp.async.bulk.wait_group.read 24;" ::: "memory"); break;
      default: asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); break;
    }
    if (i + slots - P < n) load(i + slots - P);
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

int main(int argc, char** argv) {
  const int blocks = 16;
  for (uint32_t region : {kPass, 16u * 1024 * 1024}) {
    uint8_t *src, *dst;
    CK(cudaMalloc(&src, (size_t)blocks * region));
    CK(cudaMalloc(&dst, (size_t)blocks * region));
    CK(cudaMemset(src, 7, (size_t)blocks * region));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const int iters = 4000;
    auto report = [&](const char* what) {
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      const double gbs = (double)blocks * iters * kPass / (ms * 1e-3) / 1e9;
      int clk = 0;
      printf("region %8u KiB/block %-28s %8.1f GB/s total  %6.1f GB/s per SM  %6.1f 4KiB-MWQE/s\n", region / 1024, what,
             gbs, gbs / blocks, gbs * 1e9 / 4096 / 1e6);
      (void)clk;
    };
    for (int rep = 0; rep < 1; ++rep) {
      for (int w : {7, 8, 16}) {
        CK(cudaEventRecord(a));
        ldst<<<blocks, 32 * w>>>(src, dst, region, iters);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        CK(cudaGetLastError());
        char name[64];
        snprintf(name, sizeof name, "ldst %d warps", w);
        report(name);
      }
      for (uint32_t piece : {4096u, 8192u, 16384u}) {
        for (uint32_t bytes : {64u * 1024, 128u * 1024, 192u * 1024}) {
          const uint32_t slots = bytes / piece;
          CK(cudaFuncSetAttribute(tma, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
          CK(cudaEventRecord(a));
          tma<<<blocks, 32, bytes>>>(src, dst, region, iters, piece, slots);
          CK(cudaEventRecord(b));
          CK(cudaEventSynchronize(b));
          CK(cudaGetLastError());
          char name[64];
          snprintf(name, sizeof name, "tma piece %u x %u slots", piece, slots);
          report(name);
        }
      }
    }
    // correctness of the last tma run: dst == src on the region copied
    CK(cudaMemset(dst, 0, (size_t)blocks * region));
    tma<<<blocks, 32, 65536>>>(src, dst, region, (int)(region / kPass), 4096, 16);
    CK(cudaDeviceSynchronize());
    uint8_t* h = (uint8_t*)malloc((size_t)blocks * region);
    CK(cudaMemcpy(h, dst, (size_t)blocks * region, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < (size_t)blocks * region; ++i) bad += h[i] != 7;
    printf("region %u KiB/block: tma copy check: %zu bad bytes\n", region / 1024, bad);
    free(h);
    CK(cudaFree(src));
    CK(cudaFree(dst));
  }
  return 0;
}
