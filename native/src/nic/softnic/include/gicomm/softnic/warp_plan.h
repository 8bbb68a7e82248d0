// How the gpu engine's warp divides one pass over a QP's send queue, __host__ __device__ so the CPU
// tests run exactly the decisions the GPU makes (tests/softnic/test_warp_plan.cpp).
//
// A pass ("chunk") works on a window of up to kWindowWqebbs WQEBBs from the QP's consumer index:
//   1. the warp reads the window (lane l's first segment is the would-be ctrl segment of WQEBB l);
//   2. plan_window walks the WQEs from the head by their ds (1..kMaxWqeBBs WQEBBs each): which lanes
//      start a WQE, and how far the whole WQEs in the window reach;
//   3. every start lane checks its WQE (execute_wqe) and records its effect (a copy or an atomic);
//      executable_prefix keeps the WQEs before the first one that failed its checks (that one goes
//      to the serial path when it reaches the head, as today);
//   4. effects: next_epoch splits the prefix at atomics, so an atomic takes effect after every
//      write before it (put-with-signal) and atomics of a QP run in order; the copies of an epoch are
//      cut into 16-byte destination blocks (plan_copy_block) that the 32 lanes share, several
//      blocks in flight per lane (copy_blocks), whatever the payload sizes; copies of whole aligned
//      blocks, all of one length, take a shorter road (aligned_round);
//   5. CQEs: cqe_slot says which lane writes which CQE (each signaled WQE its own, in order; a
//      collapsed CQ only the newest).
// A helped block's pass may be deferred (run_pass_effects): its copies left to the block's helpers,
// its CQEs staged until they are done. When more than one window is rung, a helped block's warps
// share the pass instead (a block pass: sub_window_count, block_pass_warps).
#pragma once

#include <cstdint>

#include "gicomm/common/hd.h"
#include "gicomm/mlx5/wqe.h"

#if defined(__CUDA_ARCH__)  // the device pass; host compilers do not know the pragma
#define GICOMM_UNROLL _Pragma("unroll")
#else
#define GICOMM_UNROLL
#endif

namespace gicomm::softnic {

constexpr uint32_t kWarpLanes = 32;
constexpr uint32_t kWindowWqebbs = kWarpLanes;  // one WQEBB per lane: WQE starts are lane masks
static_assert(kWindowWqebbs >= mlx5::kMaxWqeBBs, "a window holds at least one whole WQE");
// Segments of a window buffer: a WqeImage viewed at any lane stays inside it.
constexpr uint32_t kWindowSegs = (kWindowWqebbs + mlx5::kMaxWqeBBs - 1) * 4;

GICOMM_HD uint32_t lanes_below(uint32_t lane) { return lane >= 32 ? ~0u : (1u << lane) - 1u; }
GICOMM_HD uint32_t lowest_lane(uint32_t mask) {  // 32 when mask == 0
#if defined(__CUDA_ARCH__)
  return mask == 0 ? 32u : static_cast<uint32_t>(__ffs(mask)) - 1u;
#else
  return mask == 0 ? 32u : static_cast<uint32_t>(__builtin_ctz(mask));
#endif
}
GICOMM_HD uint32_t popcount32(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint32_t>(__popc(v));
#else
  return static_cast<uint32_t>(__builtin_popcount(v));
#endif
}

// WQEBBs to read for a pass: the doorbell covers WQEs starting at offsets < avail; the last of them
// may reach kMaxWqeBBs - 1 WQEBBs further. At most `limit`: kWindowWqebbs for a warp's own pass (a
// WQE reaching past it is the next pass's), kSubWindowReads for a block pass's sub-window (a WQE
// that starts in it is its own, wherever it ends). Never more than the ring (a smaller ring would
// alias).
constexpr uint32_t kSubWindowReads = kWindowWqebbs + mlx5::kMaxWqeBBs - 1;
static_assert(kSubWindowReads * 4 <= kWindowSegs, "a sub-window's reads fit the window buffer");
GICOMM_HD uint32_t window_reads(uint32_t avail, uint32_t wqe_cnt, uint32_t limit = kWindowWqebbs) {
  uint32_t n = avail + mlx5::kMaxWqeBBs - 1;
  if (n > limit) n = limit;
  if (n > wqe_cnt) n = wqe_cnt;
  return n;
}

struct WindowPlan {
  uint32_t starts;  // lane l starts a WQE
  uint32_t end;     // WQEBBs from the head covered by those WQEs
};

// `ctrl_ok`: lanes whose first segment is a ctrl segment naming the expected WQE index and QP with a
// ds of 1..kMaxDs; `nbb_of(l)`: the WQEBBs of that WQE. A WQE is taken when it starts at the head
// (lane `first`: 0, or a block pass's sub-window's entry) or right after the previous one, starts
// before `avail` (the doorbell's last WQE) and lies wholly in the `n_read` WQEBBs read. The walk
// stops at the first lane that is not a good ctrl segment: that WQE (stale, malformed, or another
// pass's) is the next pass's head. `end` counts from lane 0.
template <class NbbOf>
GICOMM_HD WindowPlan plan_window(uint32_t ctrl_ok, NbbOf nbb_of, uint32_t n_read, uint32_t avail, uint32_t first = 0) {
  WindowPlan p{0, first};
  uint32_t s = first;
  while (s < kWarpLanes && s < n_read && s < avail && ((ctrl_ok >> s) & 1u)) {
    const uint32_t e = s + nbb_of(s);
    if (e > n_read) break;
    p.starts |= 1u << s;
    s = e;
  }
  p.end = s;
  return p;
}

// The WQEBB count of lane l from two ballots of (nbb - 1)'s bits (kMaxWqeBBs <= 4).
static_assert(mlx5::kMaxWqeBBs <= 4, "two bit-planes carry a WQE's WQEBB count");
struct NbbPlanes {
  uint32_t bit0, bit1;
  GICOMM_HD uint32_t operator()(uint32_t l) const { return 1u + ((bit0 >> l) & 1u) + 2u * ((bit1 >> l) & 1u); }
};

// plan_window for WQEBB counts from ballots, with the common case first: when every good ctrl
// segment is a one-WQEBB WQE the starts are the run of good lanes from the head (no walk).
GICOMM_HD WindowPlan plan_window_planes(uint32_t ctrl_ok, const NbbPlanes& nbb, uint32_t n_read, uint32_t avail,
                                        uint32_t first = 0) {
  if (((nbb.bit0 | nbb.bit1) & ctrl_ok) == 0) {
    uint32_t end = lowest_lane(~(ctrl_ok | lanes_below(first)));
    if (end > n_read) end = n_read;
    if (end > avail) end = avail;
    if (end < first) end = first;
    return WindowPlan{lanes_below(end) & ~lanes_below(first), end};
  }
  return plan_window(ctrl_ok, nbb, n_read, avail, first);
}

// Where a block pass's sub-window (not the first) starts: the WQE reaching past the previous
// sub-window's end, if any, covers up to kMaxWqeBBs - 1 of its WQEBBs, so its entry is its first
// good ctrl segment among those (kWarpLanes: none). Whether that is where the previous sub-window's
// walk ended is settled after both are checked (block_pass_warps): a payload that looks like a ctrl
// segment can only end the pass there, never be run.
GICOMM_HD uint32_t sub_window_entry(uint32_t ctrl_ok) { return lowest_lane(ctrl_ok & lanes_below(mlx5::kMaxWqeBBs)); }

struct Prefix {
  uint32_t starts;    // WQEs executed in this pass (lane mask)
  uint32_t consumed;  // WQEBBs the consumer index advances (where the run ends, counted from lane 0)
};

// `good`: start lanes whose WQE passed its checks. Everything before the first start that did not
// runs now; that one is left at the next pass's head (the serial path reports or retries it).
GICOMM_HD Prefix executable_prefix(const WindowPlan& p, uint32_t good) {
  const uint32_t bad = p.starts & ~good;
  if (bad == 0) return Prefix{p.starts, p.end};
  const uint32_t cut = lowest_lane(bad);
  return Prefix{p.starts & lanes_below(cut), cut};
}

// ---- effects ----------------------------------------------------------------------------------------
struct Epoch {
  uint32_t copies;     // copy lanes to run now (together)
  uint32_t atomic;     // then this lane's atomic (32: none)
  uint32_t remaining;  // what is left after this epoch
};

// The next step over `remaining` (WQE lanes still to do): every copy before the first atomic, then
// that atomic. Copies of one epoch may land in any order (as a NIC's packets of several writes may);
// an atomic comes after every write before it and before every write after it.
GICOMM_HD Epoch next_epoch(uint32_t remaining, uint32_t copy_lanes, uint32_t atomic_lanes) {
  const uint32_t a = lowest_lane(atomic_lanes & remaining);
  Epoch e;
  e.copies = copy_lanes & remaining & lanes_below(a);
  e.atomic = a;
  e.remaining = a >= 31 ? 0u : remaining & ~lanes_below(a + 1);
  return e;
}

// One payload move of a WQE (an RDMA write: local or inline -> remote; an RDMA read: remote -> local).
struct CopyDesc {
  uint64_t dst = 0;
  uint64_t src = 0;
  uint32_t len = 0;
  uint32_t src_global = 0;  // 1: the source is global memory (loads bypass the caches); 0: the
                            // engine's own copy of the WQE (shared memory: an inline payload)
};

// 16-byte destination blocks a copy touches (the unit the warp shares out).
GICOMM_HD uint32_t copy_block_count(const CopyDesc& d) {
  if (d.len == 0) return 0;
  return static_cast<uint32_t>(((d.dst + d.len - 1) >> 4) - (d.dst >> 4) + 1);
}

// Block j of a copy: the aligned destination block, the valid bytes [lo, hi) in it, and the one or
// two aligned 16-byte source chunks that hold those bytes. A chunk is loaded only when it holds a
// byte of the copy, so no load leaves the pages (or the shared window) of the source range.
struct BlockPlan {
  uint64_t block;    // destination, 16-byte aligned
  uint32_t lo, hi;   // valid destination bytes of the block
  uint64_t chunk;    // first source chunk (16-byte aligned); the second is chunk + 16
  uint32_t shift;    // source byte of destination byte i is byte (shift + i) of chunk:chunk+16
  bool load_first, load_second;
  bool src_global;
};

GICOMM_HD BlockPlan plan_copy_block(const CopyDesc& d, uint32_t j) {
  BlockPlan b;
  b.block = (d.dst & ~uint64_t(15)) + 16ull * j;
  b.lo = j == 0 ? static_cast<uint32_t>(d.dst & 15) : 0u;
  const uint64_t end = d.dst + d.len;
  b.hi = b.block + 16 > end ? static_cast<uint32_t>(end - b.block) : 16u;
  const uint64_t src_base = d.src + (b.block - d.dst);  // source address of block byte 0 (mod 2^64)
  b.shift = static_cast<uint32_t>(src_base & 15);
  b.chunk = src_base - b.shift;
  b.load_first = b.lo < 16 - b.shift;
  b.load_second = b.shift != 0 && b.hi > 16 - b.shift;
  b.src_global = d.src_global != 0;
  return b;
}

struct Bytes16 {
  uint32_t w[4];  // little-endian words: byte k is byte k&3 of word k>>2
};

GICOMM_HD uint32_t pick8(const uint32_t (&w)[8], uint32_t i) {
  // A chain of selects, not an indexed array: a run-time index would put `w` in local memory.
  const uint32_t lo = (i & 2) ? ((i & 1) ? w[3] : w[2]) : ((i & 1) ? w[1] : w[0]);
  const uint32_t hi = (i & 2) ? ((i & 1) ? w[7] : w[6]) : ((i & 1) ? w[5] : w[4]);
  return (i & 4) ? hi : lo;
}

GICOMM_HD uint32_t funnel_right(uint32_t lo, uint32_t hi, uint32_t bits) {  // bits in 0..31
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, bits);
#else
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> bits);
#endif
}

// The 16 destination bytes of a block from its source chunks a:b (bytes shift.. of a, then b).
GICOMM_HD Bytes16 compose_block(const Bytes16& a, const Bytes16& b, uint32_t shift) {
  const uint32_t w[8] = {a.w[0], a.w[1], a.w[2], a.w[3], b.w[0], b.w[1], b.w[2], b.w[3]};
  const uint32_t q = shift >> 2, r = 8 * (shift & 3);
  Bytes16 out;
GICOMM_UNROLL
  for (uint32_t i = 0; i < 4; ++i) {
    const uint32_t lo = pick8(w, i + q);
    out.w[i] = r == 0 ? lo : funnel_right(lo, pick8(w, i + q + 1), r);
  }
  return out;
}

// Stores the valid bytes [lo, hi) of a block: one 16-byte store when whole, else naturally aligned
// pieces of 8, 4, 2, 1 bytes (a partial block never writes outside the copy).
template <class Io>
GICOMM_HD void store_block(Io& io, const BlockPlan& b, const Bytes16& v) {
  if (b.lo == 0 && b.hi == 16) {
    io.store16(b.block, v);
    return;
  }
  uint32_t pos = b.lo;
  while (pos < b.hi) {
    uint32_t size = 8;
    while (size > 1 && ((pos & (size - 1)) != 0 || pos + size > b.hi)) size >>= 1;
    const uint32_t half = pos >> 3;
    const uint64_t word = static_cast<uint64_t>(v.w[2 * half]) | (static_cast<uint64_t>(v.w[2 * half + 1]) << 32);
    io.store(b.block + pos, word >> (8 * (pos & 7)), size);
    pos += size;
  }
}

// Copies up to kBlocks blocks with all their loads issued before any store (one memory round trip
// for all of them, not one each). `block_at(j, &plan)` names the j-th block this lane moves now
// (false: none). Io: Bytes16 load16(uint64_t chunk, bool global); void store16(uint64_t, const
// Bytes16&); void store(uint64_t addr, uint64_t value, uint32_t size).
template <int kBlocks, class Io, class BlockAt>
GICOMM_HD void copy_blocks(Io& io, BlockAt block_at) {
  BlockPlan p[kBlocks] = {};
  Bytes16 a[kBlocks], b[kBlocks];
  bool live[kBlocks] = {};
GICOMM_UNROLL
  for (int j = 0; j < kBlocks; ++j) {
    live[j] = block_at(j, &p[j]);
    a[j] = Bytes16{{0, 0, 0, 0}};
    b[j] = Bytes16{{0, 0, 0, 0}};
    if (live[j] && p[j].load_first) a[j] = io.load16(p[j].chunk, p[j].src_global);
    if (live[j] && p[j].load_second) b[j] = io.load16(p[j].chunk + 16, p[j].src_global);
  }
GICOMM_UNROLL
  for (int j = 0; j < kBlocks; ++j)
    if (live[j]) store_block(io, p[j], compose_block(a[j], b[j], p[j].shift));
}

// Which copy owns unit u (< inclusive[31]) of an epoch: the first lane whose inclusive block prefix
// exceeds u (`inclusive[32]`, non-decreasing). Five fixed steps without branches, so the searches
// of a lane's blocks overlap. Invariant: every lane below k has inclusive[lane] <= u.
GICOMM_HD uint32_t owner_of_block(const uint32_t* inclusive, uint32_t u) {
  uint32_t k = 0;
  GICOMM_UNROLL
  for (uint32_t step = kWarpLanes / 2; step > 0; step >>= 1) k += inclusive[k + step - 1] <= u ? step : 0u;
  return k;
}

// Blocks each lane moves per round of a shared copy: 32 lanes x 8 x 16 B = 4 KiB per round trip.
constexpr int kBlocksPerLane = 8;

// The blocks lane `lane` moves in round `round` of an epoch whose copies are `descs[32]` with block
// prefix `inclusive[32]` (total = inclusive[31]): unit u = round * 32 * kBlocksPerLane + j * 32 +
// lane, so each load instruction of the warp covers 32 consecutive blocks of a copy.
template <class Io>
GICOMM_HD void copy_round(Io& io, const CopyDesc* descs, const uint32_t* inclusive, uint32_t round, uint32_t lane) {
  const uint32_t total = inclusive[kWarpLanes - 1];
  const uint32_t base = round * kWarpLanes * kBlocksPerLane + lane;
  copy_blocks<kBlocksPerLane>(io, [&](int j, BlockPlan* p) {
    const uint32_t u = base + static_cast<uint32_t>(j) * kWarpLanes;
    if (u >= total) return false;
    const uint32_t k = owner_of_block(inclusive, u);
    const uint32_t first = inclusive[k] - copy_block_count(descs[k]);
    *p = plan_copy_block(descs[k], u - first);
    return true;
  });
}

// Rounds of a warp moving `total_blocks` with `blocks_per_lane` in flight per lane.
GICOMM_HD uint32_t rounds_of(uint32_t total_blocks, uint32_t blocks_per_lane) {
  const uint32_t per_round = kWarpLanes * blocks_per_lane;
  return (total_blocks + per_round - 1) / per_round;
}
GICOMM_HD uint32_t copy_rounds(uint32_t total_blocks) { return rounds_of(total_blocks, kBlocksPerLane); }

// What execute_wqe asks of memory for one WQE, recorded instead of done (a Mem for execute_wqe), so
// the warp can perform the effects of a whole pass together. execute_wqe calls at most one effect,
// after every check passed; `calls` > 1 would mean an opcode with several, which the engine leaves
// to the serial path.
struct EffectRecorder {
  enum Kind : uint32_t { kNone = 0, kCopy = 1, kFetchAdd = 2 };
  uint32_t kind = kNone;
  uint32_t calls = 0;
  CopyDesc move;             // kCopy
  uint64_t* remote = nullptr;  // kFetchAdd: the remote word, the addend, where the old value goes
  uint64_t add = 0;
  void* old = nullptr;

  GICOMM_HD void copy(void* dst, const void* src, uint32_t n) {
    ++calls;
    kind = kCopy;
    move.dst = reinterpret_cast<uint64_t>(dst);
    move.src = reinterpret_cast<uint64_t>(src);
    move.len = n;
#if defined(__CUDA_ARCH__)
    move.src_global = __isGlobal(src) ? 1u : 0u;
#else
    move.src_global = 1;
#endif
  }
  GICOMM_HD void fetch_add(uint64_t* p, uint64_t a, void* old_value) {
    ++calls;
    kind = kFetchAdd;
    remote = p;
    add = a;
    old = old_value;
  }
};

// ---- the aligned copies: pointer payloads that start on 16-byte boundaries ------------------------
// An epoch whose copies all start on 16-byte boundaries (source and destination, the source in
// global memory) and have one length of at least one block, as a sweep's pointer writes do: its
// whole blocks laid end to end, unit u is block u % nb of copy u / nb, found by arithmetic instead
// of owner_of_block's search, and moved as it was loaded (no compose_block); a length that ends in
// a partial block leaves that block, its tail, to the copy's own lane (aligned_tail). Not in the
// unrolled round: a partial-block store there raised the engine kernel to 255 registers and halved
// the 4 KiB copy rate on the H200 (18.6 against 36.9 MWQE/s measured side by side), even in an
// instantiation of its own.
GICOMM_HD bool aligned_start(const CopyDesc& d) {
  return d.len >= 16 && d.src_global != 0 && ((d.dst | d.src) & 15) == 0;
}

// The tail of an aligned copy of `nb` whole blocks: block nb, the last len % 16 bytes (false: none).
GICOMM_HD bool aligned_tail(const CopyDesc& d, uint32_t nb, BlockPlan* p) {
  if ((d.len & 15) == 0) return false;
  *p = plan_copy_block(d, nb);
  return true;
}

// Blocks each lane moves per round of aligned copies: 32 lanes x 16 x 16 B = 8 KiB per round trip
// (one warp serves a QP, so its bytes in flight bound the QP's copy rate; 32 would spill the engine
// kernel's registers).
constexpr int kAlignedBlocksPerLane = 16;

// The blocks lane `lane` moves in round `round` of the aligned copies `descs[0..n)` (compacted: the
// epoch's copies in lane order), each of `nb` blocks, `total` = n * nb: unit u = round * 32 *
// kAlignedBlocksPerLane + j * 32 + lane, so each load instruction of the warp covers 32 consecutive
// blocks of a copy. Every load is issued before any store, and none waits on a branch or a
// division: the lane's first unit takes one division, each next one is carried 32 units on, and a
// unit past the end loads the first block of the first copy (memory the copy reads anyway) and
// stores nothing.
template <class Io>
GICOMM_HD void aligned_round(Io& io, const CopyDesc* descs, uint32_t nb, uint32_t total, uint32_t round,
                             uint32_t lane) {
  const uint32_t base = round * kWarpLanes * kAlignedBlocksPerLane + lane;
  uint32_t k = base / nb, b = base - k * nb;
  const uint32_t step_k = kWarpLanes / nb, step_b = kWarpLanes - step_k * nb;
  Bytes16 v[kAlignedBlocksPerLane];
  uint64_t dst[kAlignedBlocksPerLane];
  bool live[kAlignedBlocksPerLane];
GICOMM_UNROLL
  for (int j = 0; j < kAlignedBlocksPerLane; ++j) {
    live[j] = base + static_cast<uint32_t>(j) * kWarpLanes < total;
    const uint32_t kk = live[j] ? k : 0u, bb = live[j] ? b : 0u;
    dst[j] = descs[kk].dst + 16ull * bb;
    v[j] = io.load16(descs[kk].src + 16ull * bb, true);
    b += step_b;
    k += step_k;
    if (b >= nb) {
      b -= nb;
      ++k;
    }
  }
GICOMM_UNROLL
  for (int j = 0; j < kAlignedBlocksPerLane; ++j)
    if (live[j]) io.store16(dst[j], v[j]);
}

GICOMM_HD uint32_t aligned_rounds(uint32_t total_blocks) { return rounds_of(total_blocks, kAlignedBlocksPerLane); }

// ---- the grid's help with long copies -------------------------------------------------------------
// In a launch with at most one QP per block, a block with no QP of its own helps a QP's block move
// its long epochs of aligned copies (gpu_engine.cu, GridQueue): block b >= qps helps the block of QP
// (b - qps) % qps as its helper number (b - qps) / qps, at most kMaxGridHelpers of them, so one QP
// copies with up to 16 SMs instead of one. An epoch goes to the grid when it has at least
// kGridMinRoundsPerWarp rounds per copying warp of its own block (8 KiB a round: 256 KiB with 8
// warps), so a short copy never waits for blocks elsewhere to notice it.
constexpr uint32_t kMaxGridHelpers = 15;
constexpr uint32_t kGridMinRoundsPerWarp = 4;

struct GridRole {
  uint32_t owner;    // the block (and QP) helped
  uint32_t ordinal;  // this block's number among its helpers
  bool helps;
};
GICOMM_HD GridRole grid_role(uint32_t blocks, uint32_t qps, uint32_t block) {
  if (qps == 0 || block < qps || block >= blocks) return GridRole{0u, 0u, false};
  const uint32_t i = block - qps, ordinal = i / qps;
  return GridRole{i % qps, ordinal, ordinal < kMaxGridHelpers};
}
// The helper blocks of QP `owner`'s block.
GICOMM_HD uint32_t grid_helpers(uint32_t blocks, uint32_t qps, uint32_t owner) {
  if (qps == 0 || owner >= qps || blocks <= qps + owner) return 0u;
  const uint32_t n = (blocks - qps - owner - 1) / qps + 1;
  return n < kMaxGridHelpers ? n : kMaxGridHelpers;
}
// Whether an epoch of `rounds` that `local` warps of its own block would copy goes to the grid.
GICOMM_HD bool grid_epoch(uint32_t rounds, uint32_t local, uint32_t helpers) {
  return helpers != 0 && rounds >= kGridMinRoundsPerWarp * local;
}
// A helper block's warp 0 runs the block's side of the queue (gpu_engine.cu, help_grid) and copies
// nothing; its other warps, 1..wpb-1, copy.
GICOMM_HD uint32_t grid_copy_warps(uint32_t wpb) { return wpb - 1u; }
// The rounds of a grid epoch are dealt out like the block's (aligned_rounds_of: first, first + step,
// ...): helper h's copying warp w (1..wpb-1) takes h * (wpb - 1) + w - 1, the owner block's copying
// warps the places after every helper's (the first `share` of them take part, maybe none: they start
// a deferred pass's rounds only after the pass before it was awaited, so they get the fewest), and
// step = grid_step, so every round is moved once.
GICOMM_HD uint32_t grid_first_round(uint32_t wpb, uint32_t ordinal, uint32_t wib) {
  return ordinal * grid_copy_warps(wpb) + (wib - 1u);
}
GICOMM_HD uint32_t grid_owner_first_round(uint32_t helpers, uint32_t wpb, uint32_t mine) {
  return helpers * grid_copy_warps(wpb) + mine;
}
// The owner block's copying warps: `deferred`, warp 0 serves the QP and its other wpb - 1 warps
// copy; else all wpb copy, warp 0 too, right away.
GICOMM_HD uint32_t grid_local_warps(bool deferred, uint32_t wpb) { return deferred ? wpb - 1u : wpb; }
GICOMM_HD uint32_t grid_step(uint32_t share, uint32_t helpers, uint32_t wpb) {
  return share + helpers * grid_copy_warps(wpb);
}
// How many of the owner block's `local` copying warps take rounds of a deferred pass's grid job
// (grid_step's `share`). They start it only after the pass before it was awaited, an epoch's steps
// after the helpers: beside many helper warps they only lengthen the epoch, beside few they add
// copies. So they take part while the helpers' copying warps are fewer than kGridOwnerWarpsRatio
// times theirs (one H200, 2026-12-03: one QP, 105 helper warps, 64 KiB writes 5.73 M WQE/s without
// them and 5.42 with; two QPs, 49 helper warps each, 7.16 without and 8.15 with).
constexpr uint32_t kGridOwnerWarpsRatio = 8;
GICOMM_HD uint32_t grid_deferred_share(uint32_t local, uint32_t helpers, uint32_t wpb) {
  return helpers * grid_copy_warps(wpb) < kGridOwnerWarpsRatio * local ? local : 0u;
}
// The owner block's part in a job of `helpers` helper blocks (none: the block copies alone): how
// many of its copying warps (grid_local_warps) take rounds, and the rounds' step.
struct GridShare {
  uint32_t share, step;
};
GICOMM_HD GridShare grid_share(bool deferred, uint32_t helpers, uint32_t wpb) {
  const uint32_t local = grid_local_warps(deferred, wpb);
  const uint32_t share = helpers != 0 && deferred ? grid_deferred_share(local, helpers, wpb) : local;
  return GridShare{share, grid_step(share, helpers, wpb)};
}

// ---- completions ------------------------------------------------------------------------------------
struct CqeSlot {
  bool write;       // this lane writes a CQE
  uint32_t cq_pi;   // at this CQ producer index (unwrapped)
};

// Lane `lane` of a pass whose signaled WQEs are `signaled` (lane mask), the CQ at producer index
// `cq_pi`: every signaled WQE gets the next CQE in WQE order; a collapsed CQ keeps only the newest,
// so only the last signaled lane writes, at the index the newest would have.
GICOMM_HD CqeSlot cqe_slot(uint32_t lane, uint32_t signaled, uint32_t cq_pi, bool collapsed) {
  CqeSlot s{false, 0};
  if (((signaled >> lane) & 1u) == 0) return s;
  const uint32_t before = popcount32(signaled & lanes_below(lane));
  if (collapsed) {
    if ((signaled & ~lanes_below(lane + 1)) != 0) return s;  // a later signaled lane writes
    s.write = true;
    s.cq_pi = cq_pi + before;
    return s;
  }
  s.write = true;
  s.cq_pi = cq_pi + before;
  return s;
}

// ---- a helped block's deferred passes ---------------------------------------------------------------
// When a block's warp 0 serves one QP and its other warps help it copy (gpu_engine.cu, BlockCopyJob),
// a pass of aligned copies only, at least two rounds long, is deferred: the helpers move its copies
// while warp 0 goes on to the next pass, and its CQEs wait, staged, until those copies are done. The
// order, one function for the gpu engine (whose Block waits at the block's barriers) and
// test_warp_plan (whose helpers move a pass's copies only when it is awaited):
//   - a deferred pass: the pending pass's copies awaited, this pass's copies posted and its tails
//     moved by their own lanes, and only then the pending pass's CQEs published; this pass becomes
//     the pending one (its CQEs go to the staging, not the CQ);
//   - any other pass, the serial path and the end of a doorbell's drain: the pending pass flushed
//     (awaited, then published) before anything else.
// So a CQE never goes out before every payload byte of its pass, and CQEs go out in pass order.
// Block (all of it called by the whole warp, results uniform):
//   bool post_ready()     this pass's copies take the deferred road (and are laid out for it);
//   void await_copies()   the pending pass's copies are done;
//   void post_copies()    this pass's copies handed to the helpers;
//   void move_tails()     this pass's partial last blocks, by their own lanes;
//   void publish_pending(bool& unfenced)   the pending pass's staged CQEs released;
//   void run_effects(bool& unfenced)       the pass's effects in the warp, atomics in order.
// `pending`: a deferred pass waits for its CQEs; `unfenced`: the warp wrote since its last
// system-scope release (the fence an atomic needs after the writes before it).
template <class Block>
GICOMM_HD void flush_pending_pass(Block& b, bool& pending, bool& unfenced) {
  if (!pending) return;
  pending = false;
  b.await_copies();
  b.publish_pending(unfenced);
}

// Whether a pass may be deferred: a helped block's, with copies and no atomic (an atomic needs the
// writes before it done, in the warp). run_pass_effects then asks the Block whether the copies take
// the aligned road, at least two rounds long.
GICOMM_HD bool deferrable_pass(bool helped, uint32_t copy_lanes, uint32_t atomic_lanes) {
  return helped && atomic_lanes == 0 && copy_lanes != 0;
}

// The effects of a pass (`deferrable`: deferrable_pass). Returns whether it was deferred.
template <class Block>
GICOMM_HD bool run_pass_effects(Block& b, bool deferrable, bool& pending, bool& unfenced) {
  if (deferrable && b.post_ready()) {
    const bool had_pending = pending;
    if (had_pending) b.await_copies();
    b.post_copies();
    b.move_tails();  // this pass's own; the await before its CQEs orders them too
    if (had_pending) b.publish_pending(unfenced);
    pending = true;
    unfenced = true;
    return true;
  }
  flush_pending_pass(b, pending, unfenced);
  b.run_effects(unfenced);
  return false;
}

// ---- a block pass: a helped block's warps share its QP's window --------------------------------------
// One warp's pass takes at most kWindowWqebbs WQEBBs, so one warp caps its QP's rate whatever the
// doorbell rang. When a helped block's QP has more than that rung, warp w of the block reads,
// decodes and checks the window at ci + w * kWindowWqebbs (its sub-window: the WQEs that start in
// its kWindowWqebbs WQEBBs from its entry on, sub_window_entry, however far the last one reaches),
// all warps at once. The pass then takes sub-windows 0..k-1 (block_pass_warps): each taken warp
// moves its own payloads; a block barrier; each writes its own CQEs (block_cq_pi, block_cqe_writer);
// a block barrier; the QP advances to the end of the last one taken. Sub-window w is taken only when
// the one before it ran whole (no WQE of it failed its checks, its walk was stopped by nothing but
// its end) up to exactly w's entry, and neither it nor any before it has an atomic: the WQEs taken
// are then exactly those the warp passes would run, one after another, and writes of one pass may
// land in any order. A block pass of one sub-window is warp 0's pass as it would be without the
// others. When warp 0's pass alone would be deferred (its copies spread over the whole block) and
// fewer sub-windows than the block's warps are taken, the copies would run on fewer warps: warp 0's
// pass alone is taken. So it is when its copies would go to the grid (grid_epoch), whatever the
// sub-windows: a block's warps each copying alone move less than the owner and its helper blocks.

// One warp's sub-window after its checks.
struct SubWindow {
  uint32_t first;     // its entry (lane)
  uint32_t end;       // where its run ends (Prefix::consumed, from lane 0)
  uint32_t wqes;      // WQEs in the run (0: none runs, e.g. a bad WQE at its entry)
  uint32_t signaled;  // of them signaled
  uint32_t atomics;   // of them atomics
  uint32_t deferral;  // (the first only) what its pass alone would do: pass_deferral
};

// What warp 0's pass alone would do with its copies (SubWindow::deferral): run them itself, defer
// them to the block's helpers (run_pass_effects), or defer them to the block and its helper blocks.
constexpr uint32_t kPassRuns = 0, kPassDeferred = 1, kPassToGrid = 2;
// `deferrable`: run_pass_effects would defer it (deferrable_pass and aligned copies of two rounds or
// more); `rounds`: its copies' aligned rounds; `local`, `helpers`: as grid_epoch takes them.
GICOMM_HD uint32_t pass_deferral(bool deferrable, uint32_t rounds, uint32_t local, uint32_t helpers) {
  if (!deferrable) return kPassRuns;
  return grid_epoch(rounds, local, helpers) ? kPassToGrid : kPassDeferred;
}

// Sub-windows a block of `warps` warps reads for a pass of `avail` WQEBBs rung (0 or 1: no block
// pass). A sub-window lies wholly in the ring: the WQEBBs read, at most kWindowWqebbs per
// sub-window, never alias the ring's other slots.
GICOMM_HD uint32_t sub_window_count(uint32_t avail, uint32_t wqe_cnt, uint32_t warps) {
  uint32_t n = (avail + kWindowWqebbs - 1) / kWindowWqebbs;
  if (n > wqe_cnt / kWindowWqebbs) n = wqe_cnt / kWindowWqebbs;
  if (n > warps) n = warps;
  return n;
}

// Sub-windows a helped block reads for its next pass: none beyond warp 0's window while the pending
// pass's copies are on the grid (`grid_pending`). A block pass would first wait for them
// (flush_pending_pass) and then, its copies long too, be warp 0's pass alone (block_pass_warps): the
// grid would stand idle through the wait and the sub-windows' checks, every pass.
GICOMM_HD uint32_t pass_sub_windows(uint32_t avail, uint32_t wqe_cnt, uint32_t warps, bool grid_pending) {
  return grid_pending ? 1u : sub_window_count(avail, wqe_cnt, warps);
}

// Sub-windows a block of `warps` warps takes for its pass of the `n` checked (at least 1: warp 0's).
GICOMM_HD uint32_t block_pass_warps(const SubWindow* s, uint32_t n, uint32_t warps) {
  if (s[0].deferral == kPassToGrid) return 1u;
  uint32_t k = 1;
  while (k < n && s[k - 1].end == kWindowWqebbs + s[k].first && s[k - 1].atomics == 0 && s[k].atomics == 0 &&
         s[k].wqes != 0)
    ++k;
  return k < warps && s[0].deferral == kPassDeferred ? 1u : k;
}

// WQEBBs a block pass of k sub-windows advances the QP by.
GICOMM_HD uint32_t block_pass_consumed(const SubWindow* s, uint32_t k) { return (k - 1) * kWindowWqebbs + s[k - 1].end; }

// The CQ producer index of sub-window w's first CQE: the QP's, after the signaled WQEs before it.
GICOMM_HD uint32_t block_cq_pi(const SubWindow* s, uint32_t w, uint32_t cq_pi) {
  for (uint32_t v = 0; v < w; ++v) cq_pi += s[v].signaled;
  return cq_pi;
}

// Whether sub-window w's writers (cqe_slot) write: every one into a CQ of entries; into a collapsed CQ
// only the last taken sub-window with a signaled WQE (the newest CQE of the pass).
GICOMM_HD bool block_cqe_writer(const SubWindow* s, uint32_t k, uint32_t w, bool collapsed) {
  if (!collapsed) return true;
  for (uint32_t v = w + 1; v < k; ++v)
    if (s[v].signaled != 0) return false;
  return true;
}

}  // namespace gicomm::softnic
