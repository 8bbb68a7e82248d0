// Scratch probe: one warp per SM copying 64 KiB chunks, K x 16 B in flight per lane, load kinds.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
template <int K, int KIND>
__device__ __forceinline__ uint4 ld(const uint4* p) {
  if (KIND == 0) return __ldcv(p);
  if (KIND == 1) return __ldcg(p);
  return *p;
}
template <int K, int KIND>
__global__ void copyk(const uint4* src, uint4* dst, size_t per_warp_blocks, int reps, unsigned long long* ns) {
  const int lane = threadIdx.x & 31;
  const size_t base = size_t(blockIdx.x) * per_warp_blocks;
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (int r = 0; r < reps; ++r) {
    for (size_t b = 0; b < per_warp_blocks; b += 32 * K) {
      uint4 v[K];
#pragma unroll
      for (int j = 0; j < K; ++j) v[j] = ld<K, KIND>(src + base + b + j * 32 + lane);
#pragma unroll
      for (int j = 0; j < K; ++j) dst[base + b + j * 32 + lane] = v[j];
    }
  }
  unsigned long long t1;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
  if (lane == 0) ns[blockIdx.x] = t1 - t0;
}
template <int K, int KIND>
void run(const char* kind, uint4* s, uint4* d, unsigned long long* ns, int warps) {
  const size_t per = 4096;  // blocks of 16 B: 64 KiB per warp
  const int reps = 200;
  copyk<K, KIND><<<warps, 32>>>(s, d, per, 2, ns);
  cudaDeviceSynchronize();
  copyk<K, KIND><<<warps, 32>>>(s, d, per, reps, ns);
  cudaDeviceSynchronize();
  unsigned long long h[256];
  cudaMemcpy(h, ns, sizeof(unsigned long long) * warps, cudaMemcpyDeviceToHost);
  unsigned long long mx = 0;
  for (int i = 0; i < warps; ++i) mx = h[i] > mx ? h[i] : mx;
  const double bytes = double(per) * 16 * reps;
  printf("kind %-5s K %2d warps %3d: per warp %.2f GB/s, total %.1f GB/s\n", kind, K, warps, bytes / mx, bytes * warps / mx);
}
int main() {
  uint4 *s, *d;
  unsigned long long* ns;
  cudaMalloc(&s, 256 << 16);
  cudaMalloc(&d, 256 << 16);
  cudaMalloc(&ns, 256 * 8);
  cudaMemset(s, 1, 256 << 16);
  for (int w : {1, 16}) {
    run<4, 0>("cv", s, d, ns, w); run<8, 0>("cv", s, d, ns, w); run<16, 0>("cv", s, d, ns, w); run<32, 0>("cv", s, d, ns, w);
    run<8, 1>("cg", s, d, ns, w); run<16, 1>("cg", s, d, ns, w); run<32, 1>("cg", s, d, ns, w);
    run<8, 2>("plain", s, d, ns, w); run<32, 2>("plain", s, d, ns, w);
  }
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
