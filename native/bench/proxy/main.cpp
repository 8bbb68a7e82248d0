// gicomm-bench-proxy: mini-proxy benchmark driver (native/bench/README.md is the contract).
//
// Point parameters (all optional; defaults in brackets):
//   mode        issue | pingpong | rate               [issue]
//     issue: one GPU thread, one ring, at most one request outstanding. Per operation: the enqueue
//            cost (issue_ns) and the round trip GPU -> ring -> worker -> NIC -> CQE -> worker ->
//            completion counter -> GPU (completion_ns, the paper's put+completion).
//     pingpong: two GPU threads, rings 0 and 1: ping writes a word through the proxy, pong polls
//            it in the destination (host memory), answers through the proxy, ping polls the answer;
//            rtt_ns per exchange (the paper's RTT, both directions through the proxy).
//     rate:  one GPU producer per ring sends `msgs` requests, then waits for their completion;
//            msg_rate = rings * msgs / (last completion seen - first enqueue), Mmsg/s, per launch.
//   enqueue     baseline | tuned                      [tuned]
//   completion  host | gpu                            [host]  (host-resident counter polled over
//               PCIe, or a GPU-memory counter the worker updates with cuStreamWriteValue64)
//   workers 1..8 [1]  rings 1..32 [=workers]  batch 1..16 [1]  capacity (ring slots) [1024]
//   state       cold | warm                           [warm]
//     cold: workers parked (sleeping, cores idle) for idle_ms before each measured launch, no
//           warm-up; warm: workers spinning and warm_ms of sustained load before measuring.
//   idle_ms [200]  warm_ms [200]  msgs [20000]  reps [5]  numa_node [0]  nic_threads [=workers]
//   window (destination words per ring, a power of two) [64]
//   store       sys | gpu | weak                      [sys]  scope of the tuned 16-byte store; only
//               sys is guaranteed by the memory model to reach the CPU; gpu/weak measure the cost
//               of the scope (the payload check still verifies every request arrived)
// --nic-backend softnic-cpu (default) | none | verbs. Payload check after every point: every
// destination word holds the value of the last request aimed at it.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/harness.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/softnic_backend.h"
#include "gicomm/proxy/topology.h"
#include "gpu_completion.h"
#include "gpu_producer.h"
#if defined(GICOMM_PROXY_WITH_VERBS)
#include "gicomm/verbs/verbs_backend.h"
#endif

using gicomm::bench::HardwareMissing;
using gicomm::bench::Options;
using gicomm::bench::Point;
using gicomm::bench::PointFailure;
using gicomm::bench::Record;
namespace proxy = gicomm::proxy;
namespace pb = gicomm::proxy_bench;

namespace {

#define CUDA_OR_FAIL(call)                                                                  \
  do {                                                                                      \
    const cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) throw PointFailure(std::string(#call) + ": " + cudaGetErrorString(e_)); \
  } while (0)

struct Config {
  std::string mode, enqueue, completion, state, store;
  uint32_t workers, rings, batch, capacity, window, nic_threads, reps, idle_ms, warm_ms;
  int numa_node;
  uint64_t msgs;
};

Config parse(const Point& p) {
  const auto& q = p.params;
  Config c;
  c.mode = q.get_string("mode", "issue");
  c.enqueue = q.get_string("enqueue", "tuned");
  c.completion = q.get_string("completion", "host");
  c.state = q.get_string("state", "warm");
  c.store = q.get_string("store", "sys");
  c.workers = static_cast<uint32_t>(q.get_int("workers", 1));
  c.rings = static_cast<uint32_t>(q.get_int("rings", c.mode == "pingpong" ? 2 : c.workers));
  c.batch = static_cast<uint32_t>(q.get_int("batch", 1));
  c.capacity = static_cast<uint32_t>(q.get_int("capacity", 1024));
  c.window = static_cast<uint32_t>(q.get_int("window", 64));
  c.nic_threads = static_cast<uint32_t>(q.get_int("nic_threads", c.workers));
  c.reps = static_cast<uint32_t>(q.get_int("reps", 5));
  c.idle_ms = static_cast<uint32_t>(q.get_int("idle_ms", 200));
  c.warm_ms = static_cast<uint32_t>(q.get_int("warm_ms", 200));
  c.numa_node = static_cast<int>(q.get_int("numa_node", 0));
  c.msgs = static_cast<uint64_t>(q.get_int("msgs", 20000));
  auto bad = [](const std::string& m) { throw PointFailure("bad parameter: " + m); };
  if (c.mode != "issue" && c.mode != "pingpong" && c.mode != "rate")
    bad("mode must be issue, pingpong or rate, got " + c.mode);
  if (c.enqueue != "baseline" && c.enqueue != "tuned") bad("enqueue must be baseline or tuned, got " + c.enqueue);
  if (c.completion != "host" && c.completion != "gpu") bad("completion must be host or gpu, got " + c.completion);
  if (c.state != "cold" && c.state != "warm") bad("state must be cold or warm, got " + c.state);
  if (c.mode == "issue" && (c.rings != 1 || c.workers != 1)) bad("issue mode uses one ring and one worker");
  if (c.mode == "pingpong" && (c.rings != 2 || c.workers > 2)) bad("pingpong mode uses two rings and 1 or 2 workers");
  if (!proxy::is_pow2(c.window) || uint64_t(c.window) * c.rings > proxy::kInfoSlotMask)
    bad("window must be a power of two and window * rings < 2^24");
  if (c.store != "sys" && c.store != "gpu" && c.store != "weak") bad("store must be sys, gpu or weak, got " + c.store);
  if (c.store != "sys" && c.enqueue != "tuned") bad("store applies to the tuned enqueue only");
  if (c.nic_threads < 1 || c.nic_threads > 64) bad("nic_threads must be in 1..64");
  if (c.reps < 1 || c.msgs < 1) bad("reps and msgs must be >= 1");
  // workers/batch/rings/capacity are validated by WorkerPool::create with its own messages.
  return c;
}

// Mapped, pinned host memory (rings, counters, error report) and plain GPU memory, zeroed.
template <class T>
struct HostBuf {
  explicit HostBuf(size_t n) : n(n) {
    CUDA_OR_FAIL(cudaHostAlloc(reinterpret_cast<void**>(&p), n * sizeof(T), cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(static_cast<void*>(p), 0, n * sizeof(T));
    CUDA_OR_FAIL(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d), p, 0));
  }
  ~HostBuf() { cudaFreeHost(p); }
  HostBuf(const HostBuf&) = delete;
  T* p = nullptr;  // host address
  T* d = nullptr;  // device address of the same memory
  size_t n;
};

template <class T>
struct DevBuf {
  explicit DevBuf(size_t n) : n(n) {
    CUDA_OR_FAIL(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(1, n) * sizeof(T)));
    CUDA_OR_FAIL(cudaMemset(p, 0, std::max<size_t>(1, n) * sizeof(T)));
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  std::vector<T> read() const {
    std::vector<T> v(n);
    CUDA_OR_FAIL(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
  T* p = nullptr;
  size_t n;
};

int g_device = -1;

void require_gpu() {
  if (g_device >= 0) return;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    throw HardwareMissing(std::string("no CUDA device (") + (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") +
                          "): gicomm-bench-proxy needs a GPU producer");
  g_device = 0;
  if (cudaSetDevice(g_device) != cudaSuccess) throw HardwareMissing("cannot use CUDA device 0");
}

std::string describe_wait_error(const pb::DeviceError& e) {
  std::ostringstream m;
  if (e.what == proxy::kWaitRingFull)
    m << "ring " << e.ring << " full at op " << e.op << ": consumer head " << e.seen << ", needed >= " << e.expected;
  else
    m << "ring " << e.ring << " completion wait timed out at op " << e.op << ": done " << e.seen << ", expected "
      << e.expected;
  return m.str();
}

// Bounded host wait for a launch (every GPU wait inside is bounded by --timeout-ms; this bound
// only catches a GPU that stopped answering, after which nothing can be freed safely).
void wait_launch(cudaStream_t s, double limit_s) {
  cudaEvent_t ev;
  CUDA_OR_FAIL(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  CUDA_OR_FAIL(cudaEventRecord(ev, s));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  cudaError_t q;
  while ((q = cudaEventQuery(ev)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "gicomm-bench-proxy: GPU producer kernel did not finish within %.0f s; aborting\n", limit_s);
      std::exit(1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  cudaEventDestroy(ev);
  if (q != cudaSuccess) throw PointFailure(std::string("producer kernel failed: ") + cudaGetErrorString(q));
}

struct CpuClock {
  std::optional<double> mhz;  // mean over the worker cores
  std::string source;         // scaling_cur_freq / proc_cpuinfo / the reason it is unknown
  double min = 0, max = 0;
  std::string per_core;       // "2100,2100,...": one value per worker, in worker order
};

CpuClock read_worker_clocks(const std::vector<int>& cpus) {
  CpuClock c;
  double sum = 0;
  int n = 0;
  for (int cpu : cpus) {
    if (cpu < 0) {
      c.source = "workers not pinned";
      return c;
    }
    const proxy::CpuFreq f = proxy::read_cpu_mhz(cpu);
    if (!f.ok) {
      c.source = f.source;
      return c;
    }
    c.source = f.source;
    c.per_core += (n ? "," : "") + std::to_string(static_cast<long>(f.mhz + 0.5));
    c.min = n ? std::min(c.min, f.mhz) : f.mhz;
    c.max = n ? std::max(c.max, f.mhz) : f.mhz;
    sum += f.mhz;
    ++n;
  }
  if (n) c.mhz = sum / n;
  return c;
}

std::vector<Record> run_point(const Point& pt, const Options& o) {
  const Config c = parse(pt);
  const std::string nic = o.nic_backend.empty() ? "softnic-cpu" : o.nic_backend;
  if (nic == "verbs") {
#if defined(GICOMM_PROXY_WITH_VERBS)
    int ndev = 0;
    gicomm::verbs::describe_devices(&ndev);
    if (ndev == 0)
      throw HardwareMissing("verbs: no RDMA device found (ibv_get_device_list returned none); --nic-backend verbs needs an RDMA NIC");
#else
    throw HardwareMissing("verbs: this build has no rdma-core (libibverbs headers were not found at configure time)");
#endif
  } else if (nic != "softnic-cpu" && nic != "none") {
    throw PointFailure("--nic-backend " + nic + " is not served by gicomm-bench-proxy (softnic-cpu, none, verbs)");
  }
  require_gpu();
  const bool issue = c.mode != "rate";  // issue and pingpong: one op outstanding, per-op samples
  const bool pingpong = c.mode == "pingpong";
  const bool tuned = c.enqueue == "tuned";
  const uint64_t timeout_ns = uint64_t(o.timeout_ms) * 1000000ull;

  // Rings and counters in mapped host memory; reservation and GPU-resident counters in GPU memory.
  HostBuf<proxy::Desc> slots(size_t(c.rings) * c.capacity);
  HostBuf<proxy::RingCounters> counters(c.rings);
  HostBuf<pb::DeviceError> derr(1);
  DevBuf<uint64_t> reserve(c.rings), gpu_done(c.rings), t0(c.rings), t1(c.rings);
  DevBuf<long long> c0(c.rings), c1(c.rings);
  DevBuf<proxy::TunedProducer> tuned_state(c.rings);
  DevBuf<uint32_t> issue_cyc(issue ? o.iters : 0), rtt_cyc(issue ? o.iters : 0);
  HostBuf<uint64_t> remote_buf(size_t(c.rings) * c.window);  // mapped: pingpong polls it
  uint64_t* const remote = remote_buf.p;
  const size_t remote_words = remote_buf.n;
  std::vector<uint64_t> local(512, 0);

  std::vector<proxy::RingView> host_views(c.rings);
  pb::ProducerArgs args{};
  for (uint32_t r = 0; r < c.rings; ++r) {
    const auto v = proxy::mapped_ring_views(r, c.capacity, slots.p, slots.d, counters.p, counters.d, reserve.p);
    host_views[r] = v.host;
    args.rings[r] = v.dev;
    if (c.completion == "gpu") args.rings[r].done = gpu_done.p + r;  // the worker writes it (stream memop)
  }

  // The NIC side.
  std::unique_ptr<gicomm::softnic::SoftNic> softnic;
  std::unique_ptr<gicomm::softnic::CpuEngine> engine;
  std::unique_ptr<proxy::Backend> backend;
  std::string err;
  if (nic == "softnic-cpu") {
    softnic.reset(new gicomm::softnic::SoftNic());
    const auto rmr = softnic->register_mr(remote, remote_words * 8,
                                          gicomm::softnic::kAccessLocalWrite | gicomm::softnic::kAccessRemoteWrite);
    const auto lmr = softnic->register_mr(local.data(), local.size() * 8, gicomm::softnic::kAccessLocalWrite);
    backend = proxy::make_softnic_backend(*softnic, proxy::SoftnicTarget::between(lmr, rmr));
  } else if (nic == "none") {
    backend = proxy::make_null_backend(256);
  } else {
#if defined(GICOMM_PROXY_WITH_VERBS)
    gicomm::verbs::VerbsConfig vc;
    vc.remote = remote;
    vc.remote_bytes = remote_words * 8;
    vc.local = local.data();
    vc.local_bytes = local.size() * 8;
    backend = gicomm::verbs::make_verbs_backend(vc, &err);
    if (!backend) throw HardwareMissing(err);
#endif
  }

  std::unique_ptr<pb::StreamWritePublisher> gpu_pub;
  if (c.completion == "gpu") {
    gpu_pub.reset(new pb::StreamWritePublisher(g_device, gpu_done.p, c.workers));
    if (!gpu_pub->ok(&err)) throw PointFailure("GPU-resident completion: " + err);
  }

  proxy::PoolConfig pc;
  pc.workers = c.workers;
  pc.batch = c.batch;
  pc.numa_node = c.numa_node;
  pc.stall_timeout_ns = timeout_ns;
  auto pool = proxy::WorkerPool::create(pc, host_views, *backend, gpu_pub.get(), &err);
  if (!pool) throw PointFailure("bad parameter: " + err);
  if (softnic) {
    engine.reset(new gicomm::softnic::CpuEngine(*softnic, static_cast<int>(c.nic_threads)));
    engine->start();
  }
  if (!pool->start(/*start_parked=*/true, &err)) throw PointFailure(err);

  cudaStream_t stream;
  CUDA_OR_FAIL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } sg{stream};

  args.tuned = tuned_state.p;
  args.nrings = c.rings;
  args.tuned_mode = tuned ? 1 : 0;
  args.store_scope = c.store == "gpu" ? 1u : c.store == "weak" ? 2u : 0u;
  args.window = c.window;
  args.timeout_ns = timeout_ns;
  args.t_start = t0.p;
  args.t_end = t1.p;
  args.c_start = c0.p;
  args.c_end = c1.p;
  args.issue_cycles = issue_cyc.p;
  args.rtt_cycles = rtt_cyc.p;
  args.err = derr.d;
  args.remote = remote_buf.d;
  uint64_t base = 0;  // tickets per used ring so far
  const double launch_limit_s = 60.0 + double(o.timeout_ms) / 1000.0 * 4;

  auto launch = [&](uint64_t msgs, uint64_t warmup) {
    args.msgs = msgs;
    args.warmup = warmup;
    args.base = base;
    CUDA_OR_FAIL(pingpong ? pb::launch_pingpong(args, stream)
                          : issue ? pb::launch_issue(args, stream) : pb::launch_rate(args, stream));
    wait_launch(stream, launch_limit_s);
    base += msgs + warmup;
    if (derr.p->flag) {
      pool->stop(nullptr, timeout_ns, &err);
      throw PointFailure(describe_wait_error(*derr.p) + (pool->error().empty() ? "" : "; worker: " + pool->error()));
    }
    if (pool->failed()) throw PointFailure("worker: " + pool->error());
  };
  auto sustain = [&](uint32_t ms) {  // warm: sustained load on the workers before measuring
    pool->unpark();
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    do launch(issue ? 2000 : std::min<uint64_t>(c.msgs, 5000), 0);
    while (std::chrono::steady_clock::now() < until);
  };
  auto go_cold = [&]() {  // cold: workers asleep, their cores idle, then woken right before the launch
    pool->park();
    std::this_thread::sleep_for(std::chrono::milliseconds(c.idle_ms));
    pool->unpark();
  };
  auto sm_mhz_of = [&](uint32_t r) {
    const auto ts = t0.read(), te = t1.read();
    const auto cs = c0.read(), ce = c1.read();
    const double ns = double(te[r] - ts[r]);
    return ns > 0 ? double(ce[r] - cs[r]) * 1000.0 / ns : 0.0;
  };

  std::vector<Record> out;
  CpuClock clk;
  double sm_mhz = 0;
  std::vector<double> rates, sm_samples;
  std::vector<double> issue_ns, rtt_ns;
  if (c.state == "warm") sustain(c.warm_ms);
  if (issue) {
    if (c.state == "cold") go_cold();
    clk = read_worker_clocks(pool->worker_cpus());
    launch(uint64_t(o.iters), c.state == "warm" ? uint64_t(o.warmup) : 0);
    sm_mhz = sm_mhz_of(0);
    if (sm_mhz <= 0) throw PointFailure("SM clock measurement failed (zero elapsed globaltimer)");
    const auto ic = issue_cyc.read(), rc = rtt_cyc.read();
    for (size_t i = 0; i < ic.size(); ++i) {
      issue_ns.push_back(ic[i] * 1000.0 / sm_mhz);
      rtt_ns.push_back(rc[i] * 1000.0 / sm_mhz);
    }
  } else {
    double clk_sum = 0;
    int clk_n = 0;
    for (uint32_t rep = 0; rep < c.reps; ++rep) {
      if (c.state == "cold") go_cold();
      const CpuClock k = read_worker_clocks(pool->worker_cpus());
      if (rep == 0) clk = k;
      if (k.mhz) {
        clk_sum += *k.mhz;
        ++clk_n;
      }
      launch(c.msgs, 0);
      const auto ts = t0.read(), te = t1.read();
      const uint64_t start = *std::min_element(ts.begin(), ts.end());
      const uint64_t end = *std::max_element(te.begin(), te.end());
      rates.push_back(double(c.rings) * double(c.msgs) * 1000.0 / double(end - start));
      sm_samples.push_back(sm_mhz_of(0));
    }
    if (clk.mhz && clk_n) clk.mhz = clk_sum / clk_n;
    std::vector<double> s = sm_samples;
    std::sort(s.begin(), s.end());
    sm_mhz = s[s.size() / 2];
  }

  // Drain: every ring consumed and completed what was sent; then check the bytes that landed.
  std::vector<uint64_t> expected(c.rings, base);
  if (!pool->stop(&expected, timeout_ns, &err)) throw PointFailure("drain: " + err);
  if (gpu_pub && !gpu_pub->drain(&err)) throw PointFailure(err);
  const std::vector<proxy::WorkerStats> ws = pool->stats();
  uint64_t posts = 0, descs = 0;
  for (const auto& w : ws) {
    posts += w.posts;
    descs += w.descriptors;
  }
  if (descs != base * c.rings)
    throw PointFailure("workers consumed " + std::to_string(descs) + " descriptors, producers sent " +
                       std::to_string(base * c.rings));
  if (nic != "none") {
    for (uint32_t r = 0; r < c.rings; ++r) {
      for (uint32_t w = 0; w < c.window; ++w) {
        uint64_t want = 0;
        if (base > w) {
          const uint64_t last = w + (base - 1 - w) / c.window * c.window;
          want = pb::payload_value(r, last);
        }
        const uint64_t got = remote[size_t(r) * c.window + w];  // NOLINT: host view of mapped memory
        if (got != want) {
          std::ostringstream m;
          m << "payload check: ring " << r << " word " << w << " holds 0x" << std::hex << got << ", expected 0x" << want;
          throw PointFailure(m.str());
        }
      }
    }
  }
  if (engine) {
    engine->stop();
    const auto nc = engine->counters();
    if (nc.errors) throw PointFailure("softnic reported " + std::to_string(nc.errors) + " error CQEs");
  }

  // Records: the point's params plus what the run observed about its CPUs.
  gicomm::bench::Params params = pt.params;
  std::string cpus;
  for (int cpu : pool->worker_cpus()) cpus += (cpus.empty() ? "" : ",") + std::to_string(cpu);
  params.set("worker_cpus", cpus);
  params.set("cpu_clock_source", clk.source);
  if (clk.mhz) {
    params.set("cpu_mhz_per_worker", clk.per_core);
    params.set("cpu_mhz_min", clk.min);
    params.set("cpu_mhz_max", clk.max);
  }
  params.set("mean_chain", posts ? double(descs) / double(posts) : 0.0);
  auto finish = [&](Record r) {
    r.sm_clock_mhz = sm_mhz;
    r.cpu_clock_mhz = clk.mhz;
    r.cpu_clock_state = c.state;
    r.nic_backend = nic;
    r.params = params;
    return r;
  };
  if (pingpong) {
    out.push_back(finish(Record::ok("rtt_ns", "ns", gicomm::bench::compute_stats(rtt_ns))));
  } else if (issue) {
    out.push_back(finish(Record::ok("issue_ns", "ns", gicomm::bench::compute_stats(issue_ns))));
    out.push_back(finish(Record::ok("completion_ns", "ns", gicomm::bench::compute_stats(rtt_ns))));
  } else {
    out.push_back(finish(Record::ok("msg_rate", "Mmsg/s", gicomm::bench::compute_stats(rates))));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  gicomm::bench::DriverInfo info{"gicomm-bench-proxy", "mini-proxy", "softnic-cpu"};
  return gicomm::bench::run_driver(argc, argv, info, run_point);
}
