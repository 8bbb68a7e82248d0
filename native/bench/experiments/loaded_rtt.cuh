// What loaded_rtt's two transports share: the configuration of a point, the device memory of one
// kernel run (probe samples, bulk load, phase, clock window) and what a run gives back.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gicomm/common/clock.cuh"
#include "gicomm/net/oob.h"
#include "harness/cuda.h"
#include "harness/harness.h"

namespace gicomm::bench::loaded_rtt {

constexpr uint32_t kBulkSlots = 64;  // destination words per bulk CTA
constexpr uint32_t kMaxBatch = 16;

struct BulkStat {
  unsigned long long posted;        // all puts of the CTA
  unsigned long long win_posted;    // puts inside the measuring window
  unsigned long long win_ns;        // the window's length as this CTA saw it
};

struct RttConfig {
  NicBackend nic;
  bool shared, pingpong;
  bool bulk_tuned = false;  // mini-proxy bulk CTAs: tuned enqueue, one ring each
  uint32_t bulk_ctas, batch, workers, rings;
  double pace;
  long long settle_us, sq_wqebbs;
  // Two ranks (mini-proxy, verbs, pingpong): the probe's answers come from rank 1's responder;
  // `ask` already names which (ask_responder), run_proxy adds what it answers.
  bool peer_pong = false;
  net::Message ask;
};

// What one kernel run gives back, whichever transport.
struct RttRun {
  std::vector<uint32_t> cycles;
  std::vector<BulkStat> bulk;
  ClockStamp clock{};
  unsigned long long done = 0;
};

// Total pace_mmsgs spread over the CTAs: each CTA issues `per_period` messages per period (a
// mini-gda batch of `batch` WQEs; one descriptor for mini-proxy).
inline unsigned long long period_of(const RttConfig& c, uint32_t per_period) {
  return c.pace > 0 && c.bulk_ctas > 0
             ? static_cast<unsigned long long>(double(per_period) * c.bulk_ctas * 1000.0 / c.pace)
             : 0;
}

// Device memory of one kernel run, whichever transport: the probe's cycles per measured exchange,
// the bulk CTAs' readiness and load, the phase word, the probe's progress and clock window.
struct RunBufs {
  RunBufs(uint32_t iters_, uint32_t nbulk_)
      : iters(iters_), nbulk(nbulk_), cycles(iters), ready(1), phase(1), bulk(std::max<uint32_t>(1, nbulk)),
        probe_done(1), clock(1) {}

  // The fields RttArgs and ProxyRttArgs share; `per_period` is what a bulk CTA issues per pacing period.
  template <class Args>
  void fill(Args& a, const RttConfig& c, int warmup, uint32_t per_period) const {
    a.shared = c.shared ? 1 : 0;
    a.pingpong = c.pingpong ? 1 : 0;
    a.bulk_ctas = nbulk;
    a.period_ns = period_of(c, per_period);
    a.settle_ns = static_cast<unsigned long long>(c.settle_us) * 1000ull;
    a.deadline_ns = 120ull * 1000000000ull;
    a.warmup = static_cast<uint32_t>(std::max(0, warmup));
    a.iters = iters;
    a.cycles = cycles.p;
    a.ready = ready.p;
    a.phase = phase.p;
    a.bulk = bulk.p;
    a.probe_done = probe_done.p;
    a.clock = clock.p;
  }

  // One kernel run: 2 + bulk_ctas blocks (probe, responder, bulk CTAs) of 32 threads on `s`, and
  // the bounded host wait for it.
  template <class Args>
  void launch(void (*kernel)(Args), const Args& a, cudaStream_t s) const {
    kernel<<<2 + nbulk, 32, 0, s>>>(a);
    GICOMM_CUDA(cudaGetLastError());
    wait_stream(s, 150.0, 50);
  }

  void read_done(RttRun& run) const {
    GICOMM_CUDA(cudaMemcpy(&run.done, probe_done.p, sizeof run.done, cudaMemcpyDeviceToHost));
  }
  void read_bulk(RttRun& run) const { run.bulk = nbulk ? bulk.read() : std::vector<BulkStat>{}; }
  // The probe's window and cycles, once it is known to have done every exchange.
  template <class Args>
  void read_probe(RttRun& run, const Args& a) const {
    if (run.done < a.warmup + a.iters) throw PointFailure("probe stopped after " + std::to_string(run.done) + " exchanges");
    GICOMM_CUDA(cudaMemcpy(&run.clock, clock.p, sizeof run.clock, cudaMemcpyDeviceToHost));
    run.cycles = cycles.read();
  }

  uint32_t iters, nbulk;
  DeviceBuffer<uint32_t> cycles;
  DeviceBuffer<unsigned int> ready;
  DeviceBuffer<int> phase;
  DeviceBuffer<BulkStat> bulk;
  DeviceBuffer<unsigned long long> probe_done;
  DeviceBuffer<ClockStamp> clock;
};

RttRun run_gda(const RttConfig& c, Run& run);    // loaded_rtt_gda.cu
RttRun run_proxy(const RttConfig& c, Run& run);  // loaded_rtt_proxy.cu

}  // namespace gicomm::bench::loaded_rtt
