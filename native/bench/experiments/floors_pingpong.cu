// The flag ping-pong floors (floors.h): a GPU thread and a host thread through pinned host memory,
// and two GPUs through each other's memory over NVLink (or whatever P2P path joins them), in both
// directions. Every wait, on either side, is bounded.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "floors_gpu.cuh"

namespace gicomm::bench::floors {
namespace {

// How a side hands its flag over (param flag_store). A flag that orders nothing before it needs no
// release, so the floor (the least a round trip costs) stores relaxed at system scope, as
// mini-proxy's ring store and completion counter do; release_sys measures what a system-scope
// release adds (a payload handed over before the flag needs it). With release_sys as its only form,
// the GPU-CPU floor sat above mini-proxy's own completion on the H200.
template <bool kRelease>
__device__ __forceinline__ void hand_over(uint32_t* p, uint32_t v) {
  if (kRelease)
    order::st_release_sys_u32(p, v);
  else
    order::st_relaxed_sys_u32(p, v);
}

// The initiator: writes i+1 into `remote`, waits for i+1 in `local`; one sample per exchange.
template <bool kRelease>
__global__ void ping_kernel(uint32_t* remote, const uint32_t* local, int warmup, int iters, uint64_t timeout_ns,
                            long long* out, Window* w) {
  w->start = clock_sample();
  w->timed_out = 0;
  for (int i = -warmup; i < iters; ++i) {
    const uint32_t v = static_cast<uint32_t>(i + warmup + 1);
    const long long t0 = clock64();
    hand_over<kRelease>(remote, v);
    if (!wait_flag(local, v, timeout_ns)) {
      w->timed_out = 1;
      break;
    }
    const long long t1 = clock64();
    if (i >= 0) out[i] = t1 - t0;
  }
  w->end = clock_sample();
}

// The responder on a GPU: echoes each value it sees in `local` into `remote`.
template <bool kRelease>
__global__ void pong_kernel(uint32_t* remote, const uint32_t* local, int total, uint64_t timeout_ns, int* timed_out) {
  for (int i = 1; i <= total; ++i) {
    if (!wait_flag(local, static_cast<uint32_t>(i), timeout_ns)) {
      *timed_out = 1;
      return;
    }
    hand_over<kRelease>(remote, static_cast<uint32_t>(i));
  }
}

// Device memory of one GPU, freed with that GPU current.
template <class T>
struct OnDevice {
  OnDevice(int dev_, size_t n) : dev(dev_) {
    GICOMM_CUDA(cudaSetDevice(dev));
    GICOMM_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), n * sizeof(T)));
    GICOMM_CUDA(cudaMemset(p, 0, n * sizeof(T)));
  }
  ~OnDevice() {
    cudaSetDevice(dev);
    cudaFree(p);
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;
  std::vector<T> read(size_t n) const {
    std::vector<T> v(n);
    GICOMM_CUDA(cudaSetDevice(dev));
    GICOMM_CUDA(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  int dev;
  T* p = nullptr;
};

// GPU a pings through GPU b's memory, b answers into a's (both kernels on each GPU's default
// stream, the responder launched first so it is waiting when the first ping lands).
bool release_of(Run& run) { return run.param<std::string>("flag_store") == "release_sys"; }

Record pair_pingpong(Run& run, int a, int b, Params params) {
  for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
    GICOMM_CUDA(cudaSetDevice(x));
    const cudaError_t e = cudaDeviceEnablePeerAccess(y, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) GICOMM_CUDA(e);
    cudaGetLastError();
  }
  const int iters = run.iters(), total = run.warmup() + iters;
  OnDevice<uint32_t> flag_a(a, 16), flag_b(b, 16);
  OnDevice<int> pong_late(b, 1);
  OnDevice<long long> samples(a, iters);
  OnDevice<Window> w(a, 1);
  GICOMM_CUDA(cudaSetDevice(b));
  const bool release = release_of(run);
  if (release)
    pong_kernel<true><<<1, 1>>>(flag_a.p, flag_b.p, total, run.timeout_ns(), pong_late.p);
  else
    pong_kernel<false><<<1, 1>>>(flag_a.p, flag_b.p, total, run.timeout_ns(), pong_late.p);
  GICOMM_CUDA(cudaSetDevice(a));
  if (release)
    ping_kernel<true><<<1, 1>>>(flag_b.p, flag_a.p, run.warmup(), iters, run.timeout_ns(), samples.p, w.p);
  else
    ping_kernel<false><<<1, 1>>>(flag_b.p, flag_a.p, run.warmup(), iters, run.timeout_ns(), samples.p, w.p);
  wait_stream(0, 30.0, 50);
  GICOMM_CUDA(cudaSetDevice(b));
  wait_stream(0, 30.0, 50);
  const Window h = w.read(1)[0];
  const std::string pair = std::to_string(a) + "-" + std::to_string(b);
  if (h.timed_out || pong_late.read(1)[0]) throw PointFailure("NVLink ping-pong " + pair + ": a flag wait passed --timeout-ms");
  const double mhz = mhz_of(h);
  Record r = timed_record("floor_nvlink_pingpong_ns", "ns", to_ns(samples.read(iters), mhz), mhz);
  r.params = std::move(params);
  r.doorbell_target = "gpu-memory";
  return r;
}

}  // namespace

std::vector<Record> host_pingpong(Run& run) {
  GICOMM_CUDA(cudaSetDevice(0));
  MappedBuffer<uint32_t> to_host(16), to_gpu(16);
  const int iters = run.iters(), total = run.warmup() + iters;
  DeviceBuffer<long long> out(iters);
  DeviceBuffer<Window> w(1);
  // The responder gives up well after the GPU would (its own waits are --timeout-ms each): the
  // launch itself may take a while (module loading) before the first ping.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2 * run.options.timeout_ms) +
                        std::chrono::seconds(10) + std::chrono::microseconds(100) * total;
  std::atomic<bool> host_late{false};
  const bool release = release_of(run);
  std::thread responder([&] {
    volatile uint32_t* in = to_host.p;
    volatile uint32_t* back = to_gpu.p;
    for (int i = 1; i <= total; ++i) {
      while (*in != static_cast<uint32_t>(i)) {
        if (std::chrono::steady_clock::now() > deadline) {
          host_late = true;
          return;
        }
      }
      if (release) std::atomic_thread_fence(std::memory_order_seq_cst);
      *back = static_cast<uint32_t>(i);
    }
  });
  if (release)
    ping_kernel<true><<<1, 1>>>(to_host.d, to_gpu.d, run.warmup(), iters, run.timeout_ns(), out.p, w.p);
  else
    ping_kernel<false><<<1, 1>>>(to_host.d, to_gpu.d, run.warmup(), iters, run.timeout_ns(), out.p, w.p);
  Window h{};
  std::vector<long long> c;
  try {
    c = collect(out, w, &h, 30.0);
  } catch (...) {
    responder.join();
    throw;
  }
  responder.join();
  if (host_late) throw PointFailure("host responder passed its deadline before the GPU's last ping");
  const double mhz = mhz_of(h);
  run.doorbell_target = "pinned-host";
  return {timed_record("floor_host_pingpong_ns", "ns", to_ns(c, mhz), mhz)};
}

// Every ordered pair (a, b), a != b: GPU a initiates (param pair "a-b"), so both directions of a
// link are measured. A pair without P2P both ways is a skipped record naming it; one GPU is one
// skipped record saying there is no pair, never a number.
std::vector<Record> nvlink_pingpong(Run& run) {
  const char* m = "floor_nvlink_pingpong_ns";
  const int n = gpu_count();
  if (n < 2) return {skipped(m, "ns", "one GPU: no NVLink pairs (" + std::to_string(n) + " GPU visible)")};
  std::vector<Record> out;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      Params params = run.point.params;
      params.set("pair", std::to_string(a) + "-" + std::to_string(b));
      int ab = 0, ba = 0;
      GICOMM_CUDA(cudaDeviceCanAccessPeer(&ab, a, b));
      GICOMM_CUDA(cudaDeviceCanAccessPeer(&ba, b, a));
      if (!ab || !ba) {
        Record r = skipped(m, "ns", "GPUs " + std::to_string(a) + " and " + std::to_string(b) + " have no P2P path");
        r.params = params;
        out.push_back(r);
        continue;
      }
      out.push_back(pair_pingpong(run, a, b, params));
    }
  }
  GICOMM_CUDA(cudaSetDevice(0));
  return out;
}

}  // namespace gicomm::bench::floors
