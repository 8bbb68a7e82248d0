// kernel_cost: what GPU-initiated communication costs the kernel that encloses it (paper Fig 9 /
// Table 14). Parameters: config/experiments/kernel_cost.yaml; kernels: kernel_cost_caller.cuh.
//
// A caller kernel (528 blocks x 256 threads by default) does useful work with `live` values held
// in registers across a communication call site, in one of two shapes:
//   compute  FMA chains: each thread keeps `live` floats and advances every one of them kDepth
//            times per iteration; the call site sits inside the loop, so all `live` values stay
//            live across it. Useful throughput: GFLOP/s (2 flops per FMA).
//   stream   read-modify-write over a device array of array_mib MiB (several times the 60 MB L2
//            of an H200): each step a thread loads `live` elements (coalesced, one per grid
//            stride), the call site, then stores them back scaled. Useful throughput: GB/s
//            (bytes read + written).
// The call site, in thread 0 of each block, at the middle iteration of the kernel:
//   absent     not compiled in (its own template instantiation: the reference)
//   dormant    compiled in, its runtime flag never true (what the code alone costs: registers,
//              occupancy, instruction cache)
//   send       `msgs` (0/1/4/16) 8-byte puts per block, no wait
//   send_wait  the same, then wait for their completion
// Transports:
//   mini-gda   each block owns one QP of a softnic session (QP per block: ThreadQp, no atomics);
//              puts are inline 8-byte RDMA writes, one doorbell after the block's last put; wait is
//              ThreadQp::quiet (the block's QP). Ordering policy: GPU-scope fence (the paper's
//              default) with the gpu engine, system-scope fence with the cpu engine (queues in host
//              memory). nic_backend softnic-gpu (engine on GPU 1; needs 2 GPUs) or softnic-cpu.
//   mini-proxy blocks enqueue 16-byte descriptors into `rings` host rings (block b -> ring
//              b % rings) consumed by a worker pool posting to a softnic (cpu engine); wait polls
//              the ring's completion counter for the block's last ticket. Enqueue is the
//              multi-producer (baseline) path: the tuned path needs one producer per ring, and the
//              pool serves at most 32 rings while 528 blocks send.
//
// Metrics per point (every record carries sm_clock_mhz measured in the caller kernel):
//   registers, registers_absent (cudaFuncGetAttributes numRegs of the exact kernel variants),
//   local_bytes, local_bytes_absent (localSizeBytes: spills and local arrays),
//   occupancy_blocks, occupancy_blocks_absent (cudaOccupancyMaxActiveBlocksPerMultiprocessor),
//   occupancy_fraction (resident threads over the SM's maximum),
//   throughput, throughput_absent (GFLOP/s or GB/s per launch), throughput_loss_pct
//   (per pair of back-to-back launches absent/variant in this process: 100 * (1 - variant/absent)).
// Registers and occupancy need no engine: they are recorded on any GPU host even when the
// transport cannot be set up (then the throughput records are failed records saying why).
//
// --iters timed launch pairs (at most 200), --warmup untimed pairs before them (at most 20).

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "harness/cuda.h"
#include "harness/gda_rig.h"
#include "harness/harness.h"
#include "harness/proxy_rig.h"
#include "kernel_cost_caller.cuh"
#include "kernel_cost_sites.cuh"

namespace gicomm::bench::kernel_cost {
namespace {

Config parse(const Run& run) {
  Config c;
  c.caller = run.param<std::string>("caller");
  c.proxy = *run.transport == Transport::mini_proxy;
  c.mode = run.param<std::string>("mode");
  c.site = run.param<std::string>("site");
  c.nic = run.nic();
  c.live = run.param<int>("live");
  c.blocks = run.param<int>("blocks");
  c.threads = run.param<int>("threads");
  c.flops_per_thread = run.param<int>("flops_per_thread");
  c.array_mib = run.param<int>("array_mib");
  c.msgs = run.param<uint32_t>("msgs");
  c.rings = run.derived<uint32_t>("rings", std::min(32, c.blocks));
  c.workers = run.param<uint32_t>("workers");
  auto bad = [](const std::string& m) { throw PointFailure("bad parameter: " + m); };
  if (c.threads % 32) bad("threads must be a multiple of 32 in 32..256");
  if (c.flops_per_thread < 2 * kDepth * c.live) bad("flops_per_thread too small for live");
  if (c.proxy && c.nic != NicBackend::softnic_cpu)
    bad(std::string("mini-proxy workers post to nic_backend softnic-cpu, got ") + name_of(c.nic));
  if (c.proxy && c.workers > c.rings) bad("mini-proxy needs 1 <= workers <= rings <= 32, workers <= 8");
  return c;
}

int comm_of(const Config& c) {
  if (c.mode == "absent") return kAbsent;
  if (c.proxy) return kProxy;
  return c.nic == NicBackend::softnic_gpu ? kGdaGpuFence : kGdaSysFence;
}

struct Resources {
  int regs = 0;
  size_t local = 0;
  int blocks_per_sm = 0;
  double fraction = 0;
};
Resources resources_of(KernelFn fn, int threads) {
  Resources r;
  cudaFuncAttributes attr{};
  GICOMM_CUDA(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(fn)));
  r.regs = attr.numRegs;
  r.local = attr.localSizeBytes;
  GICOMM_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.blocks_per_sm, reinterpret_cast<const void*>(fn), threads, 0));
  int dev = 0, max_threads = 0;
  GICOMM_CUDA(cudaGetDevice(&dev));
  GICOMM_CUDA(cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerMultiProcessor, dev));
  r.fraction = max_threads > 0 ? double(r.blocks_per_sm) * threads / max_threads : 0;
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<Record> measure(Run& run) {
  const Config c = parse(run);
  if (gpu_count() < 1) throw HardwareMissing("no CUDA device: gicomm-bench-kernel-cost needs a GPU for the caller kernel");
  GICOMM_CUDA(cudaSetDevice(0));
  const int caller = c.caller == "compute" ? kCompute : kStream;
  const int comm = comm_of(c);
  const KernelFn base_fn = pick(caller, kAbsent, c.live, false);
  const KernelFn var_fn = pick(caller, comm, c.live, c.site == "noinline");
  const Resources rb = resources_of(base_fn, c.threads), rv = resources_of(var_fn, c.threads);
  std::vector<Record> out;
  auto add = [&out](Record r, const std::string& transport, const std::string& nic) {
    r.transport = transport;
    r.nic_backend = nic;
    out.push_back(std::move(r));
  };
  const std::string tr = c.mode == "absent" ? "none" : c.proxy ? "mini-proxy" : "mini-gda";
  const std::string nic = c.mode == "absent" ? "none" : name_of(c.nic);
  add(Record::scalar("registers", "registers", rv.regs), tr, nic);
  add(Record::scalar("registers_absent", "registers", rb.regs), tr, nic);
  add(Record::scalar("local_bytes", "bytes", double(rv.local)), tr, nic);
  add(Record::scalar("local_bytes_absent", "bytes", double(rb.local)), tr, nic);
  add(Record::scalar("occupancy_blocks", "blocks/SM", rv.blocks_per_sm), tr, nic);
  add(Record::scalar("occupancy_blocks_absent", "blocks/SM", rb.blocks_per_sm), tr, nic);
  add(Record::scalar("occupancy_fraction", "fraction", rv.fraction), tr, nic);
  const size_t first_measured = out.size();
  auto fail_throughput = [&](const std::string& why) {
    for (const char* m : {"throughput", "throughput_absent", "throughput_loss_pct"})
      add(Record::failed(m, caller == kCompute ? "GFLOP/s" : "GB/s", why), tr, nic);
    // The resource records stay valid: they carry the clock of a short spin kernel.
    const double clk = measure_sm_clock_mhz(2000000);
    for (Record& r : out)
      if (r.status == "ok") r.sm_clock_mhz = clk;
    return out;
  };
  if (rv.blocks_per_sm == 0) return fail_throughput("the kernel variant cannot launch with " + std::to_string(c.threads) + " threads");

  // Caller buffers.
  const size_t threads_total = size_t(c.blocks) * c.threads;
  CallerArgs a{};
  DeviceBuffer<float> outbuf(caller == kCompute ? threads_total : 1);
  size_t n = 0;
  if (caller == kStream) {
    const size_t step = threads_total * size_t(c.live);
    n = std::max<size_t>(1, (size_t(c.array_mib) << 20) / sizeof(float) / step) * step;
  }
  DeviceBuffer<float> array(caller == kStream ? n : 1);
  DeviceBuffer<ClockStamp> clock(1);
  a.out = outbuf.p;
  a.array = array.p;
  a.n = n;
  a.iters = std::max(1, c.flops_per_thread / (2 * kDepth * c.live));
  a.a = 0.9999f;
  a.b = 1e-4f;
  a.clock = clock.p;
  const double useful = caller == kCompute ? double(threads_total) * a.iters * kDepth * c.live * 2.0  // flops
                                           : double(n) * sizeof(float) * 2.0;                         // bytes

  std::unique_ptr<Site> t;
  const bool needs_transport = comm != kAbsent;
  if (needs_transport) {
    try {
      if (comm == kProxy)
        t = std::make_unique<ProxySite>(c, run);
      else
        t = std::make_unique<GdaSite>(c, run);
    } catch (const std::exception& e) {
      return fail_throughput(std::string("transport setup: ") + e.what());
    }
  }
  CommArgs none{};
  CommArgs ca = t ? t->args() : none;
  ca.active = (c.mode == "send" || c.mode == "send_wait") ? 1 : 0;
  ca.wait = c.mode == "send_wait" ? 1 : 0;
  ca.msgs = ca.active ? c.msgs : 0;

  cudaStream_t stream;
  GICOMM_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct Guard {
    cudaStream_t s;
    cudaEvent_t e[2];
    ~Guard() {
      cudaEventDestroy(e[0]);
      cudaEventDestroy(e[1]);
      cudaStreamDestroy(s);
    }
  } g{stream, {}};
  GICOMM_CUDA(cudaEventCreate(&g.e[0]));
  GICOMM_CUDA(cudaEventCreate(&g.e[1]));
  const double limit_s = 30.0 + 4.0 * run.options.timeout_ms / 1000.0;
  uint64_t launches = 0;
  std::vector<double> mhz;
  auto timed = [&](KernelFn fn, bool variant) {
    GICOMM_CUDA(cudaEventRecord(g.e[0], stream));
    fn<<<c.blocks, c.threads, 0, stream>>>(a, ca);
    GICOMM_CUDA(cudaGetLastError());
    GICOMM_CUDA(cudaEventRecord(g.e[1], stream));
    wait_stream(stream, limit_s, 50);
    float ms = 0;
    GICOMM_CUDA(cudaEventElapsedTime(&ms, g.e[0], g.e[1]));
    if (variant && t) {
      t->check_launch();
      ++launches;
    }
    ClockStamp s{};
    GICOMM_CUDA(cudaMemcpy(&s, clock.p, sizeof s, cudaMemcpyDeviceToHost));
    const double m = sm_clock_mhz(s);
    if (m > 0) mhz.push_back(m);
    return useful / (double(ms) * 1e-3) / 1e9;  // GFLOP/s or GB/s
  };
  std::vector<double> thr_base, thr_var, loss;
  try {
    const int warm = std::min(run.warmup(), 20), reps = std::max(1, std::min(run.iters(), 200));
    for (int i = 0; i < warm; ++i) {
      timed(base_fn, false);
      timed(var_fn, true);
    }
    for (int i = 0; i < reps; ++i) {
      // Alternate which goes first so clock or thermal drift does not favour one side.
      double b, v;
      if (i & 1) {
        v = timed(var_fn, true);
        b = timed(base_fn, false);
      } else {
        b = timed(base_fn, false);
        v = timed(var_fn, true);
      }
      thr_base.push_back(b);
      thr_var.push_back(v);
      loss.push_back(100.0 * (1.0 - v / b));
    }
    if (t) t->finish(launches * uint64_t(c.blocks) * ca.msgs);
  } catch (const PointFailure& e) {
    out.resize(first_measured);
    return fail_throughput(e.what());
  }
  if (mhz.empty()) mhz.push_back(measure_sm_clock_mhz(2000000));
  const std::string unit = caller == kCompute ? "GFLOP/s" : "GB/s";
  add(Record::ok("throughput", unit, compute_stats(thr_var)), tr, nic);
  add(Record::ok("throughput_absent", unit, compute_stats(thr_base)), tr, nic);
  add(Record::ok("throughput_loss_pct", "percent", compute_stats(loss)), tr, nic);
  const double clk = median(mhz);
  for (Record& r : out) r.sm_clock_mhz = clk;
  return out;
}

}  // namespace

GICOMM_EXPERIMENT(kernel_cost, measure);

}  // namespace gicomm::bench::kernel_cost
