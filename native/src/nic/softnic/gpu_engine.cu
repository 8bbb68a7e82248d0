// softnic gpu engine (see gicomm/softnic/gpu_engine.h).
#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gicomm/mlx5/doorbell.h"
#include "gicomm/order.cuh"
#include "gicomm/softnic/core.h"
#include "gicomm/softnic/gpu_engine.h"
#include "gicomm/softnic/warp_plan.h"

namespace gicomm::softnic {

using namespace gicomm::mlx5;

namespace {

// CUDA loads modules lazily by default, and loading a kernel can need the context to be idle: a
// kernel first launched while the persistent engine runs in the same context (the engine on
// reserved SMs of the producer's GPU) then waits for the engine to end, i.e. for its watchdog.
// Every process that links the engine loads its modules at start-up instead, unless the user chose
// a loading mode explicitly (start() refuses LAZY for a same-GPU engine, naming the variable).
const bool eager_module_loading = [] {
  setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0);
  return true;
}();

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("gpu engine: ") + what + ": " + cudaGetErrorString(e));
}

// ---- an engine on the producer's GPU ---------------------------------------------------------------
// The engine is a persistent kernel in the producer's context, and the driver commits some
// context-wide resources lazily, at the first launch that needs them, and only with the context
// idle: such a launch beside the engine waits for every kernel of the context, the engine included,
// i.e. for its watchdog (minutes). The cases:
//   - module loading (CUDA_MODULE_LOADING=LAZY): eager loading above;
//   - the printf FIFO, committed at the first launch of a kernel that calls printf (why
//     cudaLimitPrintfFifoSize may only be set before one). Every mini-gda kernel calls it (its error
//     report); the softnic's own kernels do not, so in a process whose first printf kernel is a
//     mini-gda one launched beside the engine, that launch waited for the engine's watchdog;
//   - the device heap (a kernel calling malloc/free), likewise;
//   - local memory, grown when a kernel needs more per thread than is backed. The engine's own
//     frame (a few hundred bytes) is backed when it launches; kReservedStackBytes covers larger
//     producer frames.
// So before the first engine of this process starts on a GPU, the stack limit is raised (the driver
// resizes local memory at once) and one launch of a kernel that calls printf and malloc (never
// executed: its argument says so) commits the FIFO and the heap.
constexpr size_t kReservedStackBytes = 4096;
constexpr uint32_t kNever = 0x6e657672u;  // a kernel argument no launch passes

__global__ void commit_context_resources_kernel(unsigned long long* sink, uint32_t never) {
  if (never != kNever) return;
  void* p = malloc(64);
  printf("gpu engine: never printed (%p)\n", p);
  *sink = reinterpret_cast<uintptr_t>(p);
  free(p);
}

// The probe of a same-GPU engine: a kernel first launched beside it, as a producer's is, with what
// mini-gda's kernels have (a printf call, a stack frame). It must run while the engine runs.
__device__ __noinline__ uint32_t probe_frame(uint32_t seed) {
  uint32_t a[16];
  for (uint32_t i = 0; i < 16; ++i) a[i] = seed * (i + 1);
  return a[seed & 15];
}
__global__ void co_resident_probe_kernel(uint32_t* out, uint32_t seed) {
  const uint32_t v = probe_frame(seed);
  if (seed == kNever) printf("gpu engine: never printed (%u)\n", v);
  *out = v;
}

// Engines of this process running on each GPU, and the GPUs whose context was prepared and probed.
constexpr int kMaxDevices = 64;
std::mutex g_devices_mu;
int g_running[kMaxDevices] = {};
bool g_probed[kMaxDevices] = {};

// With no engine of this process on the device (a device-wide wait would wait for it).
void prepare_same_gpu_context() {
  size_t stack = 0;
  check(cudaDeviceGetLimit(&stack, cudaLimitStackSize), "cudaDeviceGetLimit(stack)");
  if (stack < kReservedStackBytes)
    check(cudaDeviceSetLimit(cudaLimitStackSize, kReservedStackBytes), "cudaDeviceSetLimit(stack)");
  commit_context_resources_kernel<<<1, 1>>>(nullptr, 0u);
  check(cudaGetLastError(), "launch the context-resources kernel");
  check(cudaDeviceSynchronize(), "context-resources kernel");
}

// ---- where a pass's time goes (a profiling build: -DGICOMM_ENGINE_PHASES=ON) -------------------------
// Lane 0 of each warp reads the SM's cycle counter at the boundaries of a pass's steps and adds each
// step's cycles to its warp's row; stop() prints the busy warps' cycles per pass, all warps
// together. A step's time is where the warp waited in it: a load's latency shows where its
// value is first used. Off by default (the marks are empty); on, each mark costs about 110 cycles
// (a clock read, and a fire-and-forget global add by lane 0).
enum Phase : uint32_t {
  kPhWindow, kPhDecode, kPhExecute, kPhEffects, kPhPrefetch, kPhCqe, kPhTail,  // inside a pass
  kPhBetween,   // between two passes of one drain (the drain's loop)
  kPhDoorbell,  // the doorbell seen to the drain's first pass
  kPhPasses, kPhDrains, kPhCount
};
// Both builds compile the marks (so the profiling build cannot rot); the plain one discards them.
#ifdef GICOMM_ENGINE_PHASES
constexpr bool kEnginePhases = true;
#else
constexpr bool kEnginePhases = false;
#endif
constexpr uint32_t kPhaseWarps = kEnginePhases ? 4096 : 1;
__device__ unsigned long long g_phase_cycles[kPhaseWarps][kPhCount];
struct PhaseClock {
  unsigned long long t = 0;
  uint32_t row = kPhaseWarps;  // none: not lane 0, or a warp past the table
  __device__ PhaseClock() {
    if constexpr (kEnginePhases) {
      const uint32_t warp = (threadIdx.x >> 5) * gridDim.x + blockIdx.x;
      if ((threadIdx.x & 31) == 0 && warp < kPhaseWarps) row = warp;
      t = clock64();
    }
  }
  __device__ void mark(Phase k) {
    if constexpr (kEnginePhases) {
      if (row == kPhaseWarps) return;
      const unsigned long long n = clock64();
      atomicAdd(&g_phase_cycles[row][k], n - t);
      t = n;
    }
  }
  __device__ void count(Phase k) {
    if constexpr (kEnginePhases) {
      if (row != kPhaseWarps) atomicAdd(&g_phase_cycles[row][k], 1ull);
    }
  }
  __device__ void restart() {
    if constexpr (kEnginePhases) t = clock64();
  }
};

__device__ __forceinline__ uint4 load_cv(const uint8_t* p) { return __ldcv(reinterpret_cast<const uint4*>(p)); }

// Payload source words of the serial path (one lane). A pointer payload lives in another GPU's (or
// host) memory that its producer rewrites between operations: every load bypasses the caches (a
// cached line would be stale), and reads whole aligned 8-byte words (an aligned word never crosses
// a page, so it stays in mapped memory). An inline payload is the serial path's own copy of the WQE
// (local memory, where ld.global.cv is not allowed at all); its data sits at 4 mod 8 after the
// segment's byte count.
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

// Memory of the serial path (service_one_wqe on lane 0: stale retries, errors, flushes).
struct GpuMem {
  __device__ void copy(void* dst, const void* src, uint32_t n) {
    uint8_t* d = static_cast<uint8_t*>(dst);
    const uint8_t* s = static_cast<const uint8_t*>(src);
    const bool global = __isGlobal(s) != 0;
    uint32_t i = 0;
    // Whole 8-byte stores wherever the destination is aligned: byte stores across NVLink would
    // cost one transaction each.
    if ((reinterpret_cast<uintptr_t>(d) & 7) == 0) {
      if (global) {
        // Four loads in flight before their stores.
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
  __device__ void fetch_add(uint64_t* p, uint64_t add, void* old) {
    const unsigned long long v =
        atomicAdd_system(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(add));
    copy(old, &v, 8);
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
    // The release store orders the body, and everything this lane has observed (the pass's payload
    // writes by every lane, through the warp barrier before it), before the owner/counter word.
    order::st_release_sys_u32(&dst->w[15], tail);
  }
};

constexpr unsigned kFullWarp = 0xffffffffu;

// complete_wqe's memory in a pass: stores a CQE's body and keeps its tail (wqe_counter, owner),
// which the lane publishes after the warp barrier that follows every payload (service_chunk, 5.).
struct CqeBodyFirst {
  Cqe64* dst = nullptr;
  uint32_t tail = 0;
  __device__ void publish_cqe(Cqe64* d, const Cqe64& body, uint32_t t) {
    for (int i = 0; i < 15; ++i) d->w[i] = body.w[i];
    dst = d;
    tail = t;
  }
};

// Shared memory of one engine warp.
struct WarpScratch {
  // The pass's WQEBBs: the WQE images execute_wqe checks, and the source of inline payloads. The
  // tail keeps a whole WqeImage at the last lane inside the array.
  Seg16 window[kWindowSegs];
  CopyDesc copies[kWarpLanes];      // an epoch's copies and their block prefix (shared copies)
  uint32_t inclusive[kWarpLanes];
  QpState qp;  // the state of the QP the warp serves (see engine_kernel)
};
constexpr size_t kScratchBytes = sizeof(WarpScratch);

// Memory of the warp's shared copies (warp_plan.h's Io).
struct WarpCopyIo {
  __device__ Bytes16 load16(uint64_t chunk, bool global) {
    // A pointer payload: bypass the caches (see load_src_u64). An inline one: the shared window.
    const uint4 v = global ? __ldcv(reinterpret_cast<const uint4*>(chunk)) : *reinterpret_cast<const uint4*>(chunk);
    return Bytes16{{v.x, v.y, v.z, v.w}};
  }
  __device__ void store16(uint64_t a, const Bytes16& v) {
    *reinterpret_cast<uint4*>(a) = make_uint4(v.w[0], v.w[1], v.w[2], v.w[3]);
  }
  __device__ void store(uint64_t a, uint64_t v, uint32_t size) {
    switch (size) {
      case 8: *reinterpret_cast<unsigned long long*>(a) = v; break;
      case 4: *reinterpret_cast<uint32_t*>(a) = static_cast<uint32_t>(v); break;
      case 2: *reinterpret_cast<uint16_t*>(a) = static_cast<uint16_t>(v); break;
      default: *reinterpret_cast<uint8_t*>(a) = static_cast<uint8_t>(v); break;
    }
  }
};

// ---- the block's help with its QP's copies -----------------------------------------------------------
// One warp's bytes in flight bound its QP's copy rate (a round of aligned copies is 8 KiB, one
// memory round trip). When a block's warp 0 serves one QP and its other warps serve none (at most
// one QP per block: 16 QPs on the 16 SMs of a same-GPU engine), those warps help it: they wait at a
// named barrier (no issue slots taken from the QP's warp) until warp 0 posts an epoch of aligned
// copies longer than one round, then every warp of the block moves its share of the rounds, and a
// second barrier returns the epoch to warp 0. The barriers order the helpers' payload stores before
// warp 0's CQE release, as the warp barrier does for its own lanes (service_chunk, 5.).
struct BlockCopyJob {
  const CopyDesc* descs;  // warp 0's ws.copies, or a BlockShared::copies buffer
  uint32_t nb, total;     // as aligned_round takes them
  uint32_t stop;          // warp 0 ends: the helpers return
  uint32_t owner_copies;  // warp 0 moves its share too (else the helpers move every round)
  // Not copies but a block pass (warp_plan.h: more than one window rung on a helped block's QP):
  // where it starts, what was rung, how many sub-windows the warps check (0: a copy job). A helper
  // reads them when the job is posted: warp 0 may post the next job as soon as the pass is planned.
  uint32_t window_ci = 0, window_avail = 0, window_subs = 0;
  uint32_t grid_blocks = 0;  // helper blocks that move rounds of this copy job too (GridQueue)
  uint32_t grid_slot = 0;    // the GridQueue slot of those rounds
};

// A block's epochs of aligned copies shared with its helper blocks (warp_plan.h, grid_role): in
// global memory, one queue per block, written by the owner block's warp 0 and read by its helpers.
// The owner writes job n into slot n % 2 and then `seq` = n (release); each helper block's warp 0
// sees it (acquire), its warps move their rounds, and warp 0 adds 1 to the slot's `done` with a
// system-scope release, cumulative over its block's stores (the barrier before it); the owner
// block's last warp waits for `done` to count every helper before the job's done barrier, so the
// CQEs' release comes after every helper's payload stores. Two slots: a deferred pass's job is
// posted before the previous one is awaited (EngineBlock::post_ready), so the helpers go from one
// to the next without waiting for the owner; job n + 2 is posted only after job n was awaited.
struct GridSlot {
  uint32_t done;  // helper blocks done with this slot's job
  uint32_t nb, total, step;  // step: grid_step
  CopyDesc descs[kWarpLanes];  // the epoch's copies, compacted
};
struct GridQueue {
  uint32_t seq;  // jobs posted (helpers start at 0: none seen)
  GridSlot slot[2];
};
// A grid job as posted: its helper blocks (0: none, the block copies alone) and its slot.
struct GridPost {
  uint32_t helpers, slot;
};
// A job as a helper block's warp 0 hands it to its copying warps (help_grid).
struct GridJob {
  uint32_t nb, total, step, stop;
};

// A pass whose copies the helpers are still moving while warp 0 goes on to the next pass: its
// CQEs, staged here, are published once those copies are done (publish_staged): after the next
// pass's copies were posted, when that pass is deferred too. So a pass's window and checks overlap
// the previous pass's copies, the CQEs' release overlaps the next pass's copies, and the copies stay
// in WQE order.
struct PendingPass {
  mlx5::Cqe64 body[kWarpLanes];  // words 0..14 of each writer's CQE
  mlx5::Cqe64* dst[kWarpLanes];
  uint32_t tail[kWarpLanes];
  uint32_t writers;  // lanes with a CQE
};

// Shared memory of a helped block, after its warps' scratch.
struct BlockShared {
  BlockCopyJob job;
  SubWindow sub[kWarpLanes];  // a block pass's sub-windows, once checked (warps per block <= 32)
  CopyDesc copies[2][kWarpLanes];  // the pending pass's and the next one's
  PendingPass pending;
  uint32_t next_buf;
  // The grid's help (GridQueue): this block's job, its helper blocks, the jobs posted; and what bounds
  // the wait for the helpers (the engine stopping, or its watchdog).
  GridQueue* grid;
  uint32_t grid_blocks, grid_seq;
  GridPost next_grid;  // the deferred pass's grid job, posted before the pending pass is awaited
  volatile int* stop_relay;
  unsigned long long started_ns, budget_ns;
  // A helper block's (help_grid): the jobs handed to its copying warps (two: the next one handed
  // over while they move this one), and for each the copying warps done with it.
  GridJob grid_jobs[2];
  uint32_t grid_copied[2];
};
// Named barriers (0 is __syncthreads'): a job posted and done; a block pass's sub-windows checked,
// its taken warps' payloads moved, their CQEs out.
constexpr uint32_t kJobPosted = 1, kJobDone = 2, kPassChecked = 3, kPassMoved = 4, kPassDone = 5;
// A helper block's jobs (help_grid), one barrier per buffer: warp 0 arrives, the copying warps wait.
constexpr uint32_t kGridPosted0 = 6, kGridPosted1 = 7;

__device__ __forceinline__ void block_barrier(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void block_barrier(uint32_t id) { block_barrier(id, blockDim.x); }
// The producer's side of a named barrier: no wait; its memory accesses before it are performed for
// the threads that wait at it (bar.sync) once it completes.
__device__ __forceinline__ void block_arrive(uint32_t id) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(blockDim.x) : "memory");
}
// A helper block's job buffer's barrier (kGridPosted0, kGridPosted1), by a branch: a barrier
// number known only at run time makes the compiler reserve all 16 of the block's barriers.
__device__ __forceinline__ void grid_posted_wait(uint32_t buf) {
  if (buf) block_barrier(kGridPosted1);
  else block_barrier(kGridPosted0);
}
__device__ __forceinline__ void grid_posted_arrive(uint32_t buf) {
  if (buf) block_arrive(kGridPosted1);
  else block_arrive(kGridPosted0);
}

// The block's rounds `first`, `first + step`, ... of an epoch of aligned copies.
__device__ __forceinline__ void aligned_rounds_of(const CopyDesc* descs, uint32_t nb, uint32_t total, uint32_t first,
                                                  uint32_t step, uint32_t lane) {
  WarpCopyIo io;
  const uint32_t rounds = aligned_rounds(total);
  for (uint32_t r = first; r < rounds; r += step) aligned_round(io, descs, nb, total, r, lane);
}

__device__ void help_block_pass(BlockShared* bs, const QpState& q, const Tables& tables, WarpScratch& ws,
                                uint32_t w, uint32_t ci, uint32_t avail, uint32_t subs, uint32_t lane, Counters& ctr);

// The owner block's side of a grid job (GridQueue). post_grid, by warp 0's 32 lanes: when the epoch
// is long enough for the grid (grid_epoch, with the block's own copying warps: all of them, or all
// but warp 0 for a `deferred` pass), its copies and rounds go to the helpers, with the rounds' step
// (grid_share). The slot's previous job has been awaited.
__device__ __forceinline__ GridPost post_grid(BlockShared* bs, const CopyDesc* descs, uint32_t nb, uint32_t total,
                                              bool deferred, uint32_t lane) {
  const uint32_t helpers = bs->grid_blocks, wpb = blockDim.x / kWarpLanes;
  if (!grid_epoch(aligned_rounds(total), grid_local_warps(deferred, wpb), helpers)) return GridPost{0u, 0u};
  const uint32_t seq = bs->grid_seq + 1u, slot = seq & 1u, step = grid_share(deferred, helpers, wpb).step;
  GridSlot* g = &bs->grid->slot[slot];
  if (lane < total / nb) g->descs[lane] = descs[lane];
  if (lane == 0) {
    g->done = 0u;
    g->nb = nb;
    g->total = total;
    g->step = step;
  }
  __syncwarp();  // every lane's stores before lane 0's release (cumulative over them)
  if (lane == 0) {
    order::st_release_gpu_u32(&bs->grid->seq, seq);
    bs->grid_seq = seq;
  }
  __syncwarp();
  return GridPost{helpers, slot};
}

// Whether a bounded wait ends: the engine is stopping (its relayed stop flag) or the waiter's
// watchdog budget, counted from `started`, is spent.
__device__ __forceinline__ bool engine_ending(const volatile int* stop_relay, unsigned long long started,
                                              unsigned long long budget) {
  return *stop_relay != 0 || order::globaltimer_ns() - started > budget;
}

// The owner block's wait for its helpers' `done` on `slot`, by one warp. Bounded: the engine
// stopping (its helpers have stopped too) or its watchdog ends it.
__device__ __noinline__ void await_grid(BlockShared* bs, uint32_t slot, uint32_t helpers, uint32_t lane) {
  if (lane == 0) {
    for (uint32_t spin = 0; order::ld_acquire_sys_u32(&bs->grid->slot[slot].done) < helpers; ++spin) {
      if ((spin & 255) == 255 && engine_ending(bs->stop_relay, bs->started_ns, bs->budget_ns)) break;
      __nanosleep(32);
    }
  }
  __syncwarp();
}

// A helper warp (warp `wib` of the block's `wpb`): every job warp 0 posts, until it ends: an epoch
// of copies, or its sub-window of a block pass (`q`: warp 0's QP; `ws`, `ctr`: the helper's own;
// `tables` by value, so that the kernel's arguments stay in the constant bank, not a stack copy).
__device__ __noinline__ void help_block(BlockShared* bs, const QpState& q, const Tables tables, WarpScratch& ws,
                                        uint32_t wib, uint32_t wpb, uint32_t lane, Counters& ctr) {
  BlockCopyJob& job = bs->job;
  for (;;) {
    block_barrier(kJobPosted);
    if (job.stop) return;
    if (job.window_subs != 0) {
      help_block_pass(bs, q, tables, ws, wib, job.window_ci, job.window_avail, job.window_subs, lane, ctr);
      continue;
    }
    const uint32_t mine = wib - (job.owner_copies ? 0u : 1u);  // warp 0 copies too, or not
    const GridShare part = grid_share(!job.owner_copies, job.grid_blocks, wpb);
    if (mine < part.share)
      aligned_rounds_of(job.descs, job.nb, job.total, grid_owner_first_round(job.grid_blocks, wpb, mine), part.step, lane);
    if (job.grid_blocks != 0 && wib == wpb - 1) await_grid(bs, job.grid_slot, job.grid_blocks, lane);
    block_barrier(kJobDone);
  }
}

// The pending pass's staged CQEs, once its copies are done: the kJobDone barrier made the helpers'
// payload stores happen before the writers' system-scope release of each CQE's tail, as in
// service_chunk, 5. `unfenced` (see run_effects) clears when a CQE was released. Called by warp 0's
// 32 lanes.
__device__ __forceinline__ void publish_staged(BlockShared* bs, uint32_t lane, bool& unfenced) {
  PendingPass& p = bs->pending;
  const bool writer = ((p.writers >> lane) & 1u) != 0;
  if (writer)
    for (int i = 0; i < 15; ++i) p.dst[lane]->w[i] = p.body[lane].w[i];
  __syncwarp();
  if (writer) order::st_release_sys_u32(&p.dst[lane]->w[15], p.tail[lane]);
  if (p.writers != 0) unfenced = false;
  __syncwarp();
}

// complete_wqe's memory for a pending pass: the CQE goes to the pass's staging, not the CQ.
struct CqeStaged {
  PendingPass* p;
  uint32_t lane;
  __device__ void publish_cqe(mlx5::Cqe64* d, const mlx5::Cqe64& body, uint32_t t) {
    for (int i = 0; i < 15; ++i) p->body[lane].w[i] = body.w[i];
    p->dst[lane] = d;
    p->tail[lane] = t;
  }
};

// The aligned road of an epoch (warp_plan.h, aligned_start): its copies' whole blocks per copy, all
// of them, and whether the copies end in a partial block; nb == 0 when the epoch cannot take it, or
// has fewer than `min_rounds` rounds (asked first: small epochs skip the vote). On it, every copy
// lane writes its copy into `descs`, compacted in lane order. Called by all 32 lanes.
struct AlignedEpoch {
  uint32_t nb, total;
  bool tails;
};
// The vote alone (aligned_shape), and with the compaction (aligned_epoch).
__device__ __forceinline__ AlignedEpoch aligned_shape(uint32_t lanes, const CopyDesc& mine, uint32_t lane,
                                                      uint32_t min_rounds) {
  const bool active = ((lanes >> lane) & 1u) != 0;
  const uint32_t len0 = __shfl_sync(kFullWarp, mine.len, lowest_lane(lanes));
  const uint32_t nb = len0 / 16, total = popcount32(lanes) * nb;
  if (nb == 0 || aligned_rounds(total) < min_rounds ||
      !__all_sync(kFullWarp, !active || (aligned_start(mine) && mine.len == len0)))
    return AlignedEpoch{0u, 0u, false};
  return AlignedEpoch{nb, total, (len0 & 15) != 0};
}
__device__ __forceinline__ AlignedEpoch aligned_epoch(uint32_t lanes, const CopyDesc& mine, uint32_t lane,
                                                      uint32_t min_rounds, CopyDesc* descs) {
  const AlignedEpoch ae = aligned_shape(lanes, mine, lane, min_rounds);
  if (ae.nb == 0) return ae;
  if (((lanes >> lane) & 1u) != 0) descs[popcount32(lanes & lanes_below(lane))] = mine;
  __syncwarp();
  return ae;
}

// Each copy lane of an aligned epoch moves its own copy's tail (uniform: nothing for whole blocks).
__device__ __forceinline__ void aligned_tails(uint32_t lanes, const CopyDesc& mine, const AlignedEpoch& ae,
                                              uint32_t lane) {
  if (!ae.tails) return;
  const bool active = ((lanes >> lane) & 1u) != 0;
  WarpCopyIo io;
  copy_blocks<1>(io, [&](int, BlockPlan* p) { return active && aligned_tail(mine, ae.nb, p); });
}

// Moves the payloads of the copy lanes `lanes` (each lane's own `mine`) with the whole warp, and the
// block's helpers when `job` is not null (see BlockCopyJob). Called by all 32 lanes. Payloads of at
// most one 16-byte block each (the 8-byte writes) are moved by their own lanes at once; aligned
// copies of one length by aligned_round (no search for a block's copy, no shifts) and their tails
// by their own lanes; otherwise every block of every copy is dealt out to the lanes,
// kBlocksPerLane in flight per lane.
__device__ void warp_copy(WarpScratch& ws, BlockShared* bs, uint32_t lanes, const CopyDesc& mine, uint32_t lane) {
  const bool active = ((lanes >> lane) & 1u) != 0;
  const uint32_t blocks = active ? copy_block_count(mine) : 0u;
  WarpCopyIo io;
  if (__all_sync(kFullWarp, blocks <= 1)) {
    copy_blocks<1>(io, [&](int, BlockPlan* p) {
      if (blocks == 0) return false;
      *p = plan_copy_block(mine, 0);
      return true;
    });
    return;
  }
  // The aligned road: the whole blocks by arithmetic (aligned_round), the tails by their lanes.
  const AlignedEpoch ae = aligned_epoch(lanes, mine, lane, 1u, ws.copies);
  if (ae.nb != 0) {
    aligned_tails(lanes, mine, ae, lane);
    if (bs != nullptr && aligned_rounds(ae.total) > 1) {
      const uint32_t wpb = blockDim.x / kWarpLanes;
      const GridPost grid = post_grid(bs, ws.copies, ae.nb, ae.total, false, lane);
      if (lane == 0) bs->job = BlockCopyJob{ws.copies, ae.nb, ae.total, 0u, 1u, 0u, 0u, 0u, grid.helpers, grid.slot};
      block_barrier(kJobPosted);
      aligned_rounds_of(ws.copies, ae.nb, ae.total, grid_owner_first_round(grid.helpers, wpb, 0u),
                        grid_share(false, grid.helpers, wpb).step, lane);
      block_barrier(kJobDone);  // the helpers' stores before the CQEs; ws.copies free again
      return;
    }
    aligned_rounds_of(ws.copies, ae.nb, ae.total, 0u, 1u, lane);
    __syncwarp();  // ws.copies is rewritten by the next epoch
    return;
  }
  uint32_t inclusive = blocks;
#pragma unroll
  for (uint32_t off = 1; off < kWarpLanes; off <<= 1) {
    const uint32_t v = __shfl_up_sync(kFullWarp, inclusive, off);
    if (lane >= off) inclusive += v;
  }
  ws.copies[lane] = active ? mine : CopyDesc{};
  ws.inclusive[lane] = inclusive;
  __syncwarp();
  const uint32_t rounds = copy_rounds(ws.inclusive[kWarpLanes - 1]);
  for (uint32_t r = 0; r < rounds; ++r) copy_round(io, ws.copies, ws.inclusive, r, lane);
  __syncwarp();  // ws.copies is rewritten by the next epoch
}

// Performs the recorded effects of the pass's WQEs `remaining`: copies together, each atomic after
// every write before it (put-with-signal: the signal must not overtake the data) and atomics in WQE
// order (a fetch-add returns the running sum, as a NIC executes a QP's atomics in order). Uniform.
// `unfenced`: the warp (or its helpers) wrote since its last system-scope fence or release, in this
// pass or an earlier one (a put whose pass signaled nothing, then the signal in the next pass).
__device__ void run_effects(WarpScratch& ws, BlockShared* bs, uint32_t remaining, uint32_t copy_lanes, uint32_t atomic_lanes,
                            const EffectRecorder& rec, uint32_t lane, GpuMem& mem, bool& unfenced) {
  while (remaining != 0) {
    const Epoch e = next_epoch(remaining, copy_lanes, atomic_lanes);
    if (e.copies != 0) {
      warp_copy(ws, bs, e.copies, rec.move, lane);
      unfenced = true;
    }
    if (e.atomic < kWarpLanes) {
      // Every lane's copy stores before the atomic: the barrier makes them happen before the
      // atomic lane's system-scope fence, which is cumulative over them (see service_chunk, 5.).
      __syncwarp();
      if (lane == e.atomic) {
        if (unfenced) order::fence_acq_rel_sys();
        mem.fetch_add(rec.remote, rec.add, rec.old);
      }
      unfenced = false;
      __syncwarp();
    }
    remaining = e.remaining;
  }
}

// warp_plan.h's Block (run_pass_effects, flush_pending_pass) for a warp of the engine: a helped
// block's barriers and staging, and the warp's own effects. A flush needs only `bs` and `lane`; a
// warp that copies alone (bs null) never defers a pass, so never awaits or publishes one.
struct EngineBlock {
  BlockShared* bs;
  uint32_t lane;
  // The pass's effects (run_pass_effects only).
  WarpScratch* ws = nullptr;
  uint32_t starts = 0, copy_lanes = 0, atomic_lanes = 0;
  const EffectRecorder* rec = nullptr;
  GpuMem* mem = nullptr;
  AlignedEpoch ae{0u, 0u, false};
  CopyDesc* descs = nullptr;

  // The pass's copies to the grid already here, before the pending pass is awaited: the helper
  // blocks go on to them as soon as they are done with the pending pass's.
  __device__ bool post_ready() {
    descs = bs->copies[bs->next_buf];
    ae = aligned_epoch(copy_lanes, rec->move, lane, 2u, descs);
    if (ae.nb == 0) return false;
    const GridPost grid = post_grid(bs, descs, ae.nb, ae.total, true, lane);
    if (lane == 0) bs->next_grid = grid;  // in shared memory: no registers held across the await
    return true;
  }
  __device__ void await_copies() { block_barrier(kJobDone); }
  __device__ void post_copies() {
    if (lane == 0) {
      bs->job = BlockCopyJob{descs, ae.nb, ae.total, 0u, 0u, 0u, 0u, 0u, bs->next_grid.helpers, bs->next_grid.slot};
      bs->next_buf ^= 1u;
    }
    block_barrier(kJobPosted);
  }
  __device__ void move_tails() { aligned_tails(copy_lanes, rec->move, ae, lane); }
  __device__ void publish_pending(bool& unfenced) { publish_staged(bs, lane, unfenced); }
  __device__ void run_effects(bool& unfenced) {
    softnic::run_effects(*ws, bs, starts, copy_lanes, atomic_lanes, *rec, lane, *mem, unfenced);
  }
};

// Whether the pending pass's copies are on the grid (pass_sub_windows). While a pass is pending,
// bs->job is its copy job: every other job is posted only after a flush (flush_pending_pass).
__device__ __forceinline__ bool pending_on_grid(const BlockShared* bs, bool pending) {
  return bs != nullptr && pending && bs->job.grid_blocks != 0;
}

// Before the serial path (which may run an atomic): the pending pass's CQEs out, and the warp's
// earlier writes fenced.
__device__ void settle_before_serial(BlockShared* bs, uint32_t lane, bool& pending, bool& unfenced) {
  EngineBlock b{bs, lane};
  flush_pending_pass(b, pending, unfenced);
  __syncwarp();
  if (unfenced && lane == 0) order::fence_acq_rel_sys();
  unfenced = false;
  __syncwarp();
}

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
  GridQueue* grid;      // one per block (the helped kernel's grid help)
};

// A helper block (grid_role) of QP `owner`'s block. Its warp 0 runs the block's side of the owner's
// GridQueue and copies nothing (grid_copy_warps): it polls the queue, brings each job's copies into
// shared memory and hands the job to the copying warps, in one of two buffers, each with its named
// barrier (bar.arrive here, bar.sync there). The next job is handed over while the warps still
// move this one, so they go from one job to the next at once: the queue's poll and the copies'
// trip to L2 are off their road. The last copying warp done with a job (grid_copied, an acq_rel
// count within the block) counts the block done with it: a system-scope release, cumulative over
// every copying warp's payload stores. Ends when the engine stops or its watchdog fires. Called by
// every warp of the block.
__device__ __noinline__ void help_grid(const KernelArgs& a, BlockShared* bs, GridRole role, uint32_t wib, uint32_t wpb,
                                       uint32_t lane, Counters& ctr) {
  GridQueue* g = a.grid + role.owner;
  const uint32_t copiers = grid_copy_warps(wpb);
  if (wib != 0) {  // a copying warp: the jobs in the order handed over, from the same first round
    const uint32_t first = grid_first_round(wpb, role.ordinal, wib);
    for (uint32_t n = 1;; ++n) {
      const uint32_t buf = n & 1u;
      grid_posted_wait(buf);
      const GridJob& job = bs->grid_jobs[buf];
      if (job.stop) return;
      const uint32_t rounds = aligned_rounds(job.total);
      aligned_rounds_of(bs->copies[buf], job.nb, job.total, first, job.step, lane);
      if (first < rounds) ctr.grid_rounds += (rounds - 1 - first) / job.step + 1;
      __syncwarp();  // every lane's stores before lane 0's release (cumulative over them)
      if (lane == 0 && order::atom_acq_rel_cta_add_u32(&bs->grid_copied[buf], 1u) == copiers - 1u)
        order::red_release_sys_add_u32(&g->slot[buf].done, 1u);  // job n is in the queue's slot n % 2
    }
  }
  const unsigned long long started = order::globaltimer_ns();
  if (lane == 0) bs->grid_copied[0] = bs->grid_copied[1] = copiers;  // both buffers free
  uint32_t handed = 0, posted = 0;  // jobs handed to the warps, and seen posted
  bool stopping = false;
  for (uint32_t idle = 0;; ++idle) {
    // The next job's buffer is free once every copying warp is done with the job two before it.
    const uint32_t buf = (handed + 1u) & 1u;
    uint32_t free = 0;
    if (lane == 0) free = order::ld_acquire_cta_u32(&bs->grid_copied[buf]) == copiers ? 1u : 0u;
    free = __shfl_sync(kFullWarp, free, 0);
    if (stopping) {
      const uint32_t other = lane == 0 ? order::ld_acquire_cta_u32(&bs->grid_copied[buf ^ 1u]) : 0u;
      if (free != 0 && __shfl_sync(kFullWarp, other, 0) == copiers) break;  // every job handed over is done
    } else if (free != 0) {
      if (posted == handed) {
        if (lane == 0) posted = order::ld_acquire_sys_u32(&g->seq);
        __syncwarp();  // lane 0's acquire before every lane's reads of the job
        posted = __shfl_sync(kFullWarp, posted, 0);
      }
      if (posted != handed) {
        ++handed;  // the jobs in the order posted (seq may be one further: the owner posts ahead)
        const GridSlot* gs = &g->slot[buf];
        // Every lane's copy slot loaded beside the job's shape, not after it: one trip to L2, not
        // two (the slots past the epoch's copies are stale and never read).
        const CopyDesc d = gs->descs[lane];
        const uint32_t nb = gs->nb, total = gs->total, step = gs->step;
        bs->copies[buf][lane] = d;
        if (lane == 0) {
          bs->grid_jobs[buf] = GridJob{nb, total, step, 0u};
          bs->grid_copied[buf] = 0u;
        }
        __syncwarp();
        grid_posted_arrive(buf);
        idle = 0;
        continue;
      }
    }
    if ((idle & 255) == 255 && !stopping) {
      uint32_t ending = 0;
      if (lane == 0) ending = engine_ending(a.stop_relay, started, a.budget_ns) ? 1u : 0u;
      stopping = __shfl_sync(kFullWarp, ending, 0) != 0;  // one lane's view: the warp stays converged
    }
    __nanosleep(64);
  }
  const uint32_t buf = (handed + 1u) & 1u;
  if (lane == 0) bs->grid_jobs[buf].stop = 1u;
  __syncwarp();
  grid_posted_arrive(buf);
}

// The next pass's window, loaded while this pass's CQEs are published: the CQE release waits one
// memory round trip for the payload and CQE stores anyway, and the loads take the same trip.
struct WindowPrefetch {
  uint4 seg[4];  // lane's segments k * 32 + lane of the window
  uint32_t ci;   // the window starts at this WQEBB
  uint32_t n_read;
  bool valid;
};

// Loads the segments of the window of `n_read` WQEBBs at `ci`, segment-striped: each load
// instruction of the warp reads 512 consecutive bytes of the ring (a WQEBB per lane would touch 32
// half-used sectors per instruction).
__device__ __forceinline__ void load_window(const SqDesc& sq, uint32_t ci, uint32_t n_read, uint32_t lane,
                                            uint4 (&seg)[4]) {
#pragma unroll
  for (uint32_t k = 0; k < 4; ++k) {
    const uint32_t s = k * kWarpLanes + lane;
    if (s / 4 < n_read) seg[k] = load_cv(wqebb_ptr(sq.buf, sq.wqe_cnt, ci + s / 4) + 16 * (s % 4));
  }
}

// A writer lane's CQE of a pass, at its own slot, into `sink` (the CQ, body first, or the pending
// pass's staging). The pass's CQEs and counters are counted once, by lane 0 (service_chunk, 5.).
template <class Sink>
__device__ __forceinline__ void complete_in_slot(const QpState& q, const CqeSlot& slot, uint16_t wqe_index,
                                                 const ExecResult& r, Sink& sink) {
  QpState local = q;
  local.cq_pi = slot.cq_pi;
  Counters unused;
  complete_wqe(local, wqe_index, r, sink, unused);
}

// Steps 1-3 of a pass over the window of `avail` WQEBBs rung from `ci` (a block pass's sub-window:
// its own start and what was rung from there), reading at most `limit` WQEBBs (window_reads): the
// window into the warp's shared memory (from `pf` when the previous pass prefetched it), which
// lanes start a WQE (from the sub-window's entry when `find_entry`, else from lane 0), and each
// start lane's checks and recorded effect.
struct CheckedWindow {
  uint32_t first = 0;  // the entry
  Prefix pre{0u, 0u};  // the WQEs that run now (executable_prefix)
  EffectRecorder rec;  // this lane's WQE's effect
  ExecResult r;        // and outcome
};
__device__ __forceinline__ void check_window(const QpState& q, const Tables& tables, uint32_t ci, uint32_t avail,
                                             uint32_t limit, bool find_entry, WarpScratch& ws, WindowPrefetch& pf,
                                             uint32_t lane, PhaseClock& ph, CheckedWindow& c) {
  const uint32_t n_read = window_reads(avail, q.sq.wqe_cnt, limit);
  const uint32_t n_lanes = n_read < kWindowWqebbs ? n_read : kWindowWqebbs;  // one WQEBB a lane
  // 1. The window into shared memory (prefetched by the previous pass when it could be), and the
  //    WQEBBs past the lanes' (a sub-window's last WQE) by the first lanes, at the same time.
  if (!(pf.valid && pf.ci == ci && pf.n_read == n_lanes)) load_window(q.sq, ci, n_lanes, lane, pf.seg);
  pf.valid = false;
  const uint32_t s_past = 4 * kWarpLanes + lane;
  uint4 past = make_uint4(0u, 0u, 0u, 0u);
  if (s_past / 4 < n_read) past = load_cv(wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, ci + s_past / 4) + 16 * (s_past % 4));
#pragma unroll
  for (uint32_t k = 0; k < 4; ++k) {
    const uint32_t s = k * kWarpLanes + lane;
    if (s / 4 < n_lanes) reinterpret_cast<uint4*>(ws.window)[s] = pf.seg[k];
  }
  if (s_past / 4 < n_read) reinterpret_cast<uint4*>(ws.window)[s_past] = past;
  __syncwarp();
  ph.mark(kPhWindow);
  // 2. Which lanes start a WQE.
  bool ctrl_ok = false;
  uint32_t nbb = 1;
  if (lane < n_lanes) {
    const CtrlFields f = decode_ctrl(ws.window[4 * lane]);
    ctrl_ok = f.wqe_index == static_cast<uint16_t>(ci + lane) && f.qpn == q.sq.qpn && f.ds >= 1 && f.ds <= kMaxDs;
    nbb = ctrl_ok ? wqebbs_of_ds(f.ds) : 1u;
  }
  const uint32_t ok_lanes = __ballot_sync(kFullWarp, ctrl_ok);
  const NbbPlanes planes{__ballot_sync(kFullWarp, ((nbb - 1) & 1u) != 0),
                         __ballot_sync(kFullWarp, ((nbb - 1) & 2u) != 0)};
  c.first = find_entry ? sub_window_entry(ok_lanes) : 0u;
  const WindowPlan plan = plan_window_planes(ok_lanes, planes, n_read, avail, c.first);
  ph.mark(kPhDecode);
  // 3. Every start lane checks its WQE and records its effect.
  bool good = false;
  if (((plan.starts >> lane) & 1u) != 0) {
    c.r = execute_wqe<true>(tables, *reinterpret_cast<const WqeImage*>(&ws.window[4 * lane]), q.dc != 0, c.rec);
    good = c.r.syndrome == 0 && c.rec.calls <= 1;
  }
  c.pre = executable_prefix(plan, __ballot_sync(kFullWarp, good));
  ph.mark(kPhExecute);
}

// Whether this lane's WQE runs now, and the lanes whose WQEs copy or are atomics. Uniform masks.
__device__ __forceinline__ bool runs_now(const CheckedWindow& c, uint32_t lane) { return ((c.pre.starts >> lane) & 1u) != 0; }
__device__ __forceinline__ uint32_t copy_lanes_of(const CheckedWindow& c, uint32_t lane) {
  return __ballot_sync(kFullWarp, runs_now(c, lane) && c.rec.kind == EffectRecorder::kCopy && c.rec.move.len != 0);
}
__device__ __forceinline__ uint32_t atomic_lanes_of(const CheckedWindow& c, uint32_t lane) {
  return __ballot_sync(kFullWarp, runs_now(c, lane) && c.rec.kind == EffectRecorder::kFetchAdd);
}

// A block pass of `subs` sub-windows, once warp `w` checked its own (`checked`: w < subs): its outcome
// to the block, the barrier, and how many sub-windows the pass takes (warp_plan.h). Called by every
// warp of the block. No warp writes bs->sub again before every helper is back at the next job's
// barrier.
__device__ __forceinline__ uint32_t plan_block_pass(BlockShared* bs, uint32_t w, uint32_t subs, bool checked,
                                                    const CheckedWindow& c, uint32_t lane) {
  if (checked) {
    const uint32_t signaled = __ballot_sync(kFullWarp, runs_now(c, lane) && c.r.signaled);
    const uint32_t atomics = atomic_lanes_of(c, lane);
    // Warp 0's pass alone: deferred when its copies take the aligned road two rounds or more
    // (run_pass_effects, EngineBlock::post_ready), to the grid when they are long (post_copies).
    uint32_t deferral = kPassRuns;
    if (w == 0) {
      const uint32_t copies = copy_lanes_of(c, lane);
      if (deferrable_pass(true, copies, atomics)) {  // uniform: the vote only for copies alone
        const AlignedEpoch ae = aligned_shape(copies, c.rec.move, lane, 2u);
        deferral = pass_deferral(ae.nb != 0, aligned_rounds(ae.total), blockDim.x / kWarpLanes - 1u, bs->grid_blocks);
      }
    }
    if (lane == 0)
      bs->sub[w] = SubWindow{c.first,           c.pre.consumed,        popcount32(c.pre.starts),
                             popcount32(signaled), popcount32(atomics), deferral};
  }
  block_barrier(kPassChecked);
  return block_pass_warps(bs->sub, subs, blockDim.x / kWarpLanes);
}

// The rest of a block pass for taken sub-window w of k, which starts at WQEBB `ci_w`, in two steps.
// move_block_pass: its payloads (no atomics: block_pass_warps), then the taken warps' barrier (every
// payload of the pass stored). complete_block_pass: its CQEs, at the pass's producer index after the
// sub-windows before it, then the barrier again (every CQE of the pass out before any of the next
// pass's, so a collapsed counter never goes back); each warp counts its own WQEs. The barriers order
// the other warps' payload stores before this warp's system-scope CQE release, as the warp barrier
// does a warp's own lanes' (service_chunk, 5.).
__device__ __forceinline__ void move_block_pass(uint32_t k, const CheckedWindow& c, WarpScratch& ws, uint32_t lane) {
  GpuMem mem;
  bool unfenced = false;
  run_effects(ws, nullptr, c.pre.starts, copy_lanes_of(c, lane), 0u, c.rec, lane, mem, unfenced);
  block_barrier(kPassMoved, k * kWarpLanes);
}
__device__ __forceinline__ void complete_block_pass(const QpState& q, const BlockShared* bs, uint32_t w, uint32_t k,
                                                    uint32_t ci_w, const CheckedWindow& c, Counters& ctr,
                                                    uint32_t lane) {
  const bool mine = runs_now(c, lane);
  const uint32_t signaled = __ballot_sync(kFullWarp, mine && c.r.signaled);
  const CqeSlot slot = cqe_slot(lane, signaled, block_cq_pi(bs->sub, w, q.cq_pi), q.cq.collapsed);
  const bool write = slot.write && block_cqe_writer(bs->sub, k, w, q.cq.collapsed);
  CqeBodyFirst cqe;
  if (write) complete_in_slot(q, slot, static_cast<uint16_t>(ci_w + lane), c.r, cqe);
  __syncwarp();
  if (write) order::st_release_sys_u32(&cqe.dst->w[15], cqe.tail);
  block_barrier(kPassDone, k * kWarpLanes);
  unsigned long long bytes = mine ? c.r.byte_cnt : 0;
  for (int off = 16; off > 0; off >>= 1) bytes += __shfl_down_sync(kFullWarp, bytes, off);
  if (lane == 0) {
    ctr.wqes += popcount32(c.pre.starts);
    ctr.cqes += popcount32(signaled);
    ctr.bytes += bytes;
  }
}

// A helper's part of a block pass (help_block) of `subs` sub-windows over `avail` WQEBBs rung from
// `ci`: its sub-window checked, then, if the pass takes it, the rest. `q`: warp 0's QP (its state
// does not change until the pass is done).
__device__ __noinline__ void help_block_pass(BlockShared* bs, const QpState& q, const Tables& tables, WarpScratch& ws,
                                             uint32_t w, uint32_t ci, uint32_t avail, uint32_t subs, uint32_t lane,
                                             Counters& ctr) {
  const uint32_t ci_w = ci + w * kWindowWqebbs;
  const bool checked = w < subs;
  CheckedWindow c;
  if (checked) {
    WindowPrefetch pf;
    pf.valid = false;
    PhaseClock ph;
    check_window(q, tables, ci_w, avail - w * kWindowWqebbs, kSubWindowReads, true, ws, pf, lane, ph, c);
  }
  const uint32_t k = plan_block_pass(bs, w, subs, checked, c, lane);
  if (w >= k) return;
  move_block_pass(k, c, ws, lane);
  complete_block_pass(q, bs, w, k, ci_w, c, ctr, lane);
}

// One pass over the QP's doorbell window by the whole warp (see warp_plan.h), or with the block's
// other warps when more than one window was rung on a helped block's QP (a block pass).
// `pf`: the window prefetched by the previous pass of this doorbell (used when it is this one's).
// `bs`: the helped block's shared state (null: the warp copies alone). kHelped false: the block's
// paths (deferred passes, block passes) compiled out (engine_kernel). kBlock false: block passes
// compiled out; the drain takes that form unless more than one window is rung (serve_qps).
// `pending`: see run_pass_effects; `unfenced`: see run_effects (both the warp's, carried from pass to
// pass).
template <bool kHelped, bool kBlock>
__device__ __forceinline__ void service_chunk(QpState& q, const Tables& tables, uint16_t db_index, Counters& ctr,
                                              WarpScratch& ws, BlockShared* bs, WindowPrefetch& pf, bool& pending,
                                              bool& unfenced) {
  if constexpr (!kHelped) bs = nullptr;
  const uint32_t lane = threadIdx.x & 31;
  GpuMem mem;
  PhaseClock ph;
  ph.count(kPhPasses);  // every pass, the serial path's too (its steps are not marked)
  if (q.error) {
    // A QP in error flushes every WQE: the serial path, one per pass.
    settle_before_serial(bs, lane, pending, unfenced);
    if (lane == 0) service_one_wqe(q, tables, mem, ctr);
    __syncwarp();
    return;
  }
  const uint32_t ci = q.ci;
  const uint32_t avail = static_cast<uint16_t>(db_index - static_cast<uint16_t>(ci)) + 1u;
  const uint32_t subs = kBlock && bs != nullptr ? pass_sub_windows(avail, q.sq.wqe_cnt, blockDim.x / kWarpLanes,
                                                                   pending_on_grid(bs, pending))
                                                : 1u;
  if (subs > 1) {
    // A block pass: the helpers free (the pending pass's CQEs out before this pass's), then each
    // checks its sub-window while this warp checks the first.
    EngineBlock eb{bs, lane};
    flush_pending_pass(eb, pending, unfenced);
    if (lane == 0) bs->job = BlockCopyJob{nullptr, 0u, 0u, 0u, 0u, ci, avail, subs};
    block_barrier(kJobPosted);
  }
  CheckedWindow c;
  check_window(q, tables, ci, avail, subs > 1 ? kSubWindowReads : kWindowWqebbs, false, ws, pf, lane, ph, c);
  // A block pass takes k sub-windows, this warp's the first; k == 1: this warp's pass alone, as
  // without the others (who go back to waiting for a job).
  const uint32_t k = subs > 1 ? plan_block_pass(bs, 0u, subs, true, c, lane) : 1u;
  const bool block = k > 1;
  Prefix pre = c.pre;  // block: consumed of the whole pass, starts this warp's
  uint32_t pass_signaled = 0;  // block: the other sub-windows' signaled WQEs
  if (block) {
    pre.consumed = block_pass_consumed(bs->sub, k);
    for (uint32_t v = 1; v < k; ++v) pass_signaled += bs->sub[v].signaled;
  }
  if (pre.starts == 0) {
    // Irregular WQE at the head: the serial path (stale retries, errors).
    settle_before_serial(bs, lane, pending, unfenced);
    if (lane == 0) service_one_wqe(q, tables, mem, ctr);
    __syncwarp();
    return;
  }
  const bool mine = runs_now(c, lane);
  const EffectRecorder& rec = c.rec;
  const ExecResult& r = c.r;
  // 4. The effects. A helped pass of aligned copies only, longer than a round, is deferred: the
  // helpers move its copies while this warp goes on, and its CQEs wait, staged (warp_plan.h,
  // run_pass_effects). In a block pass every warp moves its own (the helpers are busy with theirs),
  // then the taken warps' barrier: every payload of the pass stored before any CQE of it.
  const uint32_t copy_lanes = copy_lanes_of(c, lane);
  const uint32_t atomic_lanes = atomic_lanes_of(c, lane);
  EngineBlock eb{block ? nullptr : bs, lane, &ws, pre.starts, copy_lanes, atomic_lanes, &rec, &mem};
  const bool deferred =
      run_pass_effects(eb, !block && deferrable_pass(bs != nullptr, copy_lanes, atomic_lanes), pending, unfenced);
  if (block) block_barrier(kPassMoved, k * kWarpLanes);
  ph.mark(kPhEffects);
  // The next window of this doorbell, if any, while the CQEs below wait for their round trip. The
  // WQEs in it were rung before the doorbell this pass serves was read, like the ones read above;
  // a producer reuses none of its slots before their CQEs.
  const uint32_t next = ci + pre.consumed;
  if (idx16_at_or_after(db_index, static_cast<uint16_t>(next))) {
    pf.ci = next;
    pf.n_read = window_reads(static_cast<uint16_t>(db_index - static_cast<uint16_t>(next)) + 1u, q.sq.wqe_cnt);
    load_window(q.sq, next, pf.n_read, lane, pf.seg);
    pf.valid = true;
  }
  ph.mark(kPhPrefetch);
  // 5. CQEs, then the QP's state and the counters (lane 0). Every payload byte of the pass is
  //    visible system-wide before any CQE of it is: the writers store their CQE bodies, the warp
  //    barrier makes every lane's payload and body stores happen before what each writer does
  //    after it, and each writer publishes its CQE's tail (wqe_counter, owner) with a system-scope
  //    release store, which is cumulative over them (PTX memory model: a release orders what
  //    happens before it, other threads' writes included). One fence, one round trip, covers the
  //    payloads and the bodies. A block pass's first CQEs are this warp's (block_cq_pi), and into a
  //    collapsed CQ it writes only when no later sub-window signals (block_cqe_writer); then the
  //    taken warps' barrier: every CQE of the pass out before the next pass's.
  const uint32_t signaled = __ballot_sync(kFullWarp, mine && r.signaled);
  const CqeSlot slot = cqe_slot(lane, signaled, q.cq_pi, q.cq.collapsed);
  const bool write = slot.write && (!block || block_cqe_writer(bs->sub, k, 0u, q.cq.collapsed));
  const uint16_t wqe_index = static_cast<uint16_t>(ci + lane);
  if (deferred) {
    if (slot.write) {
      CqeStaged staged{&bs->pending, lane};
      complete_in_slot(q, slot, wqe_index, r, staged);
    }
    const uint32_t writers = __ballot_sync(kFullWarp, slot.write);
    if (lane == 0) bs->pending.writers = writers;
  } else {
    CqeBodyFirst cqe;
    if (write) complete_in_slot(q, slot, wqe_index, r, cqe);
    __syncwarp();
    if (write) order::st_release_sys_u32(&cqe.dst->w[15], cqe.tail);
    if (signaled != 0) unfenced = false;
  }
  if (block) {
    block_barrier(kPassDone, k * kWarpLanes);
    unfenced = true;  // the other warps' writes: a later atomic fences first
  }
  ph.mark(kPhCqe);
  unsigned long long bytes = mine ? r.byte_cnt : 0;
  for (int off = 16; off > 0; off >>= 1) bytes += __shfl_down_sync(kFullWarp, bytes, off);
  const uint32_t nsig = popcount32(signaled);
  __syncwarp();
  if (lane == 0) {
    q.ci = next;
    q.cq_pi += nsig + pass_signaled;
    ctr.wqes += popcount32(pre.starts);
    ctr.cqes += nsig;
    ctr.bytes += bytes;
  }
  __syncwarp();
  ph.mark(kPhTail);
}

// A warp's polling of its QPs until the engine stops: each doorbell seen is drained in passes
// (service_chunk).
template <bool kHelped>
__device__ __forceinline__ void serve_qps(const KernelArgs& a, WarpScratch& ws, BlockShared* bs, uint32_t warp,
                                          uint32_t nwarps, bool own_one, uint32_t lane, Counters& ctr) {
  bool unfenced = false;  // see run_effects
  bool pending = false;   // see run_pass_effects
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
    if (__shfl_sync(kFullWarp, stop, 0)) break;
    bool worked = false;
    for (uint32_t qi = warp; qi < a.num_qps; qi += nwarps) {
      QpState& g = a.qps[qi];
      QpState& q = ws.qp;  // served from shared memory; a warp of several QPs loads and stores it
      // One load, broadcast: every lane acts on the same doorbell value.
      uint64_t db = 0;
      if (lane == 0) db = order::ld_relaxed_sys_u64(own_one ? q.sq.doorbell : g.sq.doorbell);
      db = __shfl_sync(kFullWarp, db, 0);
      if (db == (own_one ? q.last_doorbell : g.last_doorbell)) continue;
      worked = true;
      PhaseClock ph;  // from the doorbell seen
      __syncwarp();
      if (lane == 0) {
        if (!own_one) q = g;
        q.last_doorbell = db;
      }
      __syncwarp();
      if (doorbell_qpn(db) == q.sq.qpn) {
        const uint16_t db_index = doorbell_wqe_index(db);
        // Drain everything up to the doorbell's WQE before moving to the next QP.
        WindowPrefetch pf;
        pf.valid = false;
        ph.count(kPhDrains);
        ph.mark(kPhDoorbell);
        for (uint32_t guard = 0; idx16_at_or_after(db_index, static_cast<uint16_t>(
                                                                 *reinterpret_cast<volatile uint32_t*>(&q.ci)));
             ++guard) {
          if (guard != 0) ph.mark(kPhBetween);
          // A pass that cannot be a block pass runs a copy without the block pass's code: with it
          // inlined, a lone op's put+completion took about 300 ns longer although it never ran.
          if (kHelped && pass_sub_windows(static_cast<uint16_t>(db_index - static_cast<uint16_t>(q.ci)) + 1u,
                                          q.sq.wqe_cnt, blockDim.x / kWarpLanes,
                                          pending_on_grid(bs, pending)) > 1) {
            service_chunk<kHelped, true>(q, a.tables, db_index, ctr, ws, bs, pf, pending, unfenced);
          } else {
            service_chunk<kHelped, false>(q, a.tables, db_index, ctr, ws, bs, pf, pending, unfenced);
          }
          ph.restart();
          if (guard > 70000) break;  // cannot happen for a valid window (<= 65536 WQEBBs); never spin forever
        }
        EngineBlock eb{bs, static_cast<uint32_t>(lane)};
        flush_pending_pass(eb, pending, unfenced);  // the drain's last CQEs
      }
      __syncwarp();
      if (!own_one && lane == 0) g = q;
    }
    // Warps with nothing to do back off briefly so they do not steal issue slots from busy warps
    // on the same SM (a few hundred ns at most added to the first doorbell after a quiet spell).
    if (worked) {
      idle = 0;
    } else if (++idle > 64) {
      __nanosleep(a.num_qps > warp ? 32 : 1000);
    }
  }
}

// kHelped: the launch has at most one QP per block (GpuEngine::start), so each block with a QP has its
// other warps help warp 0. Two kernels, not one that branches: with the helped paths in the same
// kernel (compiled separately, never taken) warps alone ran 2-9 % slower on the H200 (ceilings of
// inline 8 B at 64 and 528 QPs), and without them 1-2 % faster than the engine before block passes.
template <bool kHelped>
__global__ void engine_kernel(KernelArgs a) {
  extern __shared__ __align__(16) unsigned char engine_smem[];
  WarpScratch& ws = reinterpret_cast<WarpScratch*>(engine_smem)[threadIdx.x >> 5];
  const int lane = threadIdx.x & 31;
  // Warps are numbered across blocks first (warp w of block b is w * gridDim.x + b) and QP qi is
  // served by warp qi % nwarps, so the first QPs go to different SMs: 16 QPs get one warp on each of
  // 16 SMs, not every warp of 4 SMs sharing those SMs' load and store units.
  const uint32_t warp = (threadIdx.x >> 5) * gridDim.x + blockIdx.x;
  const uint32_t nwarps = (gridDim.x * blockDim.x) >> 5;
  // A QP is served from the warp's shared memory (a QP belongs to one warp): in global memory every
  // read after the warp's own writes (the doorbell it saw, the next WQEBB) waited for a round trip
  // to L2 on the way to each WQE. A warp that serves exactly one QP keeps it there until it ends;
  // one of several QPs loads the QP's state when its doorbell moved and stores it after.
  const bool own_one = warp < a.num_qps && warp + nwarps >= a.num_qps;
  // At most one QP per block, and this block's warp 0 has one: its other warps help it (copies,
  // block passes), each counting what it ran.
  const uint32_t wib = threadIdx.x >> 5, wpb = blockDim.x >> 5;
  const bool helped = kHelped && blockIdx.x < a.num_qps;
  BlockShared* bs = helped ? reinterpret_cast<BlockShared*>(engine_smem + kScratchBytes * wpb) : nullptr;
  if constexpr (kHelped) {
    const GridRole role = grid_role(gridDim.x, a.num_qps, blockIdx.x);
    if (role.helps) {  // no QP of its own: it helps a QP's block copy (counting the rounds it moved)
      Counters gctr;
      help_grid(a, reinterpret_cast<BlockShared*>(engine_smem + kScratchBytes * wpb), role, wib, wpb,
                static_cast<uint32_t>(lane), gctr);
      if (lane == 0) a.counters[warp] = gctr;
      return;
    }
  }
  if (helped && wib != 0) {
    Counters hctr;
    const QpState& owner_qp = reinterpret_cast<const WarpScratch*>(engine_smem)[0].qp;
    help_block(bs, owner_qp, a.tables, ws, wib, wpb, static_cast<uint32_t>(lane), hctr);
    if (lane == 0) a.counters[warp] = hctr;
    return;
  }
  if (helped && lane == 0) {
    bs->next_buf = 0u;
    bs->grid = a.grid + blockIdx.x;
    bs->grid_blocks = grid_helpers(gridDim.x, a.num_qps, blockIdx.x);
    bs->grid_seq = 0u;
    bs->stop_relay = a.stop_relay;
    bs->started_ns = order::globaltimer_ns();
    bs->budget_ns = a.budget_ns;
  }
  if (own_one && lane == 0) ws.qp = a.qps[warp];
  __syncwarp();
  Counters ctr;
  serve_qps<kHelped>(a, ws, bs, warp, nwarps, own_one, static_cast<uint32_t>(lane), ctr);
  __syncwarp();
  if (helped) {  // release the helpers (no pass is pending: every drain ends with its flush)
    if (lane == 0) bs->job.stop = 1u;
    block_barrier(kJobPosted);
  }
  if (lane == 0) {
    if (own_one) a.qps[warp] = ws.qp;
    a.counters[warp] = ctr;
  }
}

// The profiling build's table: zeroed before a launch, printed after it (see PhaseClock).
void reset_phases(cudaStream_t stream) {
  if constexpr (!kEnginePhases) return;
  void* p = nullptr;
  check(cudaGetSymbolAddress(&p, g_phase_cycles), "phase table");
  check(cudaMemsetAsync(p, 0, sizeof(g_phase_cycles), stream), "clear the phase table");
}

void print_phases(uint32_t warps) {
  if constexpr (!kEnginePhases) return;
  std::vector<unsigned long long> t(size_t(kPhaseWarps) * kPhCount);
  check(cudaMemcpyFromSymbol(t.data(), g_phase_cycles, t.size() * sizeof(t[0])), "read the phase table");
  static const char* const names[kPhCount] = {"window", "decode", "execute", "effects", "prefetch", "cqe",
                                              "tail",   "between", "doorbell", "passes", "drains"};
  unsigned long long sum[kPhCount] = {};
  uint32_t busy = 0;
  for (uint32_t w = 0; w < warps && w < kPhaseWarps; ++w) {
    const unsigned long long* r = &t[size_t(w) * kPhCount];
    if (r[kPhPasses] == 0) continue;
    ++busy;
    for (uint32_t k = 0; k < kPhCount; ++k) sum[k] += r[k];
  }
  if (sum[kPhPasses] == 0) return;
  std::fprintf(stderr, "engine phases: %u busy warps, %llu passes, %llu drains; cycles per pass:", busy,
               sum[kPhPasses], sum[kPhDrains]);
  for (uint32_t k = 0; k < kPhPasses; ++k)
    std::fprintf(stderr, " %s %.0f", names[k], double(sum[k]) / double(sum[kPhPasses]));
  std::fprintf(stderr, "\n");
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
  cudaFree(d_grid_);
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
  if (cfg_.warps_per_block < 1 || cfg_.warps_per_block > 32)
    throw std::invalid_argument("gpu engine: warps_per_block " + std::to_string(cfg_.warps_per_block) +
                                " (allowed: 1..32, a block of at most 1024 threads)");
  if (cfg_.blocks < 0) throw std::invalid_argument("gpu engine: blocks " + std::to_string(cfg_.blocks) +
                                                   " (allowed: 0 = one per SM, or a positive count)");
  if (cfg_.device < 0 || cfg_.device >= kMaxDevices)
    throw std::invalid_argument("gpu engine: device " + std::to_string(cfg_.device) + " (allowed: 0.." +
                                std::to_string(kMaxDevices - 1) + ")");
  same_gpu_ = cfg_.device == saved;
  const char* loading = std::getenv("CUDA_MODULE_LOADING");
  if (eager_module_loading && loading && std::strcmp(loading, "LAZY") == 0 && same_gpu_)
    throw std::runtime_error(
        "gpu engine: CUDA_MODULE_LOADING=LAZY with the engine on the producer's GPU: a kernel first launched "
        "while the engine runs would wait for the engine to end; unset it or set EAGER");
  bool probe = false;
  {
    std::lock_guard<std::mutex> lock(g_devices_mu);
    if (same_gpu_ && g_running[cfg_.device] == 0) prepare_same_gpu_context();
    probe = same_gpu_ && !g_probed[cfg_.device];
  }
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
  const auto stream = static_cast<cudaStream_t>(stream_);
  // Counters of every warp, then the stop relay word (allocated once: a free waits for the whole
  // device). Set on the engine's own stream: a copy or set on the legacy stream is not ordered
  // before a launch on a non-blocking one.
  if (!d_counters_) check(cudaMalloc(&d_counters_, sizeof(Counters) * total_warps_ + 64), "cudaMalloc(counters)");
  check(cudaMemsetAsync(d_counters_, 0, sizeof(Counters) * total_warps_ + 64, stream), "cudaMemset(counters, relay)");
  // Each block's grid job (the helped kernel's grid help), from sequence 0 at every start.
  if (!d_grid_) check(cudaMalloc(&d_grid_, sizeof(GridQueue) * static_cast<size_t>(blocks)), "cudaMalloc(grid jobs)");
  check(cudaMemsetAsync(d_grid_, 0, sizeof(GridQueue) * static_cast<size_t>(blocks), stream), "cudaMemset(grid jobs)");
  if (num_qps_)
    check(cudaMemcpyAsync(d_qps_, states.data(), sizeof(QpState) * num_qps_, cudaMemcpyHostToDevice, stream),
          "copy qps");
  if (host_tables.num_mrs)
    check(cudaMemcpyAsync(d_mrs_, host_tables.mrs, sizeof(MrEntry) * host_tables.num_mrs, cudaMemcpyHostToDevice,
                          stream),
          "copy mrs");
  if (host_tables.num_dcts)
    check(cudaMemcpyAsync(d_dcts_, host_tables.dcts, sizeof(DctEntry) * host_tables.num_dcts,
                          cudaMemcpyHostToDevice, stream),
          "copy dcts");
  check(cudaStreamSynchronize(stream), "engine state upload");
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
  a.grid = static_cast<GridQueue*>(d_grid_);
  // At most one QP per block: the helped kernel (engine_kernel).
  const auto kernel =
      cfg_.warps_per_block > 1 && num_qps_ <= static_cast<uint32_t>(blocks) ? engine_kernel<true> : engine_kernel<false>;
  cudaFuncAttributes fa{};
  check(cudaFuncGetAttributes(&fa, kernel), "cudaFuncGetAttributes(engine kernel)");
  if (32 * cfg_.warps_per_block > fa.maxThreadsPerBlock)
    throw std::invalid_argument("gpu engine: warps_per_block " + std::to_string(cfg_.warps_per_block) +
                                " exceeds what the engine kernel can launch with its registers (" +
                                std::to_string(fa.maxThreadsPerBlock / 32) + " warps per block)");
  const size_t smem = kScratchBytes * static_cast<size_t>(cfg_.warps_per_block) + sizeof(BlockShared);
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
        "cudaFuncSetAttribute(engine shared memory)");
  reset_phases(stream);
  kernel<<<blocks, 32 * cfg_.warps_per_block, smem, stream>>>(a);
  check(cudaGetLastError(), "launch engine kernel");
  running_ = true;
  {
    std::lock_guard<std::mutex> lock(g_devices_mu);
    ++g_running[cfg_.device];
  }
  if (probe) {
    try {
      probe_beside();
    } catch (...) {
      cudaSetDevice(saved);
      throw;
    }
  }
  cudaSetDevice(saved);
}

// The first engine on the producer's GPU: a kernel first launched beside it must run now, not when
// the engine ends. If it does not within kProbeMs, the engine is stopped (so the blocked launch
// returns) and start() fails saying why, instead of every later producer kernel hanging.
void GpuEngine::probe_beside() {
  constexpr int kProbeMs = 5000;
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate(probe)");
  // Its output: the counters buffer's spare word after the stop relay.
  auto* out = reinterpret_cast<uint32_t*>(static_cast<char*>(d_counters_) + sizeof(Counters) * total_warps_ + 32);
  bool fired = false;
  cudaError_t e;
  {
    EngineDeadline deadline(*this, kProbeMs);
    co_resident_probe_kernel<<<1, 1, 0, s>>>(out, 7u);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    fired = deadline.fired();
  }
  cudaStreamDestroy(s);
  if (e != cudaSuccess || fired) {
    try {
      stop();
    } catch (const std::exception&) {
    }
    if (e != cudaSuccess) check(e, "probe kernel beside the engine");
    throw std::runtime_error(
        "gpu engine: a kernel first launched beside the engine on GPU " + std::to_string(cfg_.device) +
        " did not run within " + std::to_string(kProbeMs) +
        " ms (the engine was stopped): the driver waited for the context to go idle, as it does to commit a "
        "context-wide resource lazily (module loading, the printf FIFO, the device heap, local memory); commit it "
        "before the engine starts");
  }
  std::lock_guard<std::mutex> lock(g_devices_mu);
  g_probed[cfg_.device] = true;
}

void GpuEngine::request_stop() {
  if (h_flags_) __atomic_store_n(&h_flags_[0], 1, __ATOMIC_RELEASE);
}

void GpuEngine::stop(int timeout_ms) {
  if (!running_) return;
  request_stop();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  cudaError_t e;
  while ((e = cudaStreamQuery(static_cast<cudaStream_t>(stream_))) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("gpu engine: kernel did not stop within " + std::to_string(timeout_ms) + " ms");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  running_ = false;
  {
    std::lock_guard<std::mutex> lock(g_devices_mu);
    --g_running[cfg_.device];
  }
  check(e, "engine kernel");
  int saved = 0;
  check(cudaGetDevice(&saved), "cudaGetDevice");
  check(cudaSetDevice(cfg_.device), "cudaSetDevice(engine)");
  std::vector<Counters> per(total_warps_);
  check(cudaMemcpy(per.data(), d_counters_, sizeof(Counters) * total_warps_, cudaMemcpyDeviceToHost), "counters");
  std::vector<QpState> states(num_qps_);
  if (num_qps_) check(cudaMemcpy(states.data(), d_qps_, sizeof(QpState) * num_qps_, cudaMemcpyDeviceToHost), "qps");
  print_phases(total_warps_);
  cudaSetDevice(saved);
  for (uint32_t i = 0; i < num_qps_; ++i) *nic_.qp_state(i) = states[i];
  Counters sum;
  for (const auto& c : per) sum += c;
  last_counters_ = sum;
  if (h_flags_[1]) throw std::runtime_error("gpu engine: watchdog deadline reached before stop()");
}

EngineDeadline::EngineDeadline(GpuEngine& engine, int timeout_ms) {
  watcher_ = std::thread([this, &engine, timeout_ms] {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return released_; })) {
      fired_.store(true);
      engine.request_stop();  // a host store: no CUDA call, which could wait behind the blocked one
    }
  });
}

EngineDeadline::~EngineDeadline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
  }
  cv_.notify_all();
  watcher_.join();
}

}  // namespace gicomm::softnic
