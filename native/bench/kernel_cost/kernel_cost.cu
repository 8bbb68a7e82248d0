// gicomm-bench-kernel-cost: what GPU-initiated communication costs the kernel that encloses it
// (paper Fig 9 / Table 14; native/bench/README.md is the CLI and record contract).
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
// Point parameters (defaults in brackets):
//   caller compute|stream [compute]  live 8|16|32|64|128|224 [32]
//   transport mini-gda|mini-proxy [mini-gda]  mode absent|dormant|send|send_wait [dormant]
//   site inline|noinline [inline] (the call site inlined into the caller, or a separate function)
//   msgs 0..16 [1]  blocks [528]  threads 64..256 [256]  flops_per_thread [524288]  array_mib [1024]
//   nic_backend softnic-gpu|softnic-cpu (mini-gda) | softnic-cpu (mini-proxy) [softnic-gpu / softnic-cpu]
//   rings 1..32 [min(32, blocks)]  workers 1..8 [2] (mini-proxy)
// --iters: timed launch pairs (capped at 200); --warmup: untimed pairs (capped at 20).
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gicomm/gda/gda.cuh"
#include "gicomm/gda/session.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/ring.h"
#include "gicomm/proxy/softnic_backend.h"
#include "kc_common.cuh"

namespace gicomm::kc {
namespace {

constexpr const char* kProgram = "gicomm-bench-kernel-cost";
constexpr int kDepth = 8;            // FMAs per live value per iteration (compute caller)
constexpr int kMaxThreads = 256;
constexpr uint32_t kSlotsPerBlock = 16;  // destination words per block (msgs <= 16)

enum Caller : int { kCompute = 0, kStream = 1 };
enum Comm : int { kAbsent = 0, kGdaGpuFence = 1, kGdaSysFence = 2, kProxy = 3 };

// First failure of a mini-proxy call site (mapped host memory).
struct ProxyError {
  uint32_t flag;
  uint32_t block;
  proxy::WaitError e;
};

struct CallerArgs {
  float* out;           // compute: one float per thread (keeps the chains alive)
  float* array;         // stream: the array
  size_t n;             // stream: elements
  int iters;            // compute: iterations
  float a, b;           // runtime constants (no folding)
  ClockStamp* clock;    // block 0 thread 0
};

struct CommArgs {
  int active;           // 0: dormant (the site is compiled in, never taken)
  int wait;             // 1: wait for completion after the puts
  uint32_t msgs;
  // mini-gda
  gda::Context ctx;
  uint64_t dst;         // destination words (kSlotsPerBlock per block)
  uint32_t rkey;
  // mini-proxy
  const proxy::RingView* rings;  // device array
  uint32_t nrings;
  uint64_t timeout_ns;
  ProxyError* perr;
};

template <int Comm>
__device__ __forceinline__ void call_site(const CommArgs& c) {
  if (Comm == kGdaGpuFence || Comm == kGdaSysFence) {
    gda::ThreadQp tq(&c.ctx.qps[blockIdx.x]);
    for (uint32_t j = 0; j < c.msgs; ++j) {
      gda::PutOp op{};
      op.raddr = c.dst + 8ull * (uint64_t(blockIdx.x) * kSlotsPerBlock + (j % kSlotsPerBlock));
      op.rkey = c.rkey;
      op.length = 8;
      op.inline_data = true;
      op.value = (uint64_t(blockIdx.x) << 32) | j;
      const bool ok = Comm == kGdaGpuFence ? tq.put<order::GpuFence>(c.ctx, op, j + 1 == c.msgs)
                                           : tq.put<order::SysFence>(c.ctx, op, j + 1 == c.msgs);
      if (!ok) break;  // ErrorReport names the QP; the host turns it into a failed point
    }
    if (c.wait) tq.quiet(c.ctx);
    tq.flush();
  } else if (Comm == kProxy) {
    const proxy::RingView r = c.rings[blockIdx.x % c.nrings];
    proxy::WaitError e{};
    uint64_t last = ~0ull;
    bool ok = true;
    for (uint32_t j = 0; j < c.msgs && ok; ++j) {
      const uint32_t slot = (blockIdx.x % c.nrings) * kSlotsPerBlock + (j % kSlotsPerBlock);
      last = proxy::enqueue_baseline(r, (uint64_t(blockIdx.x) << 32) | j,
                                     proxy::make_info(proxy::Op::write_inline, slot, false), c.timeout_ns, &e);
      ok = last != ~0ull;
    }
    if (ok && c.wait && c.msgs > 0) ok = proxy::wait_done(r, last + 1, c.timeout_ns, &e) == WaitStatus::ok;
    if (!ok && atomicCAS(&c.perr->flag, 0u, 1u) == 0u) {
      c.perr->block = blockIdx.x;
      c.perr->e = e;
      __threadfence_system();
    }
  }
}

// The call site as a separate function (site=noinline): the caller keeps only the call's
// argument registers live, at the price of a call and the callee's own register use (the paper's
// NVSHMEM "separate" build versus inlined).
template <int Comm>
__device__ __noinline__ void call_site_outlined(const CommArgs* c) {
  call_site<Comm>(*c);
}

template <int Comm, bool Outline>
__device__ __forceinline__ void site(const CommArgs& c) {
  if (Outline)
    call_site_outlined<Comm>(&c);
  else
    call_site<Comm>(c);
}

// The caller kernels. `Comm` kAbsent compiles no call site at all. The CommArgs parameter is a
// __grid_constant__ so the outlined site can take its address without a local copy.
template <int Caller, int Comm, int L, bool Outline>
__global__ void __launch_bounds__(kMaxThreads) caller_kernel(CallerArgs a, const __grid_constant__ CommArgs c) {
  const bool clock_thread = blockIdx.x == 0 && threadIdx.x == 0;
  if (clock_thread) stamp_begin(a.clock);
  const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (Caller == kCompute) {
    float v[L];
#pragma unroll
    for (int k = 0; k < L; ++k) v[k] = 1.0f + 1e-3f * float((tid + k) & 1023);
    const int site_iter = a.iters / 2;
    for (int it = 0; it < a.iters; ++it) {
#pragma unroll
      for (int d = 0; d < kDepth; ++d)
#pragma unroll
        for (int k = 0; k < L; ++k) v[k] = fmaf(v[k], a.a, a.b);
      if (Comm != kAbsent && it == site_iter && c.active && threadIdx.x == 0) site<Comm, Outline>(c);
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < L; ++k) s += v[k];
    a.out[tid] = s;
  } else {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    const size_t steps = a.n / (stride * L);  // whole steps; the host sizes n to a multiple
    const size_t site_step = steps / 2;
    for (size_t step = 0; step < steps; ++step) {
      const size_t base = step * stride * L + tid;
      float v[L];
#pragma unroll
      for (int k = 0; k < L; ++k) v[k] = a.array[base + size_t(k) * stride];
      if (Comm != kAbsent && step == site_step && c.active && threadIdx.x == 0) site<Comm, Outline>(c);
#pragma unroll
      for (int k = 0; k < L; ++k) a.array[base + size_t(k) * stride] = fmaf(v[k], a.a, a.b);
    }
  }
  if (clock_thread) stamp_end(a.clock);
}

// Completes everything the blocks left outstanding (send without wait): one thread per QP.
__global__ void drain_kernel(gda::Context ctx) {
  const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q < ctx.num_qps) gda::quiet_qp(ctx, ctx.qps[q]);
}

using KernelFn = void (*)(CallerArgs, const CommArgs);

template <int Caller, int Comm, bool Outline>
KernelFn pick_live(int live) {
  switch (live) {
    case 8: return caller_kernel<Caller, Comm, 8, Outline>;
    case 16: return caller_kernel<Caller, Comm, 16, Outline>;
    case 32: return caller_kernel<Caller, Comm, 32, Outline>;
    case 64: return caller_kernel<Caller, Comm, 64, Outline>;
    case 128: return caller_kernel<Caller, Comm, 128, Outline>;
    case 224: return caller_kernel<Caller, Comm, 224, Outline>;
    default: return nullptr;
  }
}
template <int Caller, bool Outline>
KernelFn pick_comm(int comm, int live) {
  switch (comm) {
    case kAbsent: return pick_live<Caller, kAbsent, false>(live);  // no site: one variant
    case kGdaGpuFence: return pick_live<Caller, kGdaGpuFence, Outline>(live);
    case kGdaSysFence: return pick_live<Caller, kGdaSysFence, Outline>(live);
    case kProxy: return pick_live<Caller, kProxy, Outline>(live);
    default: return nullptr;
  }
}
KernelFn pick(int caller, int comm, int live, bool outline) {
  if (caller == kCompute) return outline ? pick_comm<kCompute, true>(comm, live) : pick_comm<kCompute, false>(comm, live);
  return outline ? pick_comm<kStream, true>(comm, live) : pick_comm<kStream, false>(comm, live);
}

struct Config {
  std::string caller, transport, mode, nic, site;
  int live, blocks, threads, flops_per_thread, array_mib;
  uint32_t msgs, rings, workers;
};

Config parse(const Point& p, const Options& o) {
  const auto& q = p.params;
  Config c;
  c.caller = q.get_string("caller", "compute");
  c.transport = q.get_string("transport", "mini-gda");
  c.mode = q.get_string("mode", "dormant");
  c.site = q.get_string("site", "inline");
  c.nic = nic_backend_of(p, o, c.transport == "mini-proxy" ? "softnic-cpu" : "softnic-gpu");
  c.live = static_cast<int>(q.get_int("live", 32));
  c.blocks = static_cast<int>(q.get_int("blocks", 528));
  c.threads = static_cast<int>(q.get_int("threads", 256));
  c.flops_per_thread = static_cast<int>(q.get_int("flops_per_thread", 1 << 19));
  c.array_mib = static_cast<int>(q.get_int("array_mib", 1024));
  c.msgs = static_cast<uint32_t>(q.get_int("msgs", 1));
  c.rings = static_cast<uint32_t>(q.get_int("rings", std::min(32, c.blocks)));
  c.workers = static_cast<uint32_t>(q.get_int("workers", 2));
  auto bad = [](const std::string& m) { throw PointFailure("bad parameter: " + m); };
  if (c.caller != "compute" && c.caller != "stream") bad("caller must be compute or stream, got " + c.caller);
  if (c.transport != "mini-gda" && c.transport != "mini-proxy")
    bad("transport must be mini-gda or mini-proxy, got " + c.transport);
  if (c.mode != "absent" && c.mode != "dormant" && c.mode != "send" && c.mode != "send_wait")
    bad("mode must be absent, dormant, send or send_wait, got " + c.mode);
  if (!pick(kCompute, kAbsent, c.live, false)) bad("live must be one of 8 16 32 64 128 224");
  if (c.site != "inline" && c.site != "noinline") bad("site must be inline or noinline, got " + c.site);
  if (c.blocks < 1 || c.blocks > 4096) bad("blocks must be in 1..4096");
  if (c.threads < 32 || c.threads > kMaxThreads || c.threads % 32) bad("threads must be a multiple of 32 in 32..256");
  if (c.msgs > kSlotsPerBlock) bad("msgs must be in 0..16");
  if (c.flops_per_thread < 2 * kDepth * c.live) bad("flops_per_thread too small for live");
  if (c.array_mib < 1 || c.array_mib > 16384) bad("array_mib must be in 1..16384");
  if (c.transport == "mini-gda" && c.nic != "softnic-gpu" && c.nic != "softnic-cpu")
    bad("mini-gda runs on nic_backend softnic-gpu or softnic-cpu, got " + c.nic);
  if (c.transport == "mini-proxy" && c.nic != "softnic-cpu")
    bad("mini-proxy workers post to nic_backend softnic-cpu, got " + c.nic);
  if (c.transport == "mini-proxy" && (c.rings < 1 || c.rings > proxy::kMaxRings || c.workers < 1 ||
                                      c.workers > proxy::kMaxWorkers || c.workers > c.rings))
    bad("mini-proxy needs 1 <= workers <= rings <= 32, workers <= 8");
  return c;
}

int comm_of(const Config& c) {
  if (c.mode == "absent") return kAbsent;
  if (c.transport == "mini-proxy") return kProxy;
  return c.nic == "softnic-gpu" ? kGdaGpuFence : kGdaSysFence;
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
  KC_CUDA(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(fn)));
  r.regs = attr.numRegs;
  r.local = attr.localSizeBytes;
  KC_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r.blocks_per_sm, reinterpret_cast<const void*>(fn), threads, 0));
  int dev = 0, max_threads = 0;
  KC_CUDA(cudaGetDevice(&dev));
  KC_CUDA(cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerMultiProcessor, dev));
  r.fraction = max_threads > 0 ? double(r.blocks_per_sm) * threads / max_threads : 0;
  return r;
}

// The transport behind the call site for one point; torn down (and checked) at the end.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual CommArgs args() = 0;
  // Throws PointFailure with the queue and counters when a launch reported a failed wait.
  virtual void check_launch() = 0;
  // Completes what is outstanding and checks the NIC executed `expected` puts.
  virtual void finish(uint64_t expected) = 0;
};

class GdaTransport : public Transport {
 public:
  GdaTransport(const Config& c, const Options& o)
      : dst_(c.nic, 0, size_t(c.blocks) * kSlotsPerBlock * 8), timeout_ms_(o.timeout_ms) {
    gda::SessionConfig sc;
    sc.engine = c.nic;
    sc.num_qps = static_cast<uint32_t>(c.blocks);
    sc.sq_wqebbs = 256;  // 16 puts per block per launch at most: plenty of slots
    sc.timeout_ms = static_cast<uint32_t>(o.timeout_ms);
    s_ = std::make_unique<gda::Session>(sc);
    rkey_ = s_->register_mr(dst_.p, dst_.bytes, softnic::kAccessRemoteWrite | softnic::kAccessLocalWrite).rkey;
    s_->start_engine();
    KC_CUDA(cudaSetDevice(0));
  }
  CommArgs args() override {
    CommArgs a{};
    a.ctx = s_->context();
    a.dst = reinterpret_cast<uint64_t>(dst_.p);
    a.rkey = rkey_;
    return a;
  }
  void check_launch() override {
    const std::string e = s_->take_error();
    if (!e.empty()) throw PointFailure("mini-gda: " + e);
  }
  void finish(uint64_t expected) override {
    const gda::Context ctx = s_->context();
    drain_kernel<<<(ctx.num_qps + 127) / 128, 128>>>(ctx);
    KC_CUDA(cudaGetLastError());
    wait_stream(0, 60.0 + 4.0 * timeout_ms_ / 1000.0, kProgram);  // bounded: every quiet is bounded too
    check_launch();
    s_->stop_engine();
    const softnic::Counters k = s_->engine_counters();
    if (k.wqes != expected || k.errors != 0 || k.flushes != 0) {
      std::ostringstream m;
      m << "mini-gda: engine executed " << k.wqes << " WQEs (" << k.errors << " errors, " << k.flushes
        << " flushed), expected " << expected;
      throw PointFailure(m.str());
    }
  }

 private:
  NicBuf dst_;
  int timeout_ms_;
  std::unique_ptr<gda::Session> s_;
  uint32_t rkey_ = 0;
};

class ProxyTransport : public Transport {
 public:
  ProxyTransport(const Config& c, const Options& o)
      : remote_(size_t(c.rings) * kSlotsPerBlock), perr_(1), rig_(c.rings, uint64_t(o.timeout_ms) * 1000000ull) {
    const auto rmr = rig_.nic.register_mr(remote_.p, remote_.n * 8, softnic::kAccessLocalWrite | softnic::kAccessRemoteWrite);
    rig_.start(rmr, rmr, c.workers, 16);  // chaining 16: chain what is there, the proxy's best case
    nrings_ = c.rings;
  }
  CommArgs args() override {
    CommArgs a{};
    a.rings = rig_.views.p;
    a.nrings = nrings_;
    a.timeout_ns = rig_.timeout_ns;
    a.perr = perr_.d;
    return a;
  }
  void check_launch() override {
    if (perr_.p->flag) {
      const proxy::WaitError& e = perr_.p->e;
      std::ostringstream m;
      m << "mini-proxy: block " << perr_.p->block << " ring " << e.ring
        << (e.what == proxy::kWaitRingFull ? " full: consumer head " : " completion wait timed out: done ") << e.seen
        << ", expected " << e.expected;
      throw PointFailure(m.str());
    }
    if (rig_.pool && rig_.pool->failed()) throw PointFailure("mini-proxy worker: " + rig_.pool->error());
  }
  void finish(uint64_t expected_total) override {
    // Tickets per ring: what the blocks reserved (the device counters), which must also be what
    // the host-side count of launches x msgs says.
    const std::vector<uint64_t> expected = rig_.reserve.read();
    uint64_t sum = 0;
    for (uint64_t v : expected) sum += v;
    if (sum != expected_total)
      throw PointFailure("mini-proxy: blocks reserved " + std::to_string(sum) + " tickets, expected " +
                         std::to_string(expected_total));
    std::string err;
    check_launch();  // a device-side failure names the ring and counters better than the drain
    const bool ok = rig_.drain(expected, &err);  // (check_launch must not touch the pool after this)
    rig_.engine->stop();
    rig_.engine.reset();
    if (!ok) throw PointFailure("mini-proxy drain: " + err);
  }

 private:
  HostBuf<uint64_t> remote_;
  HostBuf<ProxyError> perr_;
  ProxyRig rig_;  // after the memory it posts into: stopped before that is freed
  uint32_t nrings_ = 0;
};

std::vector<Record> run_point(const Point& p, const Options& o) {
  const Config c = parse(p, o);
  if (gpu_count() < 1) throw HardwareMissing("no CUDA device: gicomm-bench-kernel-cost needs a GPU for the caller kernel");
  KC_CUDA(cudaSetDevice(0));
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
  const std::string tr = c.mode == "absent" ? "none" : c.transport;
  const std::string nic = c.mode == "absent" ? "none" : c.nic;
  add(scalar("registers", "registers", rv.regs), tr, nic);
  add(scalar("registers_absent", "registers", rb.regs), tr, nic);
  add(scalar("local_bytes", "bytes", double(rv.local)), tr, nic);
  add(scalar("local_bytes_absent", "bytes", double(rb.local)), tr, nic);
  add(scalar("occupancy_blocks", "blocks/SM", rv.blocks_per_sm), tr, nic);
  add(scalar("occupancy_blocks_absent", "blocks/SM", rb.blocks_per_sm), tr, nic);
  add(scalar("occupancy_fraction", "fraction", rv.fraction), tr, nic);
  const size_t first_measured = out.size();
  auto fail_throughput = [&](const std::string& why) {
    for (const char* m : {"throughput", "throughput_absent", "throughput_loss_pct"})
      add(failed(m, caller == kCompute ? "GFLOP/s" : "GB/s", why), tr, nic);
    // The resource records stay valid: they carry the clock of a short spin kernel.
    const double clk = measure_sm_mhz();
    for (Record& r : out)
      if (r.status == "ok") r.sm_clock_mhz = clk;
    return out;
  };
  if (rv.blocks_per_sm == 0) return fail_throughput("the kernel variant cannot launch with " + std::to_string(c.threads) + " threads");

  // Caller buffers.
  const size_t threads_total = size_t(c.blocks) * c.threads;
  CallerArgs a{};
  DevBuf<float> outbuf(caller == kCompute ? threads_total : 1);
  size_t n = 0;
  if (caller == kStream) {
    const size_t step = threads_total * size_t(c.live);
    n = std::max<size_t>(1, (size_t(c.array_mib) << 20) / sizeof(float) / step) * step;
  }
  DevBuf<float> array(caller == kStream ? n : 1);
  DevBuf<ClockStamp> clock(1);
  a.out = outbuf.p;
  a.array = array.p;
  a.n = n;
  a.iters = std::max(1, c.flops_per_thread / (2 * kDepth * c.live));
  a.a = 0.9999f;
  a.b = 1e-4f;
  a.clock = clock.p;
  const double useful = caller == kCompute ? double(threads_total) * a.iters * kDepth * c.live * 2.0  // flops
                                           : double(n) * sizeof(float) * 2.0;                         // bytes

  std::unique_ptr<Transport> t;
  const bool needs_transport = comm != kAbsent;
  if (needs_transport) {
    try {
      if (comm != kProxy && c.nic == "softnic-gpu" && gpu_count() < 2)
        throw PointFailure("nic_backend softnic-gpu needs 2 GPUs (engine on GPU 1), found " + std::to_string(gpu_count()));
      if (comm == kProxy)
        t = std::make_unique<ProxyTransport>(c, o);
      else
        t = std::make_unique<GdaTransport>(c, o);
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
  KC_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct Guard {
    cudaStream_t s;
    cudaEvent_t e[2];
    ~Guard() {
      cudaEventDestroy(e[0]);
      cudaEventDestroy(e[1]);
      cudaStreamDestroy(s);
    }
  } g{stream, {}};
  KC_CUDA(cudaEventCreate(&g.e[0]));
  KC_CUDA(cudaEventCreate(&g.e[1]));
  const double limit_s = 30.0 + 4.0 * o.timeout_ms / 1000.0;
  uint64_t launches = 0;
  std::vector<double> mhz;
  auto timed = [&](KernelFn fn, bool variant) {
    KC_CUDA(cudaEventRecord(g.e[0], stream));
    fn<<<c.blocks, c.threads, 0, stream>>>(a, ca);
    KC_CUDA(cudaGetLastError());
    KC_CUDA(cudaEventRecord(g.e[1], stream));
    wait_stream(stream, limit_s, kProgram);
    float ms = 0;
    KC_CUDA(cudaEventElapsedTime(&ms, g.e[0], g.e[1]));
    if (variant && t) {
      t->check_launch();
      ++launches;
    }
    ClockStamp s{};
    KC_CUDA(cudaMemcpy(&s, clock.p, sizeof s, cudaMemcpyDeviceToHost));
    const double m = mhz_of(s);
    if (m > 0) mhz.push_back(m);
    return useful / (double(ms) * 1e-3) / 1e9;  // GFLOP/s or GB/s
  };
  std::vector<double> thr_base, thr_var, loss;
  try {
    const int warm = std::min(o.warmup, 20), reps = std::max(1, std::min(o.iters, 200));
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
  if (mhz.empty()) mhz.push_back(measure_sm_mhz());
  const std::string unit = caller == kCompute ? "GFLOP/s" : "GB/s";
  add(Record::ok("throughput", unit, bench::compute_stats(thr_var)), tr, nic);
  add(Record::ok("throughput_absent", unit, bench::compute_stats(thr_base)), tr, nic);
  add(Record::ok("throughput_loss_pct", "percent", bench::compute_stats(loss)), tr, nic);
  const double clk = median(mhz);
  for (Record& r : out) r.sm_clock_mhz = clk;
  return out;
}

}  // namespace
}  // namespace gicomm::kc

int main(int argc, char** argv) {
  gicomm::bench::DriverInfo info{"gicomm-bench-kernel-cost", "mini-gda", "softnic-gpu"};
  return gicomm::bench::run_driver(argc, argv, info, gicomm::kc::run_point);
}
