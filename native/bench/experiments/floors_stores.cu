// The floors of bare stores (floors.h): the WQE + ordering + doorbell sequence mini-gda's issue
// stands on, timed one at a time into each kind of memory and posted back to back (the rate a GPU
// thread can post at with nothing consuming: the message-rate floor), and the 16-byte store into a
// host ring the proxy's tuned enqueue stands on.
#include <memory>
#include <string>
#include <vector>

#include "floors_gpu.cuh"

namespace gicomm::bench::floors {
namespace {

// `iters` timed sequences, each after a drain pause (latency), then `iters` back to back (rate).
template <class Order>
__global__ void wqe_doorbell_kernel(uint8_t* sq, uint64_t* db, int warmup, int iters, long long* out,
                                    long long* rate_cycles, Window* w) {
  w->start = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    const long long t = timed_bare_sequence<Order>(sq, db, i);
    if (i >= 0) out[i] = t;
  }
  const long long r0 = clock64();
  for (int i = 0; i < iters; ++i) bare_sequence<Order>(bare_wqe_slot(sq, i), db, i);
  *rate_cycles = clock64() - r0;
  w->end = clock_sample();
}

// The memory the bare sequence stores into, on the producer GPU 0 (device pointers).
struct Target {
  uint8_t* sq = nullptr;
  uint64_t* db = nullptr;
  std::unique_ptr<MappedBuffer<uint8_t>> host;
  std::unique_ptr<DeviceBuffer<uint8_t>> device;
  int peer = -1;
  ~Target() {
    if (peer >= 0) {
      cudaSetDevice(peer);
      device.reset();
      cudaSetDevice(0);
    }
  }
};

}  // namespace

std::vector<Record> wqe_doorbell(Run& run) {
  const std::string target = run.param<std::string>("target");
  const std::vector<std::string> metrics = {"floor_wqe_doorbell_ns", "floor_wqe_doorbell_cycles",
                                            "floor_wqe_doorbell_rate"};
  if (target == "uar") {
    return skip_all(metrics, run.nic() == NicBackend::mlx5
                                 ? "a bare doorbell into a NIC UAR would make the NIC fetch a WQE nobody posted: "
                                   "the UAR floor is floor=nic_loopback's floor_nic_issue_ns (a real WQE)"
                                 : "no NIC UAR: nic_backend none (give nic_backend mlx5 on a host with a ConnectX, "
                                   "or under the emulated rdma-core)");
  }
  Target t;
  GICOMM_CUDA(cudaSetDevice(0));
  if (target == "pinned-host") {
    t.host = std::make_unique<MappedBuffer<uint8_t>>(8192);
    t.sq = t.host->d;
  } else if (target == "gpu-memory") {
    t.device = std::make_unique<DeviceBuffer<uint8_t>>(8192);
    t.sq = t.device->p;
  } else {  // peer-gpu
    if (gpu_count() < 2) return skip_all(metrics, "peer-gpu needs 2 GPUs, found " + std::to_string(gpu_count()));
    int can = 0;
    GICOMM_CUDA(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (!can) return skip_all(metrics, "GPU 0 cannot map GPU 1's memory (no P2P path between them)");
    const cudaError_t e = cudaDeviceEnablePeerAccess(1, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) GICOMM_CUDA(e);
    cudaGetLastError();
    GICOMM_CUDA(cudaSetDevice(1));
    t.device = std::make_unique<DeviceBuffer<uint8_t>>(8192);
    t.peer = 1;
    GICOMM_CUDA(cudaSetDevice(0));
    t.sq = t.device->p;
  }
  t.db = reinterpret_cast<uint64_t*>(t.sq + 4096);
  run.doorbell_target = target;
  const int iters = run.iters();
  DeviceBuffer<long long> out(iters), rate(1);
  DeviceBuffer<Window> w(1);
  order::dispatch(variant_of(run), [&](auto policy) {
    wqe_doorbell_kernel<decltype(policy)><<<1, 1>>>(t.sq, t.db, run.warmup(), iters, out.p, rate.p, w.p);
    return 0;
  });
  Window h{};
  const std::vector<long long> c = collect(out, w, &h, 30.0);
  const double mhz = mhz_of(h);
  const double rate_cycles = static_cast<double>(rate.read()[0]);
  if (!(rate_cycles > 0)) throw PointFailure("back-to-back sequences took no cycles");
  return {timed_record(metrics[0].c_str(), "ns", to_ns(c, mhz), mhz),
          timed_record(metrics[1].c_str(), "cycles", to_d(c), mhz),
          timed_record(metrics[2].c_str(), "Mmsg/s", {iters * mhz / rate_cycles}, mhz)};
}

namespace {

__global__ void ring_store_kernel(uint4* ring, int warmup, int iters, long long* store, long long* empty, Window* w) {
  w->start = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    spin_cycles(kDrainCycles);
    uint4* slot = ring + (i & 255);
    long long t0 = clock64();
    // One 16-byte posted store (nothing waits for it to land), as the proxy's tuned enqueue does.
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(slot), "r"(i), "r"(1), "r"(2), "r"(3)
                 : "memory");
    long long t1 = clock64();
    if (i >= 0) store[i] = t1 - t0;
    t0 = clock64();
    t1 = clock64();
    if (i >= 0) empty[i] = t1 - t0;
  }
  w->end = clock_sample();
}

}  // namespace

std::vector<Record> ring_store(Run& run) {
  GICOMM_CUDA(cudaSetDevice(0));
  MappedBuffer<uint4> ring(256);
  const int iters = run.iters();
  DeviceBuffer<long long> store(iters), empty(iters);
  DeviceBuffer<Window> w(1);
  ring_store_kernel<<<1, 1>>>(ring.d, run.warmup(), iters, store.p, empty.p, w.p);
  Window h{};
  const std::vector<long long> s = collect(store, w, &h, 30.0);
  const double mhz = mhz_of(h);
  run.doorbell_target = "pinned-host";
  return {timed_record("floor_ring_store_ns", "ns", to_ns(s, mhz), mhz),
          timed_record("floor_timer_read_ns", "ns", to_ns(empty.read(), mhz), mhz)};
}

}  // namespace gicomm::bench::floors
