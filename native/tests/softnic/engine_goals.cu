// The gpu engine's goals, measured side by side in one run (softnic numbers: the model NIC, not a NIC):
//   ceiling      the engine's own rate per WQE shape (gicomm/softnic/gpu_ceiling.h), 16 QPs;
//   msg_rate     mini-gda's message rate on the same shapes: 16 QPs, one thread each, 16 WQEs per
//                doorbell, GPU-scope fence, every WQE signaled into a collapsed CQ (the figure
//                experiment's rate kernel), so ceiling / msg_rate says whether the model NIC bounds it;
//   completion   one pointer write of 8 B .. 4 KiB, put + completion (quiet) by one thread, at most
//                one outstanding, p50 of 2,000;
//   warp_copy    a bare warp copy of the same bytes over the same memory path (16 B per lane,
//                cache-bypassing loads from the producer GPU's memory, stores to it, then a
//                system-scope fence), run on the engine's GPU, p50 of 2,000;
//   chain        the protocol's dependent chain without the engine (chain_kernel: doorbell ->
//                descriptor -> payload -> CQE -> the producer's poll), same GPU only, p50 of 2,000:
//                what put + completion cannot go below on that memory path.
//   split_*      where put + completion's time goes, same GPU only (the producer can read the
//                destination): the same one-op loop, the producer timing the put's return
//                (split_posted), then polling the destination until the payload is there
//                (split_landed), then quiet (split_done); and the chain's producer likewise
//                (chain_landed). Each p50 of its own column, so they need not add up exactly; the
//                landing poll adds a read of the destination line, so split_done runs a little
//                above completion.
// Placements: softnic-gpu-same (the engine on 16 SMs of GPU 0) always; softnic-gpu (engine on GPU 1)
// when two GPUs see each other; --placement NAME runs only that one. Every kernel samples clock64
// and %globaltimer: each figure carries the SM clock it ran at. Output: one JSON object per line on
// stdout (and a readable line on stderr).
// Usage: gicomm-softnic-engine-goals --label NAME [--quick] [--engine-warps N] [--placement NAME]
// (N: the gpu engine's warps per block, default softnic::kDefaultWarpsPerBlock; every record names
// it). Exit 0, 1 (a measurement failed; the others still ran), 2 (bad arguments), 77 (no GPU, or
// not the two GPUs the named placement needs).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gicomm/common/clock.cuh"
#include "gicomm/gda/gda.cuh"
#include "gicomm/gda/session.h"
#include "gicomm/softnic/gpu_ceiling.h"
#include "gicomm/softnic/gpu_engine.h"
#include "gicomm/softnic/peer_access.h"

using namespace gicomm;
using namespace gicomm::gda;

namespace {

#define CUDA_OR_THROW(x)                                                                                \
  do {                                                                                                  \
    cudaError_t e_ = (x);                                                                               \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#x) + ": " + cudaGetErrorString(e_)); \
  } while (0)

std::string g_label;
int g_engine_warps = softnic::kDefaultWarpsPerBlock;  // the gpu engine's warps per block (--engine-warps)
int g_failures = 0;

void emit(const std::string& placement, const std::string& measure, const std::string& shape, double value,
          const char* unit, double mhz, const std::string& extra = "") {
  std::printf("{\"label\": \"%s\", \"placement\": \"%s\", \"measure\": \"%s\", \"shape\": \"%s\", \"value\": %.4f, "
              "\"unit\": \"%s\", \"sm_clock_mhz\": %.1f, \"engine_warps_per_block\": %d%s%s}\n",
              g_label.c_str(), placement.c_str(), measure.c_str(), shape.c_str(), value, unit, mhz, g_engine_warps,
              extra.empty() ? "" : ", ", extra.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "[%s] %-16s %-11s %-16s %12.3f %-8s (SM clock %.0f MHz)\n", g_label.c_str(), placement.c_str(),
               measure.c_str(), shape.c_str(), value, unit, mhz);
}
void emit_failure(const std::string& placement, const std::string& measure, const std::string& shape,
                  const std::string& why) {
  ++g_failures;
  std::string clean = why;
  std::replace(clean.begin(), clean.end(), '"', '\'');
  std::printf("{\"label\": \"%s\", \"placement\": \"%s\", \"measure\": \"%s\", \"shape\": \"%s\", \"error\": \"%s\"}\n",
              g_label.c_str(), placement.c_str(), measure.c_str(), shape.c_str(), clean.c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "[%s] %-16s %-11s %-16s FAILED: %s\n", g_label.c_str(), placement.c_str(), measure.c_str(),
               shape.c_str(), why.c_str());
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Shape {
  bool inl;
  uint32_t bytes;
  std::string name() const { return softnic::describe(softnic::CeilingShape{inl, bytes}); }
};

struct Placement {
  std::string name;
  int engine_device;
  int engine_blocks;
};

// Where a run is, on stderr at once (a run cut by its deadline still says where it stopped).
void progress(const std::string& placement, const std::string& what) {
  std::fprintf(stderr, "[%s] %s %s\n", g_label.c_str(), placement.c_str(), what.c_str());
  std::fflush(stderr);
}

// ---- mini-gda: message rate and one op ----------------------------------------------------------------
constexpr uint32_t kQps = 16, kBatch = 16;

struct Target {
  uint64_t dst, src;
  uint32_t rkey, lkey;
  uint32_t slot, slots;  // slot bytes; destination slots (wrapping)
};

__device__ __forceinline__ PutOp op_of(const Target& t, uint64_t slot, uint32_t bytes, bool inl, uint64_t value) {
  PutOp op{};
  op.raddr = t.dst + (slot % t.slots) * t.slot;
  op.rkey = t.rkey;
  op.laddr = t.src + (slot % 64) * t.slot;
  op.lkey = t.lkey;
  op.length = bytes;
  op.inline_data = inl;
  op.value = value;
  return op;
}

// One thread per QP, `ops` puts, a doorbell every kBatch, then quiet. Block 0 samples the clock.
__global__ void rate_kernel(Context ctx, Target t, uint32_t bytes, bool inl, uint32_t ops, ClockSample* clock) {
  const uint32_t q = blockIdx.x;
  const ClockSample c0 = clock_sample();
  ThreadQp tq(&ctx.qps[q]);
  for (uint32_t j = 0; j < ops; ++j) {
    const uint64_t slot = uint64_t(q) * 7919u + j;
    if (!tq.put<order::GpuFence>(ctx, op_of(t, slot, bytes, inl, slot), j % kBatch == kBatch - 1 || j + 1 == ops))
      return;
  }
  if (tq.quiet(ctx)) tq.flush();
  if (q == 0) {
    clock[0] = c0;
    clock[1] = clock_sample();
  }
}

// One op at a time on QP 0: put + quiet, timed in SM cycles; the payload's first 8 bytes change
// before every op (as the one-op experiments do), to `base` + the op's index (`base` makes a
// launch's values its own: the slots still hold earlier launches'). kSplit adds two stamps per op,
// in cycles after t0: `cycles[i]` when the put returned, `cycles[iters + i]` when the payload's
// first 8 bytes were at the destination (which this thread must be able to read: same GPU; -1 when
// they did not come within `timeout_ns`), and `cycles[2 * iters + i]` after quiet. Without it,
// `cycles[i]` is put + quiet.
template <bool kSplit>
__global__ void one_op_kernel(Context ctx, Target t, uint32_t bytes, bool inl, uint64_t base, int warmup, int iters,
                              uint64_t timeout_ns, long long* cycles, ClockSample* clock) {
  ThreadQp tq(&ctx.qps[0]);
  const ClockSample c0 = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    const uint64_t value = base + static_cast<uint64_t>(i + warmup);
    const PutOp op = op_of(t, static_cast<uint64_t>(i + warmup), bytes, inl, value);
    if (!inl || bytes > 8) *reinterpret_cast<volatile uint64_t*>(op.laddr) = value;
    const long long t0 = clock64();
    if (!tq.put<order::GpuFence>(ctx, op, true)) break;
    long long t1 = 0, t2 = 0;
    if constexpr (kSplit) {
      t1 = clock64();
      const uint64_t start = order::globaltimer_ns();
      bool landed = true;
      while (landed && order::ld_relaxed_sys_u64(reinterpret_cast<const uint64_t*>(op.raddr)) != value)
        landed = order::globaltimer_ns() - start <= timeout_ns;
      t2 = landed ? clock64() : t0 - 1;
    }
    if (!tq.quiet(ctx)) break;
    const long long t3 = clock64();
    if (i < 0) continue;
    if constexpr (kSplit) {
      cycles[i] = t1 - t0;
      cycles[iters + i] = t2 - t0;
      cycles[2 * iters + i] = t3 - t0;
    } else {
      cycles[i] = t3 - t0;
    }
  }
  tq.flush();
  clock[0] = c0;
  clock[1] = clock_sample();
}

// One warp moves `bytes` (a multiple of 16) from src to dst: 16 B per lane per load, cache-bypassing,
// eight loads of each lane in flight before its stores.
__device__ __forceinline__ void warp_move(const uint8_t* src, uint8_t* dst, uint32_t bytes, uint32_t lane) {
  for (uint32_t base = 0; base < bytes; base += 32 * 16 * 8) {
    uint4 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t off = base + (k * 32 + lane) * 16;
      v[k] = off < bytes ? __ldcv(reinterpret_cast<const uint4*>(src + off)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t off = base + (k * 32 + lane) * 16;
      if (off < bytes) *reinterpret_cast<uint4*>(dst + off) = v[k];
    }
  }
}

// The bare reference: one warp moves `bytes` (a multiple of 512) from src to dst, 16 B per lane per
// load, every load of a pass in flight before its stores, then a system-scope fence (the stores
// have landed, as the engine needs before it writes a CQE).
__global__ void warp_copy_kernel(const uint8_t* src, uint8_t* dst, uint32_t bytes, int warmup, int iters,
                                 long long* cycles, ClockSample* clock) {
  const uint32_t lane = threadIdx.x;
  const ClockSample c0 = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    __syncwarp();
    const long long t0 = clock64();
    warp_move(src, dst, bytes, lane);
    __threadfence_system();
    __syncwarp();
    const long long t1 = clock64();
    if (i >= 0 && lane == 0) cycles[i] = t1 - t0;
    spin_cycles(2000);
  }
  if (lane == 0) {
    clock[0] = c0;
    clock[1] = clock_sample();
  }
}

// The protocol's own chain, without the engine's logic: what any engine that serves a put through
// a doorbell, a WQE in memory and a CQE must wait for, one dependent step after another. A producer
// thread (block 0) writes a 32 B descriptor (sequence, length, source, destination), a GPU-scope
// fence, then a doorbell word (relaxed, system scope, as mini-gda rings); a consumer warp (block 1)
// polls the doorbell, loads the descriptor, moves the payload as warp_copy_kernel does (one 8 B load
// and store when it is smaller than a block), then releases the CQE word at system scope (as the
// engine publishes a CQE); the producer polls the CQE. Timed by the producer per op, as
// one_op_kernel times put + quiet; the same GPU's memory for everything, as softnic-gpu-same
// places its queues and doorbells. Every wait is bounded by `timeout_ns` (*failed set, the run
// stops).
struct ChainWords {
  uint4 desc[2];           // sequence, length, source, destination
  uint64_t pad0[12];
  uint64_t doorbell;       // its own 128 B line
  uint64_t pad1[15];
  uint64_t cqe;            // its own 128 B line
  uint64_t pad2[15];
  uint32_t failed;
};

__global__ void chain_kernel(ChainWords* w, const uint8_t* src, uint8_t* dst, uint32_t bytes, int warmup, int iters,
                             uint64_t timeout_ns, long long* cycles, ClockSample* clock, long long* landed) {
  const uint32_t lane = threadIdx.x;
  const int total = warmup + iters;
  if (blockIdx.x == 0) {  // the producer
    if (lane != 0) return;
    const ClockSample c0 = clock_sample();
    for (int i = 0; i < total && !w->failed; ++i) {
      const uint64_t seq = static_cast<uint64_t>(i) + 1;
      const uint64_t s = reinterpret_cast<uint64_t>(src), d = reinterpret_cast<uint64_t>(dst);
      *reinterpret_cast<volatile uint64_t*>(const_cast<uint8_t*>(src)) = seq;  // the payload changes
      const long long t0 = clock64();
      w->desc[0] = make_uint4(static_cast<uint32_t>(seq), bytes, static_cast<uint32_t>(s), static_cast<uint32_t>(s >> 32));
      w->desc[1] = make_uint4(static_cast<uint32_t>(d), static_cast<uint32_t>(d >> 32), 0, 0);
      __threadfence();
      order::st_relaxed_sys_u64(&w->doorbell, seq);
      const uint64_t start = order::globaltimer_ns();
      if (landed != nullptr) {  // the split: first the payload at the destination
        bool in = true;
        while (in && order::ld_relaxed_sys_u64(reinterpret_cast<const uint64_t*>(dst)) != seq)
          in = order::globaltimer_ns() - start <= timeout_ns;
        if (i >= warmup) landed[i - warmup] = in ? clock64() - t0 : -1;
      }
      while (order::ld_relaxed_sys_u64(&w->cqe) != seq) {
        if (order::globaltimer_ns() - start > timeout_ns) {
          atomicExch(&w->failed, 1u);
          break;
        }
      }
      const long long t1 = clock64();
      if (i >= warmup) cycles[i - warmup] = t1 - t0;
      spin_cycles(2000);
    }
    clock[0] = c0;
    clock[1] = clock_sample();
    return;
  }
  // the consumer warp
  for (int i = 0; i < total; ++i) {
    const uint64_t seq = static_cast<uint64_t>(i) + 1;
    uint64_t seen = 0;
    if (lane == 0) {
      const uint64_t start = order::globaltimer_ns();
      while ((seen = order::ld_relaxed_sys_u64(&w->doorbell)) != seq) {
        if (order::globaltimer_ns() - start > timeout_ns || *reinterpret_cast<volatile uint32_t*>(&w->failed)) {
          atomicExch(&w->failed, 1u);
          break;
        }
      }
    }
    seen = __shfl_sync(0xffffffffu, seen, 0);
    if (seen != seq) return;
    uint4 a = __ldcv(&w->desc[0]), b = __ldcv(&w->desc[1]);
    for (int r = 0; a.x != static_cast<uint32_t>(seq) && r < 64; ++r) {  // the doorbell overtook it: again
      a = __ldcv(&w->desc[0]);
      b = __ldcv(&w->desc[1]);
    }
    if (a.x != static_cast<uint32_t>(seq)) {
      if (lane == 0) atomicExch(&w->failed, 2u);
      return;
    }
    const uint32_t len = a.y;
    const uint8_t* from = reinterpret_cast<const uint8_t*>(static_cast<uint64_t>(a.z) | (static_cast<uint64_t>(a.w) << 32));
    uint8_t* to = reinterpret_cast<uint8_t*>(static_cast<uint64_t>(b.x) | (static_cast<uint64_t>(b.y) << 32));
    if (len < 16) {
      if (lane == 0) *reinterpret_cast<uint64_t*>(to) = __ldcv(reinterpret_cast<const unsigned long long*>(from));
    } else {
      warp_move(from, to, len, lane);
    }
    __syncwarp();
    if (lane == 0) order::st_release_sys_u64(&w->cqe, seq);
  }
}

struct DeviceMem {
  int dev;
  void* p = nullptr;
  DeviceMem(int d, size_t n) : dev(d) {
    CUDA_OR_THROW(cudaSetDevice(dev));
    CUDA_OR_THROW(cudaMalloc(&p, n));
  }
  ~DeviceMem() {
    cudaSetDevice(dev);
    cudaFree(p);
  }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
};

// A kernel beside a same-GPU engine that did not end in time: the engine was stopped (so the blocked
// launch or wait returned), and every later measure of the placement would time out too.
struct EngineStopped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs `launch` on `s`, waits (bounded by the kernels' own timeouts, and beside a same-GPU engine by
// an engine deadline: a launch that waits for the context to go idle would otherwise wait for the
// engine's watchdog), then fails on a kernel error or a mini-gda error report.
template <class Launch>
float timed_ms(Session& session, cudaStream_t s, const std::string& what, Launch launch) {
  // The kernels end within a few ms, or within one wait's timeout when a wait fails.
  const int bound_ms = 2 * static_cast<int>(session.config().timeout_ms) + 10000;
  cudaEvent_t a, b;
  CUDA_OR_THROW(cudaEventCreate(&a));
  CUDA_OR_THROW(cudaEventCreate(&b));
  bool fired = false;
  {
    const auto deadline = session.engine_deadline(bound_ms);
    CUDA_OR_THROW(cudaEventRecord(a, s));
    launch();
    CUDA_OR_THROW(cudaGetLastError());
    CUDA_OR_THROW(cudaEventRecord(b, s));
    CUDA_OR_THROW(cudaEventSynchronize(b));
    fired = deadline && deadline->fired();
  }
  if (fired)
    throw EngineStopped(what + ": the kernel did not end within " + std::to_string(bound_ms) +
                        " ms beside the engine on its GPU, so the engine was stopped; a launch that waits for the "
                        "context to go idle (a context-wide resource committed lazily) waits for the engine");
  float ms = 0;
  CUDA_OR_THROW(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  const std::string err = session.take_error();
  if (!err.empty()) throw std::runtime_error("mini-gda reported: " + err);
  return ms;
}

void check_rate_cqes(Session& session, uint32_t nbb) {
  const auto now = session.read_qps();
  for (uint32_t i = 0; i < kQps; ++i) {
    mlx5::Cqe64 cqe;
    CUDA_OR_THROW(cudaMemcpy(&cqe, now[i].cqe, sizeof cqe, cudaMemcpyDefault));
    const mlx5::CqeFields f = mlx5::decode_cqe(cqe);
    const uint16_t want = static_cast<uint16_t>(now[i].resv_head - nbb);
    if (f.opcode != mlx5::kCqeReq || f.wqe_counter != want || now[i].cons_head != now[i].resv_head)
      throw std::runtime_error("QP " + std::to_string(i) + ": last CQE opcode " + std::to_string(f.opcode) +
                               " counter " + std::to_string(f.wqe_counter) + " (expected " + std::to_string(want) +
                               "), quiet at " + std::to_string(now[i].cons_head) + " of " +
                               std::to_string(now[i].resv_head));
  }
}

uint32_t wqebbs(const Shape& s) {
  if (!s.inl || s.bytes == 8) return 1;
  return mlx5::wqebbs_of_ds(2 + mlx5::inline_seg_ds(s.bytes));
}

// A timed kernel's per-op cycles (`host->size()` of them) and its clock window, read back on
// `stream` after it ended (beside a same-GPU engine: the producer's stream, never a wait for the
// device): one line of `measure` in ns at the SM clock it ran at, `extra` appended to its fields.
void emit_cycles(const std::string& placement, const std::string& measure, const std::string& shape,
                 const long long* cycles, const ClockSample* clock, std::vector<long long>* host,
                 const std::string& extra, cudaStream_t stream = nullptr) {
  ClockSample clk[2];
  CUDA_OR_THROW(cudaMemcpyAsync(host->data(), cycles, sizeof(long long) * host->size(), cudaMemcpyDeviceToHost, stream));
  CUDA_OR_THROW(cudaMemcpyAsync(clk, clock, sizeof clk, cudaMemcpyDeviceToHost, stream));
  CUDA_OR_THROW(cudaStreamSynchronize(stream));
  const double mhz = sm_clock_mhz(clk[0], clk[1]);
  std::vector<double> c(host->begin(), host->end());
  const double p50 = median(c);
  emit(placement, measure, shape, p50 * 1e3 / mhz, "ns", mhz, "\"cycles_p50\": " + std::to_string(p50) + extra);
}

// A split's landing stamps (`host->size()` of them): every payload landed within the poll's timeout.
void require_landed(const long long* stamps, std::vector<long long>* host, cudaStream_t stream = nullptr) {
  CUDA_OR_THROW(cudaMemcpyAsync(host->data(), stamps, sizeof(long long) * host->size(), cudaMemcpyDeviceToHost, stream));
  CUDA_OR_THROW(cudaStreamSynchronize(stream));
  if (*std::min_element(host->begin(), host->end()) < 0)
    throw std::runtime_error("a payload never reached its destination within the poll's 2 s");
}

void run_gda(const Placement& pl, const std::vector<Shape>& rate_shapes, const std::vector<uint32_t>& one_op_sizes,
             bool quick) {
  const uint32_t max_bytes = 4096;
  const uint32_t slot = max_bytes, slots = 2048;
  DeviceMem dst(0, size_t(slot) * slots), src(0, size_t(slot) * 64);
  DeviceMem scratch(0, sizeof(long long) * 4 * 4096 + 4 * sizeof(ClockSample));
  DeviceMem copy_dst(0, max_bytes);
  CUDA_OR_THROW(cudaMemset(src.p, 0x5a, size_t(slot) * 64));
  auto* cycles = static_cast<long long*>(scratch.p);
  long long* split_cycles = cycles + 4096;  // three columns of up to 4096 for the split
  auto* clock = reinterpret_cast<ClockSample*>(cycles + 4 * 4096);
  const int iters = quick ? 500 : 2000, warmup = 200;
  std::vector<long long> host(iters);
  softnic::enable_peer_access(0, pl.engine_device);
  // The protocol chain (same GPU, no engine running), for every one-op size.
  if (pl.engine_device == 0) {
    DeviceMem words(0, sizeof(ChainWords));
    for (uint32_t bytes : one_op_sizes) {
      const std::string shape = "pointer " + std::to_string(bytes) + " B";
      try {
        CUDA_OR_THROW(cudaSetDevice(0));
        for (const bool split : {false, true}) {
          CUDA_OR_THROW(cudaMemset(words.p, 0, sizeof(ChainWords)));
          CUDA_OR_THROW(cudaMemset(copy_dst.p, 0, max_bytes));
          chain_kernel<<<2, 32>>>(static_cast<ChainWords*>(words.p), static_cast<const uint8_t*>(src.p),
                                  static_cast<uint8_t*>(copy_dst.p), bytes, warmup, iters, 2'000'000'000ull, cycles,
                                  clock, split ? split_cycles : nullptr);
          CUDA_OR_THROW(cudaGetLastError());
          CUDA_OR_THROW(cudaDeviceSynchronize());
          uint32_t failed = 0;
          CUDA_OR_THROW(cudaMemcpy(&failed, &static_cast<ChainWords*>(words.p)->failed, sizeof failed, cudaMemcpyDeviceToHost));
          if (failed) throw std::runtime_error(failed == 2 ? "the descriptor never matched its doorbell" : "a chain wait passed its 2 s timeout");
          if (!split) {
            emit_cycles(pl.name, "chain", shape, cycles, clock, &host, "");
          } else {
            require_landed(split_cycles, &host);
            emit_cycles(pl.name, "chain_landed", shape, split_cycles, clock, &host, "");
          }
        }
      } catch (const std::exception& e) {
        emit_failure(pl.name, "chain", shape, e.what());
      }
    }
  }
  // The bare warp copy first: on two GPUs the engine takes every SM of GPU 1 once it runs.
  for (uint32_t bytes : one_op_sizes) {
    if (bytes % 512 != 0) continue;
    const std::string shape = "pointer " + std::to_string(bytes) + " B";
    try {
      CUDA_OR_THROW(cudaSetDevice(pl.engine_device));
      warp_copy_kernel<<<1, 32>>>(static_cast<const uint8_t*>(src.p), static_cast<uint8_t*>(copy_dst.p), bytes, warmup,
                                  iters, cycles, clock);
      CUDA_OR_THROW(cudaGetLastError());
      CUDA_OR_THROW(cudaDeviceSynchronize());  // no engine runs yet
      emit_cycles(pl.name, "warp_copy", shape, cycles, clock, &host,
                  ", \"engine_device\": " + std::to_string(pl.engine_device));
    } catch (const std::exception& e) {
      emit_failure(pl.name, "warp_copy", shape, e.what());
    }
  }
  progress(pl.name, "opening the mini-gda session");
  SessionConfig sc;
  sc.engine = "softnic-gpu";
  sc.engine_device = pl.engine_device;
  sc.engine_blocks = pl.engine_blocks;
  sc.engine_warps_per_block = g_engine_warps;
  sc.num_qps = kQps;
  sc.sq_wqebbs = 1024;
  sc.timeout_ms = 5000;
  Session session(sc);
  Target t;
  {
    const auto d = session.register_mr(dst.p, size_t(slot) * slots, softnic::kAccessRemoteWrite);
    const auto s = session.register_mr(src.p, size_t(slot) * 64, 0);
    t.dst = d.addr;
    t.rkey = d.rkey;
    t.src = s.addr;
    t.lkey = s.lkey;
  }
  t.slot = slot;
  t.slots = slots;
  cudaStream_t s;
  CUDA_OR_THROW(cudaSetDevice(0));
  CUDA_OR_THROW(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  progress(pl.name, "session ready, starting the engine");
  session.start_engine();
  const Context ctx = session.context();
  for (const Shape& sh : rate_shapes) {
    try {
      const uint32_t ops = quick ? 4000 : 20000;
      CUDA_OR_THROW(cudaSetDevice(0));
      progress(pl.name, "msg_rate " + sh.name() + ": warm-up");
      timed_ms(session, s, "msg_rate " + sh.name() + " warm-up",
               [&] { rate_kernel<<<kQps, 1, 0, s>>>(ctx, t, sh.bytes, sh.inl, ops / 10, clock); });
      progress(pl.name, "msg_rate " + sh.name() + ": warm-up done");
      check_rate_cqes(session, wqebbs(sh));
      std::vector<double> rates, clocks;
      for (int r = 0; r < 3; ++r) {
        const float ms = timed_ms(session, s, "msg_rate " + sh.name(),
                                  [&] { rate_kernel<<<kQps, 1, 0, s>>>(ctx, t, sh.bytes, sh.inl, ops, clock); });
        check_rate_cqes(session, wqebbs(sh));
        ClockSample clk[2];
        CUDA_OR_THROW(cudaMemcpyAsync(clk, clock, sizeof clk, cudaMemcpyDeviceToHost, s));
        CUDA_OR_THROW(cudaStreamSynchronize(s));
        rates.push_back(double(ops) * kQps / (double(ms) * 1e3));
        clocks.push_back(sm_clock_mhz(clk[0], clk[1]));
      }
      emit(pl.name, "msg_rate", sh.name(), median(rates), "Mmsg/s", median(clocks),
           "\"qps\": 16, \"batch\": 16, \"runs\": 3");
    } catch (const EngineStopped&) {
      throw;
    } catch (const std::exception& e) {
      emit_failure(pl.name, "msg_rate", sh.name(), e.what());
    }
  }
  for (uint32_t bytes : one_op_sizes) {
    const std::string shape = "pointer " + std::to_string(bytes) + " B";
    try {
      CUDA_OR_THROW(cudaSetDevice(0));
      timed_ms(session, s, "completion " + shape, [&] {
        one_op_kernel<false><<<1, 1, 0, s>>>(ctx, t, bytes, false, 0x1000, warmup, iters, 0, cycles, clock);
      });
      // The last op's payload landed whole.
      std::vector<uint8_t> got(bytes), want(bytes);
      const uint64_t last = uint64_t(warmup + iters - 1);
      CUDA_OR_THROW(cudaMemcpyAsync(got.data(), static_cast<uint8_t*>(dst.p) + (last % slots) * slot, bytes,
                                    cudaMemcpyDeviceToHost, s));
      CUDA_OR_THROW(cudaMemcpyAsync(want.data(), static_cast<uint8_t*>(src.p) + (last % 64) * slot, bytes,
                                    cudaMemcpyDeviceToHost, s));
      CUDA_OR_THROW(cudaStreamSynchronize(s));
      if (got != want) throw std::runtime_error("the last op's destination does not hold its payload");
      emit_cycles(pl.name, "completion", shape, cycles, clock, &host, "", s);
    } catch (const EngineStopped&) {
      throw;
    } catch (const std::exception& e) {
      emit_failure(pl.name, "completion", shape, e.what());
    }
  }
  // Where put + completion's time goes: same GPU only (the producer reads the destination).
  for (uint32_t k = 0; pl.engine_device == 0 && k < one_op_sizes.size(); ++k) {
    const uint32_t bytes = one_op_sizes[k];
    const std::string shape = "pointer " + std::to_string(bytes) + " B";
    try {
      CUDA_OR_THROW(cudaSetDevice(0));
      const uint64_t base = uint64_t(k + 1) << 40;
      timed_ms(session, s, "split " + shape, [&] {
        one_op_kernel<true><<<1, 1, 0, s>>>(ctx, t, bytes, false, base, warmup, iters, 2'000'000'000ull, split_cycles,
                                             clock);
      });
      const char* names[3] = {"split_posted", "split_landed", "split_done"};
      require_landed(split_cycles + iters, &host, s);
      for (int c = 0; c < 3; ++c) emit_cycles(pl.name, names[c], shape, split_cycles + c * iters, clock, &host, "", s);
    } catch (const EngineStopped&) {
      throw;
    } catch (const std::exception& e) {
      emit_failure(pl.name, "split", shape, e.what());
    }
  }
  progress(pl.name, "stopping the engine");
  session.stop_engine();
  CUDA_OR_THROW(cudaStreamDestroy(s));
}

// The ceiling of each shape at `qps` QPs; measure "ceiling" at the rate kernels' 16 QPs, else
// "ceiling@<qps>" (the one-WQEBB shapes at the QP counts of the archived engine ceilings).
void run_ceilings(const Placement& pl, const std::vector<Shape>& shapes, uint32_t qps, bool quick) {
  const std::string measure = qps == kQps ? "ceiling" : "ceiling@" + std::to_string(qps);
  for (const Shape& sh : shapes) {
    softnic::CeilingConfig c;
    c.shape = softnic::CeilingShape{sh.inl, sh.bytes};
    c.qps = qps;
    const uint32_t nbb = wqebbs(sh);
    // About 64 MiB of payload per round at most; at least 16 WQEs per QP.
    const uint64_t by_bytes = (uint64_t(64) << 20) / (uint64_t(qps) * sh.bytes);
    const uint32_t most = std::min<uint32_t>(qps > kQps ? 2048 : 4096, 32768 / nbb);
    c.depth = static_cast<uint32_t>(std::clamp<uint64_t>(by_bytes, 16, most));
    if (quick) c.depth = std::max<uint32_t>(16, c.depth / 4);
    c.rounds = 3;
    c.producer_device = 0;
    c.engine_device = pl.engine_device;
    c.engine_blocks = pl.engine_blocks;
    c.engine_warps_per_block = g_engine_warps;
    c.timeout_ms = 10000;
    try {
      const softnic::CeilingResult r = softnic::measure_gpu_engine_ceiling(c);
      emit(pl.name, measure, sh.name(), median(r.wqe_rate_mps), "MWQE/s", r.sm_clock_mhz,
           "\"qps\": " + std::to_string(qps) + ", \"depth\": " + std::to_string(c.depth) + ", \"goodput_gbps\": " +
               std::to_string(median(r.goodput_gbps)) + ", \"wqebbs\": " + std::to_string(r.wqebbs_per_wqe));
    } catch (const std::exception& e) {
      emit_failure(pl.name, measure, sh.name(), e.what());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string only;  // --placement: run this placement alone
  const char* usage =
      "usage: %s --label NAME [--quick] [--engine-warps 1..32] [--placement softnic-gpu-same|softnic-gpu]";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--label" && i + 1 < argc) {
      g_label = argv[++i];
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--placement" && i + 1 < argc) {
      only = argv[++i];
      if (only != "softnic-gpu-same" && only != "softnic-gpu") {
        std::fprintf(stderr, usage, argv[0]);
        std::fprintf(stderr, ": --placement '%s' (allowed: softnic-gpu-same, softnic-gpu)\n", only.c_str());
        return 2;
      }
    } else if (a == "--engine-warps" && i + 1 < argc) {
      const std::string v = argv[++i];
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 32) {
        std::fprintf(stderr, usage, argv[0]);
        std::fprintf(stderr, ": --engine-warps '%s' (allowed: 1..32 warps per block)\n", v.c_str());
        return 2;
      }
      g_engine_warps = static_cast<int>(n);
    } else {
      std::fprintf(stderr, usage, argv[0]);
      std::fprintf(stderr, "; unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (g_label.empty()) {
    std::fprintf(stderr, usage, argv[0]);
    std::fprintf(stderr, ": --label is required\n");
    return 2;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("SKIP: no GPU visible\n");
    return 77;
  }
  std::vector<Placement> placements;
  if (only != "softnic-gpu") placements.push_back({"softnic-gpu-same", 0, 16});
  if (only != "softnic-gpu-same") {
    if (ndev >= 2 && softnic::try_enable_peer_access(0, 1)) {
      placements.push_back({"softnic-gpu", 1, 0});
    } else if (!only.empty()) {
      std::printf("SKIP: --placement softnic-gpu needs two GPUs that see each other; %d visible\n", ndev);
      return 77;
    }
  }
  const std::vector<Shape> ceiling_shapes = {{true, 8},     {true, 32},     {true, 64},    {true, 128},
                                             {true, 220},   {false, 8},     {false, 64},   {false, 92},
                                             {false, 220},  {false, 256},   {false, 1024}, {false, 4096},
                                             {false, 16384}, {false, 65536}};
  const std::vector<Shape> rate_shapes = {{true, 8},  {true, 32},  {true, 64},   {true, 128},
                                          {true, 220}, {false, 8}, {false, 256}, {false, 4096}};
  const std::vector<uint32_t> one_op_sizes = {8, 512, 4096};
  for (const Placement& pl : placements) {
    try {
      run_ceilings(pl, ceiling_shapes, kQps, quick);
      for (uint32_t qps : {64u, 528u}) run_ceilings(pl, {{true, 8}, {false, 8}}, qps, quick);
      run_gda(pl, rate_shapes, one_op_sizes, quick);
    } catch (const std::exception& e) {
      emit_failure(pl.name, "setup", "-", e.what());
    }
  }
  return g_failures ? 1 : 0;
}
