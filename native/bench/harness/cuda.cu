#include "harness/cuda.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "gicomm/common/clock.cuh"

namespace gicomm::bench {

namespace {
struct Deferred {
  std::mutex m;
  bool on = false;
  std::vector<void*> frees;
};
// Never destroyed: a rig held in a static may release it while the process exits.
Deferred& deferred() {
  static Deferred* d = new Deferred;
  return *d;
}
}  // namespace

void free_device(void* p) {
  Deferred& d = deferred();
  {
    const std::lock_guard<std::mutex> lock(d.m);
    if (d.on) {
      d.frees.push_back(p);
      return;
    }
  }
  cudaFree(p);
}

void defer_device_frees(bool on) {
  Deferred& d = deferred();
  const std::lock_guard<std::mutex> lock(d.m);
  d.on = on;
}

void release_deferred_frees() {
  Deferred& d = deferred();
  std::vector<void*> now;
  {
    const std::lock_guard<std::mutex> lock(d.m);
    if (d.on) return;
    now.swap(d.frees);
  }
  for (void* p : now) cudaFree(p);
}

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
  free_device(d);
  if (e != cudaSuccess) throw PointFailure(std::string("SM clock probe kernel: ") + cudaGetErrorString(e));
  const double mhz = sm_clock_mhz(h[0], h[1]);
  if (!(mhz > 0)) throw PointFailure("SM clock probe: zero elapsed %globaltimer");
  return mhz;
}

}  // namespace gicomm::bench
