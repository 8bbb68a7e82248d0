// softnic gpu engine (see gicomm/softnic/gpu_engine.h).
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gicomm/mlx5/doorbell.h"
#include "gicomm/order.cuh"
#include "gicomm/softnic/core.h"
#include "gicomm/softnic/gpu_engine.h"

namespace gicomm::softnic {

using namespace gicomm::mlx5;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("gpu engine: ") + what + ": " + cudaGetErrorString(e));
}

__device__ __forceinline__ uint4 load_cv(const uint8_t* p) { return __ldcv(reinterpret_cast<const uint4*>(p)); }

// Payload source words. A pointer payload lives in another GPU's (or host) memory that its producer
// rewrites between operations: every load bypasses the caches (a cached line would be stale; a
// plain byte loop once returned old bytes for lengths not a multiple of 8), and reads whole aligned
// 8-byte words (one NVLink round trip each, not one per byte; an aligned word never crosses a page,
// so it stays in mapped memory). An inline payload is the engine's own copy of the WQE (local
// memory, where ld.global.cv is not allowed at all); its data sits at 4 mod 8 after the segment's
// byte count.
__device__ __forceinline__ unsigned long long load_src_u64(const uint8_t* p, bool global) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (!global) {
    if ((a & 7) == 0) return *reinterpret_cast<const unsigned long long*>(p);
    unsigned long long v;
    memcpy(&v, p, 8);
    return v;
  }
  const unsigned long long* w = reinterpret_cast<const unsigned long long*>(a & ~uintptr_t(7));
  const unsigned shift = 8 * (a & 7);
  const unsigned long long lo = __ldcv(w);
  return shift == 0 ? lo : (lo >> shift) | (__ldcv(w + 1) << (64 - shift));
}

struct GpuMem {
  __device__ void copy(void* dst, const void* src, uint32_t n) {
    uint8_t* d = static_cast<uint8_t*>(dst);
    const uint8_t* s = static_cast<const uint8_t*>(src);
    const bool global = __isGlobal(s) != 0;
    uint32_t i = 0;
    // Whole 8-byte stores wherever the destination is aligned: the payload write crosses NVLink,
    // and byte stores would cost one transaction each.
    if ((reinterpret_cast<uintptr_t>(d) & 7) == 0) {
      if (global) {
        // Four loads in flight before their stores: a pointer payload costs a round trip per
        // four words, not per word.
        for (; i + 32 <= n; i += 32) {
          unsigned long long w[4];
#pragma unroll
          for (int k = 0; k < 4; ++k) w[k] = load_src_u64(s + i + 8 * k, true);
#pragma unroll
          for (int k = 0; k < 4; ++k) *reinterpret_cast<unsigned long long*>(d + i + 8 * k) = w[k];
        }
      }
      for (; i + 8 <= n; i += 8) *reinterpret_cast<unsigned long long*>(d + i) = load_src_u64(s + i, global);
    }
    if (!global) {
      for (; i < n; ++i) d[i] = s[i];
      return;
    }
    while (i < n) {  // the tail (or an unaligned destination): one load per source word
      const uintptr_t a = reinterpret_cast<uintptr_t>(s) + i;
      const unsigned long long w = __ldcv(reinterpret_cast<const unsigned long long*>(a & ~uintptr_t(7)));
      for (uint32_t k = a & 7; k < 8 && i < n; ++k, ++i) d[i] = static_cast<uint8_t>(w >> (8 * k));
    }
  }
  __device__ uint64_t fetch_add(uint64_t* p, uint64_t add) {
    return atomicAdd_system(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(add));
  }
  __device__ void read_wqebb(Seg16* dst, const uint8_t* src) {
    for (int i = 0; i < 4; ++i) {
      const uint4 v = load_cv(src + 16 * i);
      dst[i] = Seg16{{v.x, v.y, v.z, v.w}};
    }
  }
  __device__ void acquire() { order::fence_acq_rel_sys(); }
  __device__ void publish_cqe(Cqe64* dst, const Cqe64& body, uint32_t tail) {
    for (int i = 0; i < 15; ++i) dst->w[i] = body.w[i];
    // The release store orders the body, and everything this lane has observed (the chunk's payload
    // writes, through the warp barrier before it), before the owner/counter word.
    order::st_release_sys_u32(&dst->w[15], tail);
  }
};

struct KernelArgs {
  QpState* qps;
  uint32_t num_qps;
  Tables tables;
  volatile int* flags;  // pinned: [0] stop (host sets), [1] watchdog fired (kernel sets)
  volatile int* stop_relay;  // device memory: warp 0 copies the host's stop flag here, so only
                             // one warp reads host memory over PCIe (hundreds of warps polling
                             // pinned memory made every system-scope operation of the engine slow)
  Counters* counters;   // one per warp
  unsigned long long budget_ns;  // watchdog: each warp ends this long after it started
};

// One chunk of the QP's doorbell window, processed by the whole warp. Returns WQEs executed.
__device__ uint32_t service_chunk(QpState& q, const Tables& tables, uint16_t db_index, Counters& ctr) {
  const int lane = threadIdx.x & 31;
  GpuMem mem;
  const uint32_t ci = q.ci;
  const uint32_t avail = static_cast<uint16_t>(db_index - static_cast<uint16_t>(ci)) + 1u;
  const uint32_t chunk = avail < 32 ? avail : 32;
  WqeImage img;
  bool ok = false;
  ExecResult r;
  if (!q.error && lane < static_cast<int>(chunk)) {
    mem.read_wqebb(&img.seg[0], wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, ci + lane));
    const CtrlFields c = decode_ctrl(img.seg[0]);
    ok = c.wqe_index == static_cast<uint16_t>(ci + lane) && c.qpn == q.sq.qpn && c.ds >= 1 && c.ds <= 4;
    if (ok) {
      r = execute_wqe<false>(tables, img, q.dc != 0, mem);
      ok = r.syndrome == 0;
    }
  }
  const unsigned good = __ballot_sync(0xffffffffu, ok);
  const uint32_t prefix = (~good == 0u) ? 32u : static_cast<uint32_t>(__ffs(~good) - 1);
  if (prefix == 0) {
    // Irregular WQE at the head: the serial path (retries, multi-WQEBB, errors, flushes).
    if (lane == 0) service_one_wqe(q, tables, mem, ctr);
    __syncwarp();
    return 1;
  }
  const bool mine = lane < static_cast<int>(prefix);
  if (mine) r = execute_wqe<true>(tables, img, q.dc != 0, mem);
  // Payload before any CQE of the chunk: the warp barrier orders the lanes' writes before the
  // CQE writer's system-scope release store (cumulativity), without a fence per lane.
  __syncwarp();
  const unsigned signaled = __ballot_sync(0xffffffffu, mine && r.signaled);
  const uint32_t nsig = __popc(signaled);
  if (nsig != 0) {
    if (q.cq.collapsed) {
      // A collapsed CQ keeps only the newest CQE: write the last signaled one.
      const int last = 31 - __clz(signaled);
      if (lane == last) {
        QpState local = q;
        local.cq_pi = q.cq_pi + nsig - 1;
        Counters dummy;
        complete_wqe(local, static_cast<uint16_t>(ci + lane), r, mem, dummy);
      }
    } else if (mine && r.signaled) {
      QpState local = q;
      local.cq_pi = q.cq_pi + __popc(signaled & ((1u << lane) - 1));
      Counters dummy;
      complete_wqe(local, static_cast<uint16_t>(ci + lane), r, mem, dummy);
    }
  }
  // Counters: lane 0 collects the chunk totals.
  unsigned long long bytes = mine ? r.byte_cnt : 0;
  for (int off = 16; off > 0; off >>= 1) bytes += __shfl_down_sync(0xffffffffu, bytes, off);
  __syncwarp();
  if (lane == 0) {
    q.ci = ci + prefix;
    q.cq_pi += nsig;
    ctr.wqes += prefix;
    ctr.cqes += nsig;
    ctr.bytes += bytes;
  }
  __syncwarp();
  return prefix;
}

__global__ void engine_kernel(KernelArgs a) {
  const int lane = threadIdx.x & 31;
  const uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const uint32_t nwarps = (gridDim.x * blockDim.x) >> 5;
  Counters ctr;
  const unsigned long long started = order::globaltimer_ns();
  uint32_t idle = 0;
  for (uint32_t iter = 0;; ++iter) {
    int stop = 0;
    if ((iter & 255) == 0 && lane == 0) {
      if (warp == 0 && a.flags[0] != 0) *a.stop_relay = 1;
      if (*a.stop_relay != 0) stop = 1;
      if (order::globaltimer_ns() - started > a.budget_ns) {
        a.flags[1] = 1;
        stop = 1;
      }
    }
    if (__shfl_sync(0xffffffffu, stop, 0)) break;
    bool worked = false;
    for (uint32_t qi = warp; qi < a.num_qps; qi += nwarps) {
      QpState& q = a.qps[qi];
      const uint64_t db = order::ld_relaxed_sys_u64(q.sq.doorbell);
      if (db == q.last_doorbell) continue;
      worked = true;
      __syncwarp();
      if (lane == 0) q.last_doorbell = db;
      __syncwarp();
      if (doorbell_qpn(db) != q.sq.qpn) continue;
      const uint16_t db_index = doorbell_wqe_index(db);
      // Drain everything up to the doorbell's WQE before moving to the next QP.
      for (uint32_t guard = 0; idx16_at_or_after(db_index, static_cast<uint16_t>(
                                                               *reinterpret_cast<volatile uint32_t*>(&q.ci)));
           ++guard) {
        service_chunk(q, a.tables, db_index, ctr);
        if (guard > 70000) break;  // cannot happen for a valid window (<= 65536 WQEBBs); never spin forever
      }
    }
    // Warps with nothing to do back off briefly so they do not steal issue slots from busy warps
    // on the same SM (a few hundred ns at most added to the first doorbell after a quiet spell).
    if (worked) {
      idle = 0;
    } else if (++idle > 64) {
      __nanosleep(a.num_qps > warp ? 32 : 1000);
    }
  }
  if (lane == 0) a.counters[warp] = ctr;
}

}  // namespace

GpuEngine::GpuEngine(SoftNic& nic, const GpuEngineConfig& cfg) : nic_(nic), cfg_(cfg) {}

GpuEngine::~GpuEngine() {
  if (running_) {
    try {
      stop();
    } catch (...) {
    }
  }
  int saved = 0;
  cudaGetDevice(&saved);
  cudaSetDevice(cfg_.device);
  cudaFree(d_qps_);
  cudaFree(d_mrs_);
  cudaFree(d_dcts_);
  cudaFree(d_counters_);
  if (h_flags_) cudaFreeHost(h_flags_);
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  cudaSetDevice(saved);
}

void GpuEngine::start() {
  if (running_) return;
  int saved = 0;
  check(cudaGetDevice(&saved), "cudaGetDevice");
  check(cudaSetDevice(cfg_.device), "cudaSetDevice(engine)");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, cfg_.device), "cudaGetDeviceProperties");
  const int blocks = cfg_.blocks > 0 ? cfg_.blocks : prop.multiProcessorCount;
  total_warps_ = blocks * cfg_.warps_per_block;
  num_qps_ = nic_.num_qps();
  const Tables host_tables = nic_.tables_snapshot();
  std::vector<QpState> states(num_qps_);
  for (uint32_t i = 0; i < num_qps_; ++i) states[i] = *nic_.qp_state(i);
  if (!d_qps_) {
    check(cudaMalloc(&d_qps_, sizeof(QpState) * SoftNic::kMaxQps), "cudaMalloc(qps)");
    check(cudaMalloc(&d_mrs_, sizeof(MrEntry) * SoftNic::kMaxMrs), "cudaMalloc(mrs)");
    check(cudaMalloc(&d_dcts_, sizeof(DctEntry) * SoftNic::kMaxQps), "cudaMalloc(dcts)");
    check(cudaHostAlloc(reinterpret_cast<void**>(&h_flags_), 64, cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc(flags)");
    cudaStream_t s;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    stream_ = s;
  }
  cudaFree(d_counters_);
  // Counters of every warp, then the stop relay word.
  check(cudaMalloc(&d_counters_, sizeof(Counters) * total_warps_ + 64), "cudaMalloc(counters)");
  check(cudaMemset(static_cast<char*>(d_counters_) + sizeof(Counters) * total_warps_, 0, 64), "cudaMemset(relay)");
  check(cudaMemset(d_counters_, 0, sizeof(Counters) * total_warps_), "cudaMemset(counters)");
  if (num_qps_) check(cudaMemcpy(d_qps_, states.data(), sizeof(QpState) * num_qps_, cudaMemcpyHostToDevice), "copy qps");
  if (host_tables.num_mrs)
    check(cudaMemcpy(d_mrs_, host_tables.mrs, sizeof(MrEntry) * host_tables.num_mrs, cudaMemcpyHostToDevice), "copy mrs");
  if (host_tables.num_dcts)
    check(cudaMemcpy(d_dcts_, host_tables.dcts, sizeof(DctEntry) * host_tables.num_dcts, cudaMemcpyHostToDevice),
          "copy dcts");
  h_flags_[0] = 0;
  h_flags_[1] = 0;
  KernelArgs a;
  a.qps = static_cast<QpState*>(d_qps_);
  a.num_qps = num_qps_;
  a.tables.mrs = static_cast<const MrEntry*>(d_mrs_);
  a.tables.num_mrs = host_tables.num_mrs;
  a.tables.dcts = static_cast<const DctEntry*>(d_dcts_);
  a.tables.num_dcts = host_tables.num_dcts;
  int* d_flags = nullptr;
  check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d_flags), h_flags_, 0), "cudaHostGetDevicePointer");
  a.flags = d_flags;
  a.counters = static_cast<Counters*>(d_counters_);
  a.stop_relay = reinterpret_cast<volatile int*>(static_cast<char*>(d_counters_) + sizeof(Counters) * total_warps_);
  a.budget_ns = static_cast<unsigned long long>(cfg_.max_runtime_ms) * 1000000ull;
  engine_kernel<<<blocks, 32 * cfg_.warps_per_block, 0, static_cast<cudaStream_t>(stream_)>>>(a);
  check(cudaGetLastError(), "launch engine kernel");
  running_ = true;
  cudaSetDevice(saved);
}

void GpuEngine::stop(int timeout_ms) {
  if (!running_) return;
  __atomic_store_n(&h_flags_[0], 1, __ATOMIC_RELEASE);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  cudaError_t e;
  while ((e = cudaStreamQuery(static_cast<cudaStream_t>(stream_))) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("gpu engine: kernel did not stop within " + std::to_string(timeout_ms) + " ms");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  running_ = false;
  check(e, "engine kernel");
  int saved = 0;
  check(cudaGetDevice(&saved), "cudaGetDevice");
  check(cudaSetDevice(cfg_.device), "cudaSetDevice(engine)");
  std::vector<Counters> per(total_warps_);
  check(cudaMemcpy(per.data(), d_counters_, sizeof(Counters) * total_warps_, cudaMemcpyDeviceToHost), "counters");
  std::vector<QpState> states(num_qps_);
  if (num_qps_) check(cudaMemcpy(states.data(), d_qps_, sizeof(QpState) * num_qps_, cudaMemcpyDeviceToHost), "qps");
  cudaSetDevice(saved);
  for (uint32_t i = 0; i < num_qps_; ++i) *nic_.qp_state(i) = states[i];
  Counters sum;
  for (const auto& c : per) sum += c;
  last_counters_ = sum;
  if (h_flags_[1]) throw std::runtime_error("gpu engine: watchdog deadline reached before stop()");
}

}  // namespace gicomm::softnic
