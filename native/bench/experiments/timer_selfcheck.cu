// timer_selfcheck: an injected delay (injected_ns) must be recovered by each timer the benchmarks
// use: %globaltimer (issue/RTT), clock64 converted with the measured SM clock (issue cycles), and
// CUDA events (rates). Records: recovered_ns_globaltimer (a clock64-timed spin read back with
// globaltimer), recovered_ns_clock64 (a globaltimer-timed spin read back with clock64 / SM clock),
// recovered_ns_event (a globaltimer-timed spin kernel read back with events: includes launch), and
// timer_error_pct (worst relative error of the first two p50s). --iters spins per timer (5 to 200,
// the event timer at most 20); --warmup does not apply.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gicomm/common/clock.cuh"
#include "harness/cuda.h"
#include "harness/harness.h"

using namespace gicomm;
using namespace gicomm::bench;

namespace {

__global__ void spin_by_cycles(long long cycles, int iters, unsigned long long* gt_ns) {
  for (int i = 0; i < iters; ++i) {
    const unsigned long long t0 = globaltimer();
    spin_cycles(cycles);
    gt_ns[i] = globaltimer() - t0;
  }
}

__global__ void spin_by_globaltimer(unsigned long long ns, int iters, long long* cycles) {
  for (int i = 0; i < iters; ++i) {
    const long long c0 = clock64();
    const unsigned long long t0 = globaltimer();
    while (globaltimer() - t0 < ns) {
    }
    cycles[i] = clock64() - c0;
  }
}

std::vector<Record> selfcheck(Run& run) {
  if (gpu_count() == 0) throw HardwareMissing("no CUDA GPU visible");
  const double injected = static_cast<double>(run.param<long long>("injected_ns"));
  const int iters = std::max(5, std::min(run.iters(), 200));
  const double mhz = measure_sm_clock_mhz(2000000);
  if (!(mhz > 100)) throw PointFailure("SM clock probe failed");
  DeviceBuffer<unsigned long long> ns_buf(iters);
  DeviceBuffer<long long> cyc_buf(iters);
  unsigned long long* d_ns = ns_buf.p;
  long long* d_cyc = cyc_buf.p;
  spin_by_cycles<<<1, 1>>>(static_cast<long long>(injected * mhz / 1e3), iters, d_ns);
  spin_by_globaltimer<<<1, 1>>>(static_cast<unsigned long long>(injected), iters, d_cyc);
  std::vector<double> ev;
  for (int i = 0; i < std::min(iters, 20); ++i) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a);
    spin_by_globaltimer<<<1, 1>>>(static_cast<unsigned long long>(injected), 1, d_cyc + iters - 1);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    ev.push_back(ms * 1e6);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  if (cudaDeviceSynchronize() != cudaSuccess) throw PointFailure("timer kernels failed");
  const std::vector<unsigned long long> ns = ns_buf.read();
  const std::vector<long long> cyc = cyc_buf.read();
  std::vector<double> gt(ns.begin(), ns.end()), ck;
  for (int i = 0; i < iters - 1; ++i) ck.push_back(static_cast<double>(cyc[i]) * 1e3 / mhz);
  std::vector<Record> out;
  auto add = [&](const char* metric, const char* unit, const std::vector<double>& v) {
    Record r = Record::ok(metric, unit, compute_stats(v));
    r.sm_clock_mhz = mhz;
    out.push_back(r);
  };
  add("recovered_ns_globaltimer", "ns", gt);
  add("recovered_ns_clock64", "ns", ck);
  add("recovered_ns_event", "ns", ev);
  const double err = std::max(std::fabs(out[0].stats->p50 - injected), std::fabs(out[1].stats->p50 - injected)) /
                     injected * 100.0;
  add("timer_error_pct", "pct", {err});
  return out;
}

}  // namespace

GICOMM_EXPERIMENT(timer_selfcheck, selfcheck);
