// GPU clocks for benchmarks: clock64 (SM cycles) and %globaltimer (ns), sampled together so a
// kernel reports its effective SM clock (cycles over ns) next to every figure. Two shapes, both
// kept as the timed kernels use them: ClockSample (one instant: cycles, then ns) and ClockStamp (a
// window: ns then cycles at its start, cycles then ns at its end, so the ns window holds the
// cycles window).
#pragma once

#include <cstdint>

namespace gicomm {

struct ClockSample {
  long long cycles;
  unsigned long long ns;
};

struct ClockStamp {
  long long c0, c1;
  unsigned long long t0, t1;
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
__device__ __forceinline__ void stamp_begin(ClockStamp* s) {
  s->t0 = globaltimer();
  s->c0 = clock64();
}
__device__ __forceinline__ void stamp_end(ClockStamp* s) {
  s->c1 = clock64();
  s->t1 = globaltimer();
}
// Spins for `cycles` SM cycles (outside timed regions: lets stores drain between iterations).
__device__ __forceinline__ void spin_cycles(long long cycles) {
  const long long end = clock64() + cycles;
  while (clock64() < end) {
  }
}

// One thread stamps a window of `ns` of %globaltimer (bounded by construction).
template <int kUnused = 0>
__global__ void clock_probe_kernel(ClockSample* out, unsigned long long ns) {
  const ClockSample a = clock_sample();
  while (globaltimer() - a.ns < ns) {
  }
  out[0] = a;
  out[1] = clock_sample();
}
#endif

// Effective SM clock between two samples (MHz); 0 when the interval is empty.
inline double sm_clock_mhz(const ClockSample& a, const ClockSample& b) {
  if (b.ns <= a.ns) return 0;
  return static_cast<double>(b.cycles - a.cycles) * 1e3 / static_cast<double>(b.ns - a.ns);
}
inline double sm_clock_mhz(const ClockStamp& s) {
  if (s.t1 <= s.t0) return 0;
  return static_cast<double>(s.c1 - s.c0) * 1e3 / static_cast<double>(s.t1 - s.t0);
}

}  // namespace gicomm
