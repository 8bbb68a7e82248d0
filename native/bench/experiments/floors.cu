// floors: the physical floors of this host, one kind per point (`floor`), each with its SM clock,
// so `gicomm doctor` can set every transport's latency beside the sequence it stands on.
//   wqe_doorbell   the 48-byte WQE store + the ordering `variant` + the 8-byte doorbell, into
//                  `target`: pinned-host, gpu-memory, peer-gpu (GPU 1, through a peer mapping) or
//                  uar (a NIC's doorbell page: measured as nic_loopback's issue, see below)
//   ring_store     one 16-byte store into a mapped host ring slot (the floor under the proxy's
//                  tuned enqueue), and the cost of the two clock reads around any timed region
//   host_pingpong  GPU writes a flag in pinned host memory, a host thread answers in another
//   nvlink_pingpong  GPU a writes a flag into GPU b's memory, b answers into a's: every pair
//   nic_loopback   one thread's 8-byte inline RDMA write to itself through mini-gda on the mlx5
//                  backend (a ConnectX, or the emulated rdma-core): issue, put+completion,
//                  message rate; every QP's last CQE and head checked, the NIC port's transmit
//                  counter recorded beside the writes posted
// What the host lacks (no GPU, one GPU, no NIC) is a skipped record saying why, never exit 3, so
// one run on any host says what it could and could not measure. --warmup untimed and --iters timed
// repetitions per sample kind, in one kernel; every GPU wait is bounded by --timeout-ms.
#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gda.cuh"

namespace gicomm::bench {
namespace {

constexpr long long kDrainCycles = 4000;  // between timed stores: earlier ones drain

struct Window {
  ClockSample start, end;
  int timed_out;
};

Record skipped(const std::string& metric, const std::string& unit, const std::string& why) {
  Record r = Record::failed(metric, unit, why);
  r.status = "skipped";
  return r;
}

double mhz_of(const Window& w) {
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

// ---- the bare WQE + ordering + doorbell ------------------------------------------------------------
template <class Order>
__global__ void wqe_doorbell_kernel(uint8_t* sq, uint64_t* db, int warmup, int iters, long long* out, Window* w) {
  w->start = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    const long long t = timed_bare_sequence<Order>(sq, db, i);
    if (i >= 0) out[i] = t;
  }
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

std::vector<Record> wqe_doorbell(Run& run) {
  const std::string target = run.param<std::string>("target");
  const char* m = "floor_wqe_doorbell_ns";
  if (target == "uar") {
    return {skipped(m, "ns", run.nic() == NicBackend::mlx5
                                 ? "a bare doorbell into a NIC UAR would make the NIC fetch a WQE nobody posted: "
                                   "the UAR floor is floor=nic_loopback's floor_nic_issue_ns (a real WQE)"
                                 : "no NIC UAR: nic_backend none (give nic_backend mlx5 on a host with a ConnectX, "
                                   "or under the emulated rdma-core)")};
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
    if (gpu_count() < 2) return {skipped(m, "ns", "peer-gpu needs 2 GPUs, found " + std::to_string(gpu_count()))};
    int can = 0;
    GICOMM_CUDA(cudaDeviceCanAccessPeer(&can, 0, 1));
    if (!can) return {skipped(m, "ns", "GPU 0 cannot map GPU 1's memory (no P2P path between them)")};
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
  DeviceBuffer<long long> out(iters);
  DeviceBuffer<Window> w(1);
  order::dispatch(variant_of(run), [&](auto policy) {
    wqe_doorbell_kernel<decltype(policy)><<<1, 1>>>(t.sq, t.db, run.warmup(), iters, out.p, w.p);
    return 0;
  });
  Window h{};
  const std::vector<long long> c = collect(out, w, &h, 30.0);
  const double mhz = mhz_of(h);
  return {timed_record(m, "ns", to_ns(c, mhz), mhz), timed_record("floor_wqe_doorbell_cycles", "cycles", to_d(c), mhz)};
}

// ---- one 16-byte store into a host ring, and the timer reads around it ----------------------------
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

// ---- flag ping-pong: GPU-host and GPU-GPU ---------------------------------------------------------
// Waits until *flag == want, bounded by `timeout_ns` of %globaltimer; false on timeout.
__device__ __forceinline__ bool wait_flag(const volatile uint32_t* flag, uint32_t want, uint64_t timeout_ns) {
  const uint64_t start = order::globaltimer_ns();
  while (*flag != want) {
    if (order::globaltimer_ns() - start > timeout_ns) return false;
  }
  return true;
}

// The initiator: writes i+1 into `remote`, waits for i+1 in `local`; one sample per exchange.
__global__ void ping_kernel(uint32_t* remote, const uint32_t* local, int warmup, int iters, uint64_t timeout_ns,
                            long long* out, Window* w) {
  w->start = clock_sample();
  w->timed_out = 0;
  for (int i = -warmup; i < iters; ++i) {
    const uint32_t v = static_cast<uint32_t>(i + warmup + 1);
    const long long t0 = clock64();
    order::st_release_sys_u32(remote, v);
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
__global__ void pong_kernel(uint32_t* remote, const uint32_t* local, int total, uint64_t timeout_ns, int* timed_out) {
  for (int i = 1; i <= total; ++i) {
    if (!wait_flag(local, static_cast<uint32_t>(i), timeout_ns)) {
      *timed_out = 1;
      return;
    }
    order::st_release_sys_u32(remote, static_cast<uint32_t>(i));
  }
}

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
      std::atomic_thread_fence(std::memory_order_seq_cst);
      *back = static_cast<uint32_t>(i);
    }
  });
  ping_kernel<<<1, 1>>>(to_host.d, to_gpu.d, run.warmup(), iters, run.timeout_ns(), out.p, w.p);
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

// GPU a pings through GPU b's memory, b answers into a's (both kernels on each GPU's default stream).
Record pair_pingpong(Run& run, int a, int b, Params params) {
  const char* m = "floor_nvlink_pingpong_ns";
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
  pong_kernel<<<1, 1>>>(flag_a.p, flag_b.p, total, run.timeout_ns(), pong_late.p);
  GICOMM_CUDA(cudaSetDevice(a));
  ping_kernel<<<1, 1>>>(flag_b.p, flag_a.p, run.warmup(), iters, run.timeout_ns(), samples.p, w.p);
  wait_stream(0, 30.0, 50);
  GICOMM_CUDA(cudaSetDevice(b));
  wait_stream(0, 30.0, 50);
  const Window h = w.read(1)[0];
  const std::string pair = std::to_string(a) + "-" + std::to_string(b);
  if (h.timed_out || pong_late.read(1)[0]) throw PointFailure("NVLink ping-pong " + pair + ": a flag wait passed --timeout-ms");
  const double mhz = mhz_of(h);
  Record r = timed_record(m, "ns", to_ns(samples.read(iters), mhz), mhz);
  r.params = std::move(params);
  r.doorbell_target = "gpu-memory";
  return r;
}

// Every pair (a < b) of GPUs; a pair without P2P both ways is a skipped record naming it.
std::vector<Record> nvlink_pingpong(Run& run) {
  const char* m = "floor_nvlink_pingpong_ns";
  const int n = gpu_count();
  if (n < 2) return {skipped(m, "ns", "needs 2 GPUs with a P2P path, found " + std::to_string(n))};
  std::vector<Record> out;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
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

// ---- the NIC: loopback RDMA write ---------------------------------------------------------------
struct NicOut {
  long long* issue;
  long long* complete;
  long long rate_cycles;
  Window w;
};

template <class Order>
__global__ void nic_loopback_kernel(gda::Context ctx, GdaTarget tg, int warmup, int iters, NicOut* out) {
  gda::ThreadQp tq(&ctx.qps[0]);
  out->w.start = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    const gda::PutOp op = put_op(tg, tg.dst + 8 * (i & 255), tg.src, 8, true, 0x1000 + i);
    long long issue = 0, complete = 0;
    if (!timed_put_quiet<Order>(tq, ctx, op, &issue, &complete)) break;
    if (i >= 0) {
      out->issue[i] = issue;
      out->complete[i] = complete;
    }
  }
  // Message rate: `iters` writes back to back, one doorbell each, then one quiet.
  const long long r0 = clock64();
  for (int i = 0; i < iters; ++i) {
    if (!tq.put<Order>(ctx, put_op(tg, tg.dst + 8 * (i & 255), tg.src, 8, true, i), true)) break;
  }
  tq.quiet(ctx);
  out->rate_cycles = clock64() - r0;
  tq.flush();
  out->w.end = clock_sample();
}

// The NIC port's transmitted-packet counter (sysfs), or -1 when the provider exposes none.
long long port_xmit_packets(const std::string& device) {
  std::ifstream f("/sys/class/infiniband/" + device + "/ports/1/counters/port_xmit_packets");
  long long v = -1;
  if (f >> v) return v;
  return -1;
}

std::vector<Record> nic_loopback(Run& run) {
  const std::vector<std::string> metrics = {"floor_nic_issue_ns", "floor_nic_write_ns", "floor_nic_msg_rate"};
  const auto skip_all = [&](const std::string& why) {
    std::vector<Record> out;
    for (const auto& m : metrics) out.push_back(skipped(m, m == "floor_nic_msg_rate" ? "Mmsg/s" : "ns", why));
    return out;
  };
  if (run.nic() != NicBackend::mlx5)
    return skip_all("no NIC asked (nic_backend none): give nic_backend mlx5 on a host with a ConnectX, or "
                    "run under the emulated rdma-core (gicomm-emu-run)");
  gda::SessionConfig cfg;
  try {
    cfg = gda_config(run, 1);
  } catch (const HardwareMissing& e) {
    return skip_all(e.what());
  }
  GdaMemory mem;
  mem.dst_bytes = 1 << 20;
  mem.src_bytes = 4096;
  GdaRig& rig = GdaRig::reuse(cfg, mem);
  const std::string device = cfg.mlx5_device.empty() ? "mlx5_0" : cfg.mlx5_device;
  const long long tx0 = port_xmit_packets(device);
  const int iters = run.iters();
  DeviceBuffer<long long> issue(iters), complete(iters);
  DeviceBuffer<NicOut> d_out(1);
  NicOut h{issue.p, complete.p, 0, {}};
  GICOMM_CUDA(cudaMemcpy(d_out.p, &h, sizeof h, cudaMemcpyHostToDevice));
  order::dispatch(variant_of(run), [&](auto policy) {
    nic_loopback_kernel<decltype(policy)><<<1, 1>>>(rig.context(), rig.target(), run.warmup(), iters, d_out.p);
    return 0;
  });
  rig.check("nic loopback kernel");
  rig.check_last_cqes("nic loopback");
  rig.check_heads_meet("nic loopback");
  GICOMM_CUDA(cudaMemcpy(&h, d_out.p, sizeof h, cudaMemcpyDeviceToHost));
  const double mhz = mhz_of(h.w);
  const long long posted = run.warmup() + 2ll * iters;
  const long long tx1 = port_xmit_packets(device);
  Params params = run.point.params;
  if (tx0 >= 0 && tx1 >= 0) {
    // Every write completed (the CQE checks above); the port counter says whether they left the
    // port: a loopback the HCA turns around inside may not count, so it is recorded, not failed on.
    params.set("observed_port_xmit_packets", static_cast<double>(tx1 - tx0));
    params.set("observed_writes_posted", static_cast<double>(posted));
  } else {
    params.set("observed_port_xmit_packets", "unreadable: no sysfs counter for " + device);
  }
  std::vector<Record> out = {
      timed_record(metrics[0].c_str(), "ns", to_ns(issue.read(), mhz), mhz),
      timed_record(metrics[1].c_str(), "ns", to_ns(complete.read(), mhz), mhz),
      timed_record(metrics[2].c_str(), "Mmsg/s", {iters * mhz / static_cast<double>(h.rate_cycles)}, mhz)};
  for (Record& r : out) r.params = params;
  return out;
}

std::vector<Record> measure(Run& run) {
  const std::string floor = run.param<std::string>("floor");
  if (gpu_count() == 0) {
    const std::string why = "needs a CUDA GPU; none visible on this host";
    if (floor == "wqe_doorbell") return {skipped("floor_wqe_doorbell_ns", "ns", why)};
    if (floor == "ring_store") return {skipped("floor_ring_store_ns", "ns", why)};
    if (floor == "host_pingpong") return {skipped("floor_host_pingpong_ns", "ns", why)};
    if (floor == "nvlink_pingpong") return {skipped("floor_nvlink_pingpong_ns", "ns", why)};
    return {skipped("floor_nic_write_ns", "ns", why)};
  }
  if (floor == "wqe_doorbell") return wqe_doorbell(run);
  if (floor == "ring_store") return ring_store(run);
  if (floor == "host_pingpong") return host_pingpong(run);
  if (floor == "nvlink_pingpong") return nvlink_pingpong(run);
  return nic_loopback(run);
}

}  // namespace

GICOMM_EXPERIMENT(floors, measure);

}  // namespace gicomm::bench
