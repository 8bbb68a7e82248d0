// gicomm-bench-timer: timer self-check. An injected delay must be recovered by each timer the
// benchmarks use: %globaltimer (issue/RTT), clock64 converted with the measured SM clock (issue
// cycles), and CUDA events (rates). --experiment timer_selfcheck, point param injected_ns.
// Records: recovered_ns_globaltimer (a clock64-timed spin read back with globaltimer),
// recovered_ns_clock64 (a globaltimer-timed spin read back with clock64 / SM clock),
// recovered_ns_event (a globaltimer-timed spin kernel read back with events: includes launch), and
// timer_error_pct (worst relative error of the first two p50s).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/harness.h"
#include "gicomm/common/clock.cuh"

using namespace gicomm;
using gicomm::bench::PointFailure;
using gicomm::bench::Record;

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

std::vector<Record> selfcheck(const bench::Point& p, const bench::Options& o) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) throw bench::HardwareMissing("no CUDA GPU visible");
  const double injected = static_cast<double>(p.params.get_int("injected_ns", 10000));
  if (injected < 100) throw PointFailure("injected_ns must be >= 100");
  const int iters = std::max(5, std::min(o.iters, 200));
  const double mhz = probe_sm_clock_mhz(2000000);
  if (!(mhz > 100)) throw PointFailure("SM clock probe failed");
  unsigned long long* d_ns;
  long long* d_cyc;
  cudaMalloc(&d_ns, sizeof(unsigned long long) * iters);
  cudaMalloc(&d_cyc, sizeof(long long) * iters);
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
  std::vector<unsigned long long> ns(iters);
  std::vector<long long> cyc(iters);
  cudaMemcpy(ns.data(), d_ns, sizeof(unsigned long long) * iters, cudaMemcpyDeviceToHost);
  cudaMemcpy(cyc.data(), d_cyc, sizeof(long long) * iters, cudaMemcpyDeviceToHost);
  cudaFree(d_ns);
  cudaFree(d_cyc);
  std::vector<double> gt(ns.begin(), ns.end()), ck;
  for (int i = 0; i < iters - 1; ++i) ck.push_back(static_cast<double>(cyc[i]) * 1e3 / mhz);
  std::vector<Record> out;
  auto add = [&](const char* metric, const char* unit, const std::vector<double>& v) {
    Record r = Record::ok(metric, unit, bench::compute_stats(v));
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

int main(int argc, char** argv) {
  bench::DriverInfo info{"gicomm-bench-timer", "none", "none"};
  return bench::run_driver(argc, argv, info, [](const bench::Point& p, const bench::Options& o) {
    if (o.experiment != "timer_selfcheck") throw PointFailure("gicomm-bench-timer runs timer_selfcheck only");
    return selfcheck(p, o);
  });
}
