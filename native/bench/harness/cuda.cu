#include "harness/cuda.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "gicomm/common/clock.cuh"

namespace gicomm::bench {

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

void require_gpus(int n, const std::string& what) {
  const int have = gpu_count();
  if (have < n)
    throw HardwareMissing(what + ": needs " + std::to_string(n) + " GPU(s), found " + std::to_string(have));
}

void wait_stream(cudaStream_t s, double limit_s, unsigned poll_us) {
  cudaEvent_t ev;
  GICOMM_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  GICOMM_CUDA(cudaEventRecord(ev, s));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  cudaError_t q;
  while ((q = cudaEventQuery(ev)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "gicomm: a kernel did not finish within %.0f s; aborting (nothing can be freed safely)\n",
                   limit_s);
      std::exit(1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(poll_us));
  }
  cudaEventDestroy(ev);
  if (q != cudaSuccess) throw PointFailure(std::string("kernel failed: ") + cudaGetErrorString(q));
}

double measure_sm_clock_mhz(unsigned long long ns) {
  ClockSample* d = nullptr;
  GICOMM_CUDA(cudaMalloc(&d, 2 * sizeof(ClockSample)));
  clock_probe_kernel<<<1, 1>>>(d, ns);
  ClockSample h[2] = {};
  const cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  cudaFree(d);
  if (e != cudaSuccess) throw PointFailure(std::string("SM clock probe kernel: ") + cudaGetErrorString(e));
  const double mhz = sm_clock_mhz(h[0], h[1]);
  if (!(mhz > 0)) throw PointFailure("SM clock probe: zero elapsed %globaltimer");
  return mhz;
}

}  // namespace gicomm::bench
