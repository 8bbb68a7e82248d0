// kernel_cost's kernels: a caller kernel that does useful work with `live` values held in
// registers across a communication call site (compiled out, dormant, or sending), on mini-gda or
// mini-proxy. Every variant is a template instantiation; pick() finds the one of a point. Part of
// kernel_cost.cu (its only includer: the kernels keep internal linkage).
#pragma once

#include "gicomm/common/clock.cuh"
#include "gicomm/gda/gda.cuh"
#include "gicomm/order.cuh"
#include "gicomm/proxy/ring.h"

namespace gicomm::bench::kernel_cost {
namespace {

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
}  // namespace
}  // namespace gicomm::bench::kernel_cost
