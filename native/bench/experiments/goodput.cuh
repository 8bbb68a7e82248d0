// What goodput's two transports share: a launch's goodput and message rate from the producers'
// own %globaltimer stamps.
#pragma once

#include <algorithm>
#include <vector>

#include "gicomm/common/clock.cuh"
#include "harness/cuda.h"
#include "harness/harness.h"

namespace gicomm::bench::goodput {

struct Measured {
  std::vector<double> gbps, rate, mhz;
};

// What a point asks: `n` CTAs, `msgs` writes each of `size` bytes, `slots` payload slots per CTA.
struct Shape {
  uint32_t n, msgs, size, batch, workers;
  uint64_t slots;
};

// Goodput and message rate of one launch from the producers' own stamps.
inline void add_launch(Measured& m, const DeviceBuffer<unsigned long long>& t0, const DeviceBuffer<unsigned long long>& t1,
                       const DeviceBuffer<ClockStamp>& clock, double total_msgs, double size) {
  const auto s0 = t0.read(), s1 = t1.read();
  const double ns = double(*std::max_element(s1.begin(), s1.end()) - *std::min_element(s0.begin(), s0.end()));
  if (ns <= 0) throw PointFailure("zero elapsed globaltimer");
  m.gbps.push_back(total_msgs * size / ns);  // bytes/ns = GB/s
  m.rate.push_back(total_msgs * 1000.0 / ns);
  ClockStamp c{};
  GICOMM_CUDA(cudaMemcpy(&c, clock.p, sizeof c, cudaMemcpyDeviceToHost));
  if (sm_clock_mhz(c) > 0) m.mhz.push_back(sm_clock_mhz(c));
}

// Launch counts: min(--warmup, 5) untimed, then max(1, min(--iters, 50)) timed.
inline int warm_launches(const Run& run) { return std::min(std::max(run.warmup(), 0), 5); }
inline int timed_launches(const Run& run) { return std::max(1, std::min(run.iters(), 50)); }

Measured measure_proxy(Run& run, const Shape& s);  // goodput_proxy.cu

}  // namespace gicomm::bench::goodput
