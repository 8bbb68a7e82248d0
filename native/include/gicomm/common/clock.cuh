// GPU clocks for benchmarks: clock64 (SM cycles) and %globaltimer (ns), sampled together so a
// kernel reports its effective SM clock (cycles over ns) next to every figure.
#pragma once

#include <cstdint>

namespace gicomm {

struct ClockSample {
  long long cycles;
  unsigned long long ns;
};

#if defined(__CUDACC__)
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ ClockSample clock_sample() {
  ClockSample s;
  s.cycles = clock64();
  s.ns = globaltimer();
  return s;
}
// Spins for `cycles` SM cycles (outside timed regions: lets stores drain between iterations).
__device__ __forceinline__ void spin_cycles(long long cycles) {
  const long long end = clock64() + cycles;
  while (clock64() < end) {
  }
}
#endif

// Effective SM clock between two samples (MHz); 0 when the interval is empty.
inline double sm_clock_mhz(const ClockSample& a, const ClockSample& b) {
  if (b.ns <= a.ns) return 0;
  return static_cast<double>(b.cycles - a.cycles) * 1e3 / static_cast<double>(b.ns - a.ns);
}

#if defined(__CUDACC__)
template <int kUnused = 0>
__global__ void clock_probe_kernel(ClockSample* out, unsigned long long ns) {
  const ClockSample a = clock_sample();
  while (globaltimer() - a.ns < ns) {
  }
  out[0] = a;
  out[1] = clock_sample();
}

// Effective SM clock of the current device over a `ns`-long busy kernel (0 on any CUDA error).
// Drivers call it right after a measurement whose kernel does not sample the clock itself.
inline double probe_sm_clock_mhz(unsigned long long ns = 200000) {
  ClockSample* d = nullptr;
  if (cudaMalloc(&d, 2 * sizeof(ClockSample)) != cudaSuccess) return 0;
  clock_probe_kernel<<<1, 1>>>(d, ns);
  ClockSample h[2] = {};
  const bool ok = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess;
  cudaFree(d);
  return ok ? sm_clock_mhz(h[0], h[1]) : 0;
}
#endif

}  // namespace gicomm
