// What the GPU floors share (floors.h lists them): a kernel's clock window, its SM clock, the
// bounded wait for its samples, and the bounded flag wait of the ping-pongs.
#pragma once

#include <string>
#include <vector>

#include "floors.h"
#include "gda.cuh"

namespace gicomm::bench::floors {

constexpr long long kDrainCycles = 4000;  // between timed stores: earlier ones drain

struct Window {
  ClockSample start, end;
  int timed_out;
};

inline double mhz_of(const Window& w) {
  const double mhz = sm_clock_mhz(w.start, w.end);
  if (!(mhz > 100)) throw PointFailure("implausible SM clock " + std::to_string(mhz) + " MHz");
  return mhz;
}

// Reads a kernel's samples and window after a bounded wait.
template <class T>
std::vector<T> collect(const DeviceBuffer<T>& samples, const DeviceBuffer<Window>& w, Window* out, double limit_s) {
  wait_stream(0, limit_s, 50);
  GICOMM_CUDA(cudaMemcpy(out, w.p, sizeof(Window), cudaMemcpyDeviceToHost));
  if (out->timed_out) throw PointFailure("a flag wait passed --timeout-ms (the other side never answered)");
  return samples.read();
}

// Waits until *flag == want, bounded by `timeout_ns` of %globaltimer; false on timeout.
__device__ __forceinline__ bool wait_flag(const volatile uint32_t* flag, uint32_t want, uint64_t timeout_ns) {
  const uint64_t start = order::globaltimer_ns();
  while (*flag != want) {
    if (order::globaltimer_ns() - start > timeout_ns) return false;
  }
  return true;
}

}  // namespace gicomm::bench::floors
