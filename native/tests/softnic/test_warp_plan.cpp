// The gpu engine's warp decisions (gicomm/softnic/warp_plan.h), on the CPU: the same functions the
// GPU runs, checked one by one and then composed into a pass exactly as gpu_engine.cu composes them
// (each lane's step run for 32 lanes, ballots as masks). The composed passes must leave memory,
// CQEs, QP state and counters identical to the serial path (service_one_wqe, the cpu engine's
// code) on random send queues: one-WQEBB and 2..4-WQEBB WQEs mixed, inline payloads of 0..220 B,
// pointer payloads of 0..5000 B at every alignment, writes with immediate, fetch-adds, NOPs, DC
// address vectors, WQEs that fail their checks (then the flushes) and stale ctrl segments. Half
// the QPs are a helped block's, whose passes of long aligned copies are deferred (run_pass_effects,
// the order the GPU runs): their copies move only when the next step awaits them, and every staged
// CQE is checked to go out after its pass's last payload byte. A helped block's QP with more than a
// window rung takes block passes (sub-windows checked by the block's warps): their warps' payloads
// land last sub-window first and their CQEs go out last sub-window first, the reverse of the serial
// order, as the GPU's warps may.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "check.h"
#include "gicomm/mlx5/host_post.h"
#include "gicomm/softnic/core.h"
#include "gicomm/softnic/softnic.h"
#include "gicomm/softnic/warp_plan.h"

namespace m = gicomm::mlx5;
namespace sn = gicomm::softnic;
using sn::kWarpLanes;


// ---- the pieces --------------------------------------------------------------------------------------

// The walk over a window, against the WQE boundaries a producer wrote.
static void check_plan_window(std::mt19937& rng) {
  for (int round = 0; round < 20000; ++round) {
    // A run of WQEs of 1..4 WQEBBs from the head; beyond it lanes that are not good ctrl segments.
    uint32_t nbb[kWarpLanes] = {0};
    uint32_t ok = 0, truth_starts = 0, pos = 0;
    const uint32_t wqes = rng() % 33;
    for (uint32_t w = 0; w < wqes && pos < kWarpLanes; ++w) {
      const uint32_t n = 1 + rng() % 4;
      ok |= 1u << pos;
      nbb[pos] = n;
      truth_starts |= 1u << pos;
      for (uint32_t k = 1; k < n && pos + k < kWarpLanes; ++k)
        if (rng() % 8 == 0) ok |= 1u << (pos + k);  // payload that happens to look like a ctrl segment
      for (uint32_t k = 1; k < n && pos + k < kWarpLanes; ++k) nbb[pos + k] = 1 + rng() % 4;
      pos += n;
    }
    const uint32_t n_read = 1 + rng() % kWarpLanes;
    const uint32_t avail = 1 + rng() % 40;
    sn::NbbPlanes planes{0, 0};
    for (uint32_t l = 0; l < kWarpLanes; ++l) {
      if (((ok >> l) & 1u) == 0) continue;
      planes.bit0 |= ((nbb[l] - 1) & 1u) << l;
      planes.bit1 |= (((nbb[l] - 1) >> 1) & 1u) << l;
    }
    const sn::WindowPlan p = sn::plan_window_planes(ok, planes, n_read, avail);
    const sn::WindowPlan g = sn::plan_window(ok, [&](uint32_t l) { return nbb[l]; }, n_read, avail);
    CHECK(p.starts == g.starts && p.end == g.end, "planes plan differs from the walk (round %d)", round);
    // Expected: the producer's WQEs from the head that start before avail and end within n_read.
    uint32_t want = 0, end = 0;
    for (uint32_t s = 0; s < kWarpLanes && ((truth_starts >> s) & 1u); s += nbb[s]) {
      if (s >= avail || s + nbb[s] > n_read) break;
      want |= 1u << s;
      end = s + nbb[s];
    }
    CHECK(p.starts == want && p.end == end, "round %d: starts %08x end %u, expected %08x end %u", round, p.starts,
          p.end, want, end);
  }
  // Hand cases: a 4-WQEBB WQE cut by the window end waits for the next pass; a doorbell naming the
  // middle of a WQE still takes that WQE whole (as the serial path does).
  const uint32_t four[kWarpLanes] = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
                                     4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
  auto nbb4 = [&](uint32_t l) { return four[l]; };
  sn::WindowPlan p = sn::plan_window(0x11111111u, nbb4, 30, 40);
  CHECK(p.starts == 0x01111111u && p.end == 28, "4-WQEBB WQEs cut at 30: %08x %u", p.starts, p.end);
  p = sn::plan_window(0x11111111u, nbb4, 32, 2);
  CHECK(p.starts == 1u && p.end == 4, "doorbell inside WQE 0: %08x %u", p.starts, p.end);
  CHECK(sn::window_reads(1, 1024) == 4 && sn::window_reads(30, 1024) == 32 && sn::window_reads(100, 16) == 16,
        "window_reads");
}

static void check_prefix_epochs_slots(std::mt19937& rng) {
  sn::WindowPlan p{0x1111u, 16};
  sn::Prefix x = sn::executable_prefix(p, 0x1111u);
  CHECK(x.starts == 0x1111u && x.consumed == 16, "all good");
  x = sn::executable_prefix(p, 0x1011u);
  CHECK(x.starts == 0x11u && x.consumed == 8, "cut at the bad start 8: %08x %u", x.starts, x.consumed);
  x = sn::executable_prefix(p, 0x1110u);
  CHECK(x.starts == 0 && x.consumed == 0, "bad head: nothing now");
  for (int round = 0; round < 20000; ++round) {
    const uint32_t lanes = static_cast<uint32_t>(rng()) | 1u;
    const uint32_t atomics = lanes & static_cast<uint32_t>(rng()) & static_cast<uint32_t>(rng());
    const uint32_t copies = lanes & ~atomics & static_cast<uint32_t>(rng());
    uint32_t remaining = lanes, seen_copies = 0, seen_atomics = 0;
    int last_atomic = -1, steps = 0;
    while (remaining != 0 && steps++ < 40) {
      const sn::Epoch e = sn::next_epoch(remaining, copies, atomics);
      // Copies of the epoch lie after the previous atomic and before this one.
      CHECK((e.copies & sn::lanes_below(static_cast<uint32_t>(last_atomic + 1))) == 0 &&
                (e.atomic == 32 || (e.copies & ~sn::lanes_below(e.atomic)) == 0),
            "epoch order (round %d)", round);
      CHECK((e.copies & seen_copies) == 0, "a copy ran twice");
      seen_copies |= e.copies;
      if (e.atomic < 32) {
        CHECK(static_cast<int>(e.atomic) > last_atomic, "atomics out of order");
        last_atomic = static_cast<int>(e.atomic);
        seen_atomics |= 1u << e.atomic;
      }
      remaining = e.remaining;
    }
    CHECK(seen_copies == copies && seen_atomics == atomics && remaining == 0, "epochs lost work (round %d)", round);
    // CQE slots: one per signaled lane in order; a collapsed CQ only the last, at the newest index.
    const uint32_t signaled = static_cast<uint32_t>(rng()) & lanes;
    const uint32_t pi = static_cast<uint32_t>(rng());
    uint32_t k = 0, writers = 0;
    for (uint32_t l = 0; l < kWarpLanes; ++l) {
      const sn::CqeSlot s = sn::cqe_slot(l, signaled, pi, false);
      CHECK(s.write == (((signaled >> l) & 1u) != 0) && (!s.write || s.cq_pi == pi + k), "cqe slot lane %u", l);
      k += s.write;
      const sn::CqeSlot c = sn::cqe_slot(l, signaled, pi, true);
      if (c.write) {
        ++writers;
        CHECK(l == 31u - static_cast<uint32_t>(__builtin_clz(signaled)) &&
                  c.cq_pi == pi + static_cast<uint32_t>(__builtin_popcount(signaled)) - 1,
              "collapsed CQE slot lane %u", l);
      }
    }
    CHECK(writers == (signaled != 0 ? 1u : 0u), "collapsed CQ: %u writers", writers);
  }
}

// A block pass's rules (warp_plan.h): how many sub-windows, which it takes, where each one's CQEs go.
static void check_block_pass_rules(std::mt19937& rng) {
  CHECK(sn::sub_window_count(32, 256, 8) == 1 && sn::sub_window_count(33, 256, 8) == 2 &&
            sn::sub_window_count(256, 256, 8) == 8 && sn::sub_window_count(256, 256, 3) == 3,
        "sub-windows: one per rung window, at most one per warp");
  CHECK(sn::sub_window_count(300, 64, 8) == 2, "sub-windows never past the ring (a doorbell rung too far)");
  CHECK(sn::pass_sub_windows(256, 256, 8, false) == 8 && sn::pass_sub_windows(256, 256, 8, true) == 1,
        "no block pass while the pending pass's copies are on the grid");
  // {first, end, wqes, signaled, atomics, deferral}
  const sn::SubWindow whole{0, 32, 32, 4, 0, 0}, cut{0, 30, 10, 1, 0, 0}, atomic{0, 32, 20, 2, 1, 0},
      empty{0, 0, 0, 0, 0, 0}, past{0, 33, 11, 0, 0, 0}, entry1{1, 32, 31, 0, 0, 0};
  const sn::SubWindow a[] = {whole, whole, cut, whole};
  CHECK(sn::block_pass_warps(a, 4, 8) == 3, "a sub-window that ran short ends the pass after it");
  CHECK(sn::block_pass_warps(a, 1, 8) == 1, "one sub-window checked");
  CHECK(sn::block_pass_consumed(a, 3) == 64 + 30, "the pass ends where its last sub-window's run ends");
  const sn::SubWindow b[] = {whole, atomic, whole};
  CHECK(sn::block_pass_warps(b, 3, 8) == 1, "a sub-window with an atomic is not taken after another");
  const sn::SubWindow c[] = {atomic, whole};
  CHECK(sn::block_pass_warps(c, 2, 8) == 1, "an atomic in the first sub-window: its warp alone");
  const sn::SubWindow d[] = {whole, whole, empty, whole};
  CHECK(sn::block_pass_warps(d, 4, 8) == 2, "a sub-window with nothing to run (a bad WQE at its head) is not taken");
  const sn::SubWindow e[] = {past, entry1, past, whole};
  CHECK(sn::block_pass_warps(e, 4, 8) == 3 && sn::block_pass_consumed(e, 3) == 64 + 33,
        "a WQE reaching past a sub-window's end: the next is taken from exactly where it ends");
  const sn::SubWindow f[] = {past, whole};
  CHECK(sn::block_pass_warps(f, 2, 8) == 1, "an entry that is not where the previous run ended is not taken");
  sn::SubWindow g[8] = {whole, whole, whole, whole, whole, whole, whole, whole};
  g[0].deferral = sn::kPassDeferred;
  CHECK(sn::block_pass_warps(g, 3, 8) == 1 && sn::block_pass_warps(g, 8, 8) == 8,
        "warp 0's deferrable pass alone unless every warp of the block takes a sub-window");
  g[0].deferral = sn::kPassToGrid;
  CHECK(sn::block_pass_warps(g, 3, 8) == 1 && sn::block_pass_warps(g, 8, 8) == 1,
        "warp 0's pass alone when its copies go to the grid, even with every warp taking a sub-window");
  CHECK(sn::pass_deferral(false, 1000, 7, 15) == sn::kPassRuns && sn::pass_deferral(true, 27, 7, 15) == sn::kPassDeferred &&
            sn::pass_deferral(true, 28, 7, 15) == sn::kPassToGrid && sn::pass_deferral(true, 1000, 7, 0) == sn::kPassDeferred,
        "a deferrable pass goes to the grid as grid_epoch says (4 rounds per local warp, helpers present)");
  for (int round = 0; round < 2000; ++round) {
    sn::SubWindow s[8];
    const uint32_t n = 1 + rng() % 8;
    uint32_t end = 32;  // each sub-window entered where the one before ended
    for (uint32_t v = 0; v < n; ++v) {
      const uint32_t first = v == 0 ? 0u : end - 32, next_end = 32 + rng() % 4;
      s[v] = sn::SubWindow{first, next_end, 1 + uint32_t(rng() % 32), uint32_t(rng() % 3), 0, 0};
      end = next_end;
    }
    const uint32_t k = sn::block_pass_warps(s, n, 8);
    CHECK(k == n, "chained whole sub-windows without atomics are all taken (%u of %u)", k, n);
    const uint32_t pi = static_cast<uint32_t>(rng());
    uint32_t expect = pi, last_signaling = n;
    for (uint32_t v = 0; v < n; ++v) {
      CHECK(sn::block_cq_pi(s, v, pi) == expect, "CQ index of sub-window %u", v);
      expect += s[v].signaled;
      if (s[v].signaled) last_signaling = v;
      CHECK(sn::block_cqe_writer(s, n, v, false), "a CQ of entries: every sub-window writes");
    }
    for (uint32_t v = 0; v < n; ++v)
      CHECK(sn::block_cqe_writer(s, n, v, true) == (v >= last_signaling || last_signaling == n),
            "a collapsed CQ: only the last sub-window that signals writes (sub-window %u)", v);
  }
}

// Host memory behind copy_blocks: loads and stores of the host, with the loads checked against the
// readable ranges (a chunk must lie inside one) and every stored byte counted.
struct CheckIo {
  std::vector<std::pair<const uint8_t*, size_t>> readable;
  std::vector<uint8_t>* writes = nullptr;  // per destination byte (relative to `dst_base`)
  const uint8_t* dst_base = nullptr;
  int bad_loads = 0;
  sn::Bytes16 load16(uint64_t chunk, bool) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(chunk);
    bool inside = false;
    for (const auto& [base, len] : readable) inside = inside || (p >= base && p + 16 <= base + len);
    sn::Bytes16 v{{0, 0, 0, 0}};
    if (!inside) {
      ++bad_loads;
      return v;
    }
    for (int k = 0; k < 4; ++k) std::memcpy(&v.w[k], p + 4 * k, 4);
    return v;
  }
  void count(uint64_t a, uint32_t n) {
    if (writes == nullptr) return;
    for (uint32_t i = 0; i < n; ++i) ++(*writes)[reinterpret_cast<const uint8_t*>(a) - dst_base + i];
  }
  void store16(uint64_t a, const sn::Bytes16& v) {
    CHECK((a & 15) == 0, "16-byte store to an unaligned address");
    std::memcpy(reinterpret_cast<void*>(a), &v, 16);
    count(a, 16);
  }
  void store(uint64_t a, uint64_t v, uint32_t size) {
    CHECK(size == 1 || size == 2 || size == 4 || size == 8, "store of %u bytes", size);
    CHECK((a & (size - 1)) == 0, "unaligned %u-byte store", size);
    std::memcpy(reinterpret_cast<void*>(a), &v, size);
    count(a, size);
  }
};

// Block plans at every alignment: loads only touch chunks holding a byte of the copy's source, the
// destination gets exactly the source bytes, every byte once, nothing outside the copy.
static void check_copy_blocks(std::mt19937& rng) {
  alignas(64) static uint8_t src[8192], dst[8192];
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> writes(sizeof dst);
  for (int round = 0; round < 4000; ++round) {
    sn::CopyDesc d;
    d.len = round < 64 ? static_cast<uint32_t>(round) : rng() % 600;
    const uint32_t so = rng() % 64, doff = rng() % 64;
    d.src = reinterpret_cast<uint64_t>(src + 2048 + so);
    d.dst = reinterpret_cast<uint64_t>(dst + 2048 + doff);
    d.src_global = 1;
    std::memset(dst, 0xee, sizeof dst);
    std::fill(writes.begin(), writes.end(), 0);
    CheckIo io;
    // The one readable range: the 16-byte chunks that hold a byte of the source.
    const uint64_t first = d.src & ~uint64_t(15), last = (d.src + d.len + 15) & ~uint64_t(15);
    io.readable = {{reinterpret_cast<const uint8_t*>(first), static_cast<size_t>(last - first)}};
    io.writes = &writes;
    io.dst_base = dst;
    const uint32_t blocks = sn::copy_block_count(d);
    CHECK(blocks == (d.len == 0 ? 0u : static_cast<uint32_t>((d.dst + d.len - 1) / 16 - d.dst / 16 + 1)),
          "block count");
    for (uint32_t j = 0; j < blocks; ++j) {
      const sn::BlockPlan bp = sn::plan_copy_block(d, j);
      CHECK(bp.lo < bp.hi && bp.hi <= 16 && (bp.block & 15) == 0, "block %u of %u: [%u, %u)", j, blocks, bp.lo, bp.hi);
      sn::copy_blocks<1>(io, [&](int, sn::BlockPlan* p) {
        *p = bp;
        return true;
      });
    }
    CHECK(io.bad_loads == 0, "round %d: %d loads outside the source's chunks (len %u, src +%u)", round, io.bad_loads,
          d.len, so);
    bool right = std::memcmp(dst + 2048 + doff, src + 2048 + so, d.len) == 0;
    for (size_t i = 0; i < sizeof dst; ++i) {
      const bool in = i >= 2048 + doff && i < 2048 + doff + d.len;
      right = right && writes[i] == (in ? 1 : 0) && (in || dst[i] == 0xee);
    }
    CHECK(right, "round %d: copy of %u B (src +%u, dst +%u) wrong", round, d.len, so, doff);
  }
  // owner_of_block against a scan, zero-block lanes included.
  for (int round = 0; round < 2000; ++round) {
    uint32_t inc[kWarpLanes], sum = 0;
    for (auto& v : inc) v = sum += (rng() % 3 == 0) ? 0 : rng() % 300;
    for (uint32_t u = 0; u < sum; u += 1 + rng() % 7) {
      uint32_t want = 0;
      while (inc[want] <= u) ++want;
      CHECK(sn::owner_of_block(inc, u) == want, "owner of unit %u: %u, expected %u", u, sn::owner_of_block(inc, u), want);
    }
  }
}

// ---- a whole pass, composed as gpu_engine.cu composes it ---------------------------------------------

struct HostMem {
  void copy(void* dst, const void* src, uint32_t n) { std::memcpy(dst, src, n); }
  void fetch_add(uint64_t* p, uint64_t add, void* old) {
    const uint64_t v = *p;
    *p = v + add;
    std::memcpy(old, &v, 8);
  }
  void read_wqebb(m::Seg16* dst, const uint8_t* src) { std::memcpy(dst, src, m::kSendWqeBB); }
  void acquire() {}
  void publish_cqe(m::Cqe64* dst, const m::Cqe64& body, uint32_t tail) {
    std::memcpy(dst, &body, 60);
    dst->w[15] = tail;
  }
};

struct PassStats {
  uint64_t passes = 0, serial = 0, shared_copies = 0, aligned_copies = 0, aligned_tails = 0, own_copies = 0,
           multi_wqebb = 0, atomic_epochs = 0;
  // Block passes: taken (two sub-windows or more), of four or more, those that left checked
  // sub-windows to the next pass, passes whose sub-windows were checked and only warp 0's taken, and
  // block passes into a collapsed CQ with signaled WQEs in two sub-windows or more; sub-windows taken
  // from an entry past their first lane (the WQE before reached into them).
  uint64_t block_passes = 0, block_wide = 0, block_cut = 0, block_alone = 0, block_collapsed = 0, block_entries = 0;
  // A helped block's deferred passes: all of them, those with tails, those whose CQEs went out, and
  // of those the ones published after the next pass posted its copies (the rest were flushed: the
  // next pass not deferred, the serial path, the drain's end).
  uint64_t deferred = 0, deferred_tails = 0, published = 0, published_after_post = 0;
  uint64_t flushed() const { return published - published_after_post; }
};

// The copies of lanes `lanes` compacted in lane order (aligned_epoch's layout), and whether they
// take the aligned road: all from and to 16-byte boundaries, all of one length.
struct AlignedPack {
  sn::CopyDesc packed[kWarpLanes];
  uint32_t len0 = 0, nb = 0, total = 0;
  bool aligned = true;
  AlignedPack(uint32_t lanes, const sn::EffectRecorder* rec) {
    uint32_t n = 0;
    for (uint32_t l = 0; l < kWarpLanes; ++l) {
      if (((lanes >> l) & 1u) == 0) continue;
      if (n == 0) len0 = rec[l].move.len;
      aligned = aligned && sn::aligned_start(rec[l].move) && rec[l].move.len == len0;
      packed[n++] = rec[l].move;
    }
    nb = len0 / 16;
    total = n * nb;
  }
  // They take the deferred road (EngineBlock::post_ready: aligned_epoch with two rounds at least).
  bool deferrable() const { return aligned && nb != 0 && sn::aligned_rounds(total) >= 2; }
};

// Each copy lane's partial last block (aligned_tails).
static void move_aligned_tails(CheckIo& io, uint32_t lanes, const sn::EffectRecorder* rec, uint32_t nb) {
  for (uint32_t l = 0; l < kWarpLanes; ++l)
    if ((lanes >> l) & 1u)
      sn::copy_blocks<1>(io, [&](int, sn::BlockPlan* p) { return sn::aligned_tail(rec[l].move, nb, p); });
}

// warp_copy: payloads of at most one block each by their own lanes; whole aligned blocks of one
// length by aligned_round; else the blocks dealt out.
static void sim_warp_copy(uint32_t lanes, const sn::EffectRecorder* rec, CheckIo& io, PassStats& st) {
  uint32_t blocks[kWarpLanes];
  bool small = true;
  for (uint32_t l = 0; l < kWarpLanes; ++l) {
    blocks[l] = ((lanes >> l) & 1u) ? sn::copy_block_count(rec[l].move) : 0u;
    small = small && blocks[l] <= 1;
  }
  if (small) {
    ++st.own_copies;
    for (uint32_t l = 0; l < kWarpLanes; ++l)
      sn::copy_blocks<1>(io, [&](int, sn::BlockPlan* p) {
        if (blocks[l] == 0) return false;
        *p = sn::plan_copy_block(rec[l].move, 0);
        return true;
      });
    return;
  }
  // Aligned copies of one length: the compacted copies' whole blocks by arithmetic, the tails by
  // their own lanes.
  const AlignedPack a(lanes, rec);
  if (a.aligned) {
    ++st.aligned_copies;
    if (a.len0 % 16 != 0) ++st.aligned_tails;
    move_aligned_tails(io, lanes, rec, a.nb);
    for (uint32_t r = 0; r < sn::aligned_rounds(a.total); ++r)
      for (uint32_t l = 0; l < kWarpLanes; ++l) sn::aligned_round(io, a.packed, a.nb, a.total, r, l);
    return;
  }
  ++st.shared_copies;
  sn::CopyDesc descs[kWarpLanes];
  uint32_t inclusive[kWarpLanes], sum = 0;
  for (uint32_t l = 0; l < kWarpLanes; ++l) {
    descs[l] = ((lanes >> l) & 1u) ? rec[l].move : sn::CopyDesc{};
    inclusive[l] = sum += blocks[l];
  }
  const uint32_t rounds = sn::copy_rounds(inclusive[kWarpLanes - 1]);
  for (uint32_t r = 0; r < rounds; ++r)
    for (uint32_t l = 0; l < kWarpLanes; ++l) sn::copy_round(io, descs, inclusive, r, l);
}

// A helped block across passes (gpu_engine.cu's BlockShared): the copies posted to its helpers,
// which this model moves only when warp 0 awaits them (as late as a GPU's helpers could finish),
// and the pending pass's staged CQEs with that pass's copies, checked to have landed before the
// CQEs go out.
struct SimBlock {
  uint32_t warps = 8;  // the block's warps (its sub-windows of a block pass)
  uint32_t grid_helpers = 0;  // its helper blocks (grid_helpers): a long pass goes to them, not a block pass
  sn::CopyDesc job[kWarpLanes];
  uint32_t job_nb = 0, job_total = 0;
  bool posted = false;
  // The posted copies are the grid's (as post_copies decides on the GPU: grid_epoch).
  bool job_on_grid() const { return posted && sn::grid_epoch(sn::aligned_rounds(job_total), warps - 1u, grid_helpers); }
  struct Staged {
    m::Cqe64* dst;
    m::Cqe64 body;
    uint32_t tail;
  };
  std::vector<Staged> staged;            // the pending pass's CQEs
  std::vector<sn::CopyDesc> staged_copies;  // its payloads (a deferred pass always has some)
};

// complete_wqe's memory for a deferred pass: its CQEs to the block's staging.
struct SimStaging {
  SimBlock* b;
  void publish_cqe(m::Cqe64* dst, const m::Cqe64& body, uint32_t tail) { b->staged.push_back({dst, body, tail}); }
};

// warp_plan.h's Block for the simulated warp (gpu_engine.cu's EngineBlock): a flush needs only
// `blk`, `io` and `st`.
struct SimPass {
  SimBlock* blk;  // null: a warp that copies alone
  CheckIo& io;
  PassStats& st;
  const sn::EffectRecorder* rec;
  uint32_t starts, copy_lanes, atomic_lanes;
  AlignedPack epoch{0u, nullptr};  // this pass's copies (post_ready)

  SimPass(SimBlock* b, CheckIo& i, PassStats& s, const sn::EffectRecorder* r = nullptr, uint32_t st_lanes = 0,
          uint32_t copies = 0, uint32_t atomics = 0)
      : blk(b), io(i), st(s), rec(r), starts(st_lanes), copy_lanes(copies), atomic_lanes(atomics) {}

  bool post_ready() {
    epoch = AlignedPack(copy_lanes, rec);
    return epoch.deferrable();
  }
  void await_copies() {
    CHECK(blk->posted, "await with no copies posted");
    for (uint32_t r = 0; r < sn::aligned_rounds(blk->job_total); ++r)
      for (uint32_t l = 0; l < kWarpLanes; ++l) sn::aligned_round(io, blk->job, blk->job_nb, blk->job_total, r, l);
    blk->posted = false;
  }
  void post_copies() {
    CHECK(!blk->posted, "copies posted over copies not yet awaited");
    std::copy(epoch.packed, epoch.packed + kWarpLanes, blk->job);
    blk->job_nb = epoch.nb;
    blk->job_total = epoch.total;
    blk->posted = true;
    ++st.deferred;
    st.published_after_post += !blk->staged_copies.empty();  // run_pass_effects publishes it next
  }
  void move_tails() {
    if (epoch.len0 % 16 != 0) ++st.deferred_tails;
    move_aligned_tails(io, copy_lanes, rec, epoch.nb);
  }
  void publish_pending(bool& unfenced) {
    for (const sn::CopyDesc& c : blk->staged_copies)
      CHECK(std::memcmp(reinterpret_cast<const void*>(c.dst), reinterpret_cast<const void*>(c.src), c.len) == 0,
            "a staged CQE went out before its pass's %u-byte payload landed", c.len);
    HostMem mem;
    for (const SimBlock::Staged& c : blk->staged) mem.publish_cqe(c.dst, c.body, c.tail);
    ++st.published;
    blk->staged.clear();
    blk->staged_copies.clear();
    unfenced = false;
  }
  void run_effects(bool& unfenced) {
    HostMem mem;
    uint32_t remaining = starts;
    while (remaining != 0) {
      const sn::Epoch e = sn::next_epoch(remaining, copy_lanes, atomic_lanes);
      if (e.copies != 0) sim_warp_copy(e.copies, rec, io, st);
      if (e.atomic < kWarpLanes) {
        ++st.atomic_epochs;
        mem.fetch_add(rec[e.atomic].remote, rec[e.atomic].add, rec[e.atomic].old);
      }
      remaining = e.remaining;
    }
    unfenced = true;
  }
};

// A helped block's warp state between passes (gpu_engine.cu: `pending`, `unfenced`).
struct SimWarp {
  SimBlock* blk = nullptr;
  bool pending = false, unfenced = false;
  void flush(CheckIo& io, PassStats& st) {
    SimPass b{blk, io, st};
    sn::flush_pending_pass(b, pending, unfenced);
  }
};

// Steps 1-3 of a pass (gpu_engine.cu's check_window), lane by lane, over the window of `avail`
// WQEBBs rung from `ci`. Stays in place: inline payloads are copied from its window.
struct SimChecked {
  alignas(16) m::Seg16 window[sn::kWindowSegs];
  uint32_t first = 0;
  sn::Prefix pre{0, 0};
  sn::EffectRecorder rec[kWarpLanes];
  sn::ExecResult r[kWarpLanes];
  uint32_t copy_lanes = 0, atomic_lanes = 0, signaled = 0;
  uint64_t bytes = 0;
  // The block pass's view of it; `deferral`: what its pass alone would do (pass_deferral; asked of
  // warp 0's only).
  sn::SubWindow sub(uint32_t deferral = sn::kPassRuns) const {
    return sn::SubWindow{first,
                         pre.consumed,
                         static_cast<uint32_t>(__builtin_popcount(pre.starts)),
                         static_cast<uint32_t>(__builtin_popcount(signaled)),
                         static_cast<uint32_t>(__builtin_popcount(atomic_lanes)),
                         deferral};
  }
};

static void sim_check_window(const sn::QpState& q, const sn::Tables& t, uint32_t ci, uint32_t avail, uint32_t limit,
                             bool find_entry, SimChecked& c) {
  const uint32_t n_read = sn::window_reads(avail, q.sq.wqe_cnt, limit);
  // 1. The window (lanes not read keep garbage, as shared memory would).
  std::memset(c.window, 0xcd, sizeof c.window);
  for (uint32_t s = 0; s < 4 * sn::kSubWindowReads; ++s)
    if (s / 4 < n_read) std::memcpy(&c.window[s], m::wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, ci + s / 4) + 16 * (s % 4), 16);
  // 2. Starts.
  uint32_t ok = 0;
  sn::NbbPlanes planes{0, 0};
  for (uint32_t lane = 0; lane < kWarpLanes; ++lane) {
    bool ctrl_ok = false;
    uint32_t nbb = 1;
    if (lane < n_read) {  // lanes past n_read are not read (n_read may exceed the lanes)
      const m::CtrlFields f = m::decode_ctrl(c.window[4 * lane]);
      ctrl_ok = f.wqe_index == static_cast<uint16_t>(ci + lane) && f.qpn == q.sq.qpn && f.ds >= 1 && f.ds <= m::kMaxDs;
      nbb = ctrl_ok ? m::wqebbs_of_ds(f.ds) : 1u;
    }
    ok |= uint32_t(ctrl_ok) << lane;
    planes.bit0 |= ((nbb - 1) & 1u) << lane;
    planes.bit1 |= (((nbb - 1) >> 1) & 1u) << lane;
  }
  c.first = find_entry ? sn::sub_window_entry(ok) : 0u;
  const sn::WindowPlan plan = sn::plan_window_planes(ok, planes, n_read, avail, c.first);
  // 3. Checks and effects recorded.
  uint32_t good = 0;
  for (uint32_t lane = 0; lane < kWarpLanes; ++lane) {
    if (((plan.starts >> lane) & 1u) == 0) continue;
    c.r[lane] = sn::execute_wqe<true>(t, *reinterpret_cast<const m::WqeImage*>(&c.window[4 * lane]), q.dc != 0, c.rec[lane]);
    good |= uint32_t(c.r[lane].syndrome == 0 && c.rec[lane].calls <= 1) << lane;
  }
  c.pre = sn::executable_prefix(plan, good);
  for (uint32_t lane = 0; lane < kWarpLanes; ++lane) {
    const bool mine = (c.pre.starts >> lane) & 1u;
    c.copy_lanes |= uint32_t(mine && c.rec[lane].kind == sn::EffectRecorder::kCopy && c.rec[lane].move.len != 0) << lane;
    c.atomic_lanes |= uint32_t(mine && c.rec[lane].kind == sn::EffectRecorder::kFetchAdd) << lane;
    c.signaled |= uint32_t(mine && c.r[lane].signaled) << lane;
    if (mine) c.bytes += c.r[lane].byte_cnt;
  }
}

// The rest of a block pass of k sub-windows: every taken warp's payloads, last sub-window first,
// with the effects the engine's warps run (the helpers no atomics: block_pass_warps takes none after
// the first sub-window, and one taken would be lost, not run out of order); then every CQE, last
// sub-window first (on a collapsed CQ an older CQE written after the newest would show); the QP
// advanced by all of them.
static void sim_block_pass(sn::QpState& q, const SimChecked* c, const sn::SubWindow* sub, uint32_t k, uint32_t ci,
                           sn::Counters& ctr, CheckIo& io, PassStats& st) {
  ++st.block_passes;
  st.block_wide += k >= 4;
  for (uint32_t v = 1; v < k; ++v) st.block_entries += sub[v].first != 0;
  uint32_t signaling = 0;
  for (uint32_t v = 0; v < k; ++v) signaling += sub[v].signaled != 0;
  st.block_collapsed += q.cq.collapsed && signaling >= 2;
  bool unfenced = false;
  for (uint32_t v = k; v-- > 0;) {
    SimPass pass{nullptr, io, st, c[v].rec, c[v].pre.starts, c[v].copy_lanes, v == 0 ? c[v].atomic_lanes : 0u};
    pass.run_effects(unfenced);
  }
  HostMem mem;
  for (uint32_t v = k; v-- > 0;) {
    const uint32_t pi = sn::block_cq_pi(sub, v, q.cq_pi);
    for (uint32_t lane = 0; lane < kWarpLanes; ++lane) {
      const sn::CqeSlot slot = sn::cqe_slot(lane, c[v].signaled, pi, q.cq.collapsed);
      if (!slot.write || !sn::block_cqe_writer(sub, k, v, q.cq.collapsed)) continue;
      sn::QpState local = q;
      local.cq_pi = slot.cq_pi;
      sn::Counters unused;
      sn::complete_wqe(local, static_cast<uint16_t>(ci + v * sn::kWindowWqebbs + lane), c[v].r[lane], mem, unused);
    }
  }
  q.ci += sn::block_pass_consumed(sub, k);
  for (uint32_t v = 0; v < k; ++v) {
    ctr.wqes += sub[v].wqes;
    ctr.cqes += sub[v].signaled;
    ctr.bytes += c[v].bytes;
  }
  q.cq_pi = sn::block_cq_pi(sub, k, q.cq_pi);
}

// service_chunk of gpu_engine.cu, lane by lane.
static void sim_pass(sn::QpState& q, const sn::Tables& t, uint16_t db_index, sn::Counters& ctr, CheckIo& io,
                     PassStats& st, SimWarp& w) {
  HostMem mem;
  ++st.passes;
  if (q.error) {
    ++st.serial;
    w.flush(io, st);
    sn::service_one_wqe(q, t, mem, ctr);
    return;
  }
  const uint32_t ci = q.ci;
  const uint32_t avail = static_cast<uint16_t>(db_index - static_cast<uint16_t>(ci)) + 1u;
  // More than a window rung on a helped block's QP: a block pass, each warp checking a sub-window.
  const uint32_t subs = w.blk != nullptr ? sn::pass_sub_windows(avail, q.sq.wqe_cnt, w.blk->warps,
                                                               w.pending && w.blk->job_on_grid())
                                         : 1u;
  if (subs > 1) w.flush(io, st);
  std::vector<SimChecked> checked(subs);
  sn::SubWindow sub[kWarpLanes];
  for (uint32_t v = 0; v < subs; ++v) {
    sim_check_window(q, t, ci + v * sn::kWindowWqebbs, avail - v * sn::kWindowWqebbs,
                     subs > 1 ? sn::kSubWindowReads : sn::kWindowWqebbs, v > 0, checked[v]);
    io.readable.push_back({reinterpret_cast<const uint8_t*>(checked[v].window), sizeof checked[v].window});
    uint32_t deferral = sn::kPassRuns;
    if (v == 0 && subs > 1) {
      const AlignedPack pack(checked[0].copy_lanes, checked[0].rec);
      deferral = sn::pass_deferral(sn::deferrable_pass(true, checked[0].copy_lanes, checked[0].atomic_lanes) &&
                                       pack.deferrable(),
                                   sn::aligned_rounds(pack.total), w.blk->warps - 1u, w.blk->grid_helpers);
    }
    sub[v] = checked[v].sub(deferral);
  }
  const uint32_t k = subs > 1 ? sn::block_pass_warps(sub, subs, w.blk->warps) : 1u;
  st.block_alone += subs > 1 && k == 1;
  st.block_cut += k > 1 && k < subs;
  if (k > 1) {
    sim_block_pass(q, checked.data(), sub, k, ci, ctr, io, st);
    io.readable.resize(io.readable.size() - subs);
    return;
  }
  io.readable.resize(io.readable.size() - subs + 1);  // warp 0's window stays readable for its pass
  SimChecked& c = checked[0];
  const sn::Prefix pre = c.pre;
  const sn::EffectRecorder* rec = c.rec;
  const sn::ExecResult* r = c.r;
  if (pre.starts == 0) {
    io.readable.pop_back();
    ++st.serial;
    w.flush(io, st);
    sn::service_one_wqe(q, t, mem, ctr);
    return;
  }
  if (pre.consumed > static_cast<uint32_t>(__builtin_popcount(pre.starts))) ++st.multi_wqebb;
  // 4. Effects.
  const uint32_t copy_lanes = c.copy_lanes, atomic_lanes = c.atomic_lanes;
  SimPass pass{w.blk, io, st, rec, pre.starts, copy_lanes, atomic_lanes};
  const bool deferred =
      sn::run_pass_effects(pass, sn::deferrable_pass(w.blk != nullptr, copy_lanes, atomic_lanes), w.pending, w.unfenced);
  if (deferred)
    for (uint32_t l = 0; l < kWarpLanes; ++l)
      if ((copy_lanes >> l) & 1u) w.blk->staged_copies.push_back(rec[l].move);
  io.readable.pop_back();
  // 5. CQEs and state.
  for (uint32_t lane = 0; lane < kWarpLanes; ++lane) {
    const sn::CqeSlot slot = sn::cqe_slot(lane, c.signaled, q.cq_pi, q.cq.collapsed);
    if (!slot.write) continue;
    sn::QpState local = q;
    local.cq_pi = slot.cq_pi;
    sn::Counters unused;
    SimStaging staging{w.blk};
    if (deferred) {
      sn::complete_wqe(local, static_cast<uint16_t>(ci + lane), r[lane], staging, unused);
    } else {
      sn::complete_wqe(local, static_cast<uint16_t>(ci + lane), r[lane], mem, unused);
    }
  }
  const sn::SubWindow done = c.sub();
  q.ci = ci + pre.consumed;
  q.cq_pi += done.signaled;
  ctr.wqes += done.wqes;
  ctr.cqes += done.signaled;
  ctr.bytes += c.bytes;
}

// The engine's drain of one doorbell, with either the warp passes (of a helped block when `blk`)
// or the serial path.
static void drain(sn::QpState& q, const sn::Tables& t, uint64_t db, sn::Counters& ctr, bool warp, CheckIo& io,
                  PassStats& st, SimBlock* blk) {
  HostMem mem;
  SimWarp w;
  w.blk = blk;
  const uint16_t db_index = m::doorbell_wqe_index(db);
  for (int guard = 0; gicomm::idx16_at_or_after(db_index, static_cast<uint16_t>(q.ci)) && guard < 70000; ++guard) {
    if (warp) {
      sim_pass(q, t, db_index, ctr, io, st, w);
    } else {
      sn::service_one_wqe(q, t, mem, ctr);
    }
  }
  w.flush(io, st);  // the drain's last CQEs
  CHECK(!w.pending && (blk == nullptr || (!blk->posted && blk->staged.empty())), "a pass still pending after the drain");
}

static bool same_counters(const sn::Counters& a, const sn::Counters& b) {
  return a.wqes == b.wqes && a.cqes == b.cqes && a.errors == b.errors && a.flushes == b.flushes &&
         a.bytes == b.bytes && a.stale_retries == b.stale_retries;
}

static void check_passes_match_serial(std::mt19937& rng) {
  sn::SoftNic nic;
  alignas(64) static uint8_t src[1 << 16];
  static std::vector<uint8_t> dst(4 << 20), dst_before(4 << 20);
  alignas(8) static uint64_t atomics[64], fetched[4096];
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  const auto src_mr = nic.register_mr(src, sizeof src, 0);
  const auto dst_mr = nic.register_mr(dst.data(), dst.size(), sn::kAccessRemoteWrite);
  const auto at_mr = nic.register_mr(atomics, sizeof atomics, sn::kAccessRemoteAtomic);
  const auto fe_mr = nic.register_mr(fetched, sizeof fetched, sn::kAccessLocalWrite);
  const uint64_t dc_key = 0xdcdc;
  const uint32_t dct = nic.create_dct(dc_key);
  PassStats st;
  uint64_t rounds_with_error = 0, stale_rounds = 0;
  for (int qp_round = 0; qp_round < 600; ++qp_round) {
    sn::QueueConfig qc;
    qc.sq_wqebbs = qp_round % 3 == 0 ? 64 : 256;  // 64: windows wrap the ring often
    qc.cq_entries = 256;
    qc.collapsed_cq = qp_round % 4 >= 2;
    qc.dc = qp_round % 5 == 2 || qp_round % 5 == 4;
    const uint32_t qp = nic.create_qp(qc);
    m::HostSq sq(nic.sq(qp));
    sn::QpState& q = *nic.qp_state(qp);
    m::AddressVector av;
    av.dc_key = dc_key;
    av.dct_number = dct;
    for (int round = 0; round < 25 && !q.error; ++round) {
      av.extended = rng() % 2 == 0;
      const m::AddressVector* avp = qc.dc ? &av : nullptr;
      // A batch that fits the ring: up to 40 WQEs (64 of aligned writes), each up to 4 WQEBBs.
      const uint32_t budget = qc.sq_wqebbs - 4;
      uint32_t used = 0, dst_off = 0, fetch_slot = 0;
      const bool inject_error = rng() % 10 == 0, inject_stale = !inject_error && rng() % 12 == 0;
      // Some batches hold only writes of at most one 16-byte block (the 8-byte puts): lanes copy their own.
      const bool small = rng() % 3 == 0;
      // Half of those have no atomic, so that on a helped block's QP block passes take several of
      // their windows (an atomic ends a block pass).
      const bool no_atomics = small && rng() % 2 == 0;
      // Some hold pointer writes of one length from and to 16-byte boundaries (a sweep's pointer
      // puts), half of them ending in a partial block, half with an atomic now and then: epochs of
      // aligned copies, and on a helped block's QP, deferred passes (one after another when a batch
      // spans passes).
      const bool aligned = !small && rng() % 4 == 0;
      // Half the aligned batches start with a NOP and have only writes, long ones on a DC QP: the
      // writes then sit at odd offsets, so one reaches past the first sub-window's end and cuts the
      // pass there, and the rest of the batch follows in a pass of its own (deferred passes one
      // after another).
      const bool nop_first = rng() % 2 == 0, signals = !nop_first && rng() % 2 == 0;
      if (aligned && nop_first) av.extended = true;
      const uint32_t n = aligned && nop_first ? 17 + rng() % 24 : 1 + rng() % (aligned ? 64 : small ? 200 : 40);
      const uint32_t aligned_len = 16 * (1 + rng() % (rng() % 2 ? 16 : 300)) + (rng() % 2 ? rng() % 16 : 0);
      // In half the long batches of one-WQEBB writes the bad or stale WQE is the 33rd: the first
      // WQEBB of a block pass's second sub-window, whose entry then moves past it (not taken).
      const uint32_t bad_at = no_atomics && n > 40 && rng() % 2 == 0 ? 32u : rng() % n;
      for (uint32_t i = 0; i < n && used + 4 <= budget; ++i) {
        m::WqeImage img;
        const m::WqeHeader h = sq.header(rng() % 3 != 0);
        uint32_t kind = aligned ? (i == 0 && nop_first ? 9 : signals && rng() % 8 == 0 ? 8 : 0) : rng() % 10;
        if (no_atomics && kind == 8) kind = 0;
        uint32_t ds = 0;
        // Destinations never overlap within a batch (a pass may land payloads in any order).
        const uint32_t align = aligned ? 16 - dst_off % 16 : small ? 8 * (rng() % 2) : rng() % 16;
        const uint64_t raddr = dst_mr.addr + dst_off + align;
        if (kind <= 3) {  // pointer write, 0..5000 B (mostly small)
          const uint32_t len =
              aligned ? aligned_len : small ? 1 + rng() % 8 : rng() % 4 == 0 ? rng() % 5001 : rng() % 300;
          const uint64_t laddr =
              src_mr.addr + (aligned ? 16 * (rng() % ((sizeof src - 5001) / 16)) : rng() % (sizeof src - 5001));
          ds = m::build_rdma_write(img, h, raddr, dst_mr.rkey, laddr, src_mr.lkey, len, avp);
          dst_off += len + 32 + align;
        } else if (kind <= 6) {  // inline write, 0..max
          const uint32_t len = small ? 1 + rng() % 8 : rng() % (m::max_inline_rdma_write(avp) + 1);
          ds = m::build_rdma_write_inline(img, h, raddr, dst_mr.rkey, src + rng() % 4096, len, avp);
          dst_off += len + 32;
        } else if (kind == 7) {  // write with immediate
          const uint32_t len = small ? rng() % 9 : rng() % 200;
          ds = m::build_rdma_write_imm(img, h, raddr, dst_mr.rkey, src_mr.addr + rng() % 4096, src_mr.lkey, len,
                                       static_cast<uint32_t>(rng()), avp);
          dst_off += len + 32;
        } else if (kind == 8) {  // fetch-add on one of 4 words of this QP: order matters
          ds = m::build_atomic_fetch_add(img, h, at_mr.addr + 8 * (rng() % 4), at_mr.rkey, 1 + rng() % 1000,
                                         fe_mr.addr + 8 * (fetch_slot++ % 4096), fe_mr.lkey, avp);
        } else {
          ds = m::build_nop(img, h);
        }
        if (inject_error && i == bad_at) m::set_raddr_seg(img.seg[qc.dc ? 1 + m::av_ds(av) : 1], raddr, 0xbad00);
        if (ds == 0) continue;
        if (inject_error && i == bad_at && (kind == 9 || ds == (qc.dc ? 1 + m::av_ds(av) + 1 : 2u))) {
          // A NOP or an empty write has no key to get wrong: make the opcode unknown instead.
          const m::CtrlFields c = m::decode_ctrl(img.seg[0]);
          m::set_ctrl_seg(img.seg[0], c.wqe_index, 0x1f, 0, c.qpn, c.fm_ce_se, c.ds, 0, 0);
        }
        const uint32_t at = sq.push(img, ds);
        used += m::wqebbs_of_ds(ds);
        if (inject_stale && i == bad_at) {
          // The ctrl of an older pass: the doorbell overtook this WQE (the serial path retries, then fails).
          m::Seg16 stale = img.seg[0];
          const m::CtrlFields c = m::decode_ctrl(stale);
          m::set_ctrl_seg(stale, static_cast<uint16_t>(c.wqe_index - qc.sq_wqebbs), c.opcode, 0, c.qpn, c.fm_ce_se,
                          c.ds, 0, c.imm_raw);
          m::store_seg(nic.sq(qp).buf, qc.sq_wqebbs, at, 0, stale);
        }
        if (dst_off > dst.size() - 6000) break;
      }
      if (used == 0) continue;
      sq.ring();
      const uint64_t db = *nic.sq(qp).doorbell;
      rounds_with_error += inject_error;
      stale_rounds += inject_stale;
      // Serial, then warp passes from the same starting point; compare everything they wrote.
      const sn::QpState before = q;
      std::memcpy(dst_before.data(), dst.data(), dst_off + 64);
      uint64_t atomics_before[64], fetched_before[4096];
      std::memcpy(atomics_before, atomics, sizeof atomics);
      std::memcpy(fetched_before, fetched, sizeof fetched);
      const size_t cq_bytes = size_t(qc.collapsed_cq ? 1 : qc.cq_entries) * sizeof(m::Cqe64);
      std::vector<uint8_t> cq_before(cq_bytes), cq_serial(cq_bytes);
      std::memcpy(cq_before.data(), nic.cq(qp).buf, cq_bytes);
      CheckIo io;
      io.readable = {{src, sizeof src}};
      sn::Counters serial_ctr, warp_ctr;
      drain(q, nic.tables(), db, serial_ctr, false, io, st, nullptr);
      const sn::QpState after_serial = q;
      std::vector<uint8_t> dst_serial(dst.begin(), dst.begin() + dst_off + 64);
      uint64_t atomics_serial[64], fetched_serial[4096];
      std::memcpy(atomics_serial, atomics, sizeof atomics);
      std::memcpy(fetched_serial, fetched, sizeof fetched);
      std::memcpy(cq_serial.data(), nic.cq(qp).buf, cq_bytes);
      q = before;
      std::memcpy(dst.data(), dst_before.data(), dst_off + 64);
      std::memcpy(atomics, atomics_before, sizeof atomics);
      std::memcpy(fetched, fetched_before, sizeof fetched);
      std::memcpy(nic.cq(qp).buf, cq_before.data(), cq_bytes);
      SimBlock block;  // half the QPs are a helped block's, of 8 warps or 3
      block.warps = qp_round % 3 == 1 ? 3 : 8;
      block.grid_helpers = qp_round % 4 == 0 ? sn::kMaxGridHelpers : 0u;
      drain(q, nic.tables(), db, warp_ctr, true, io, st, qp_round % 2 == 0 ? &block : nullptr);
      const std::string where = "QP round " + std::to_string(qp_round) + " batch " + std::to_string(round);
      CHECK(io.bad_loads == 0, "%s: %d loads outside readable memory", where.c_str(), io.bad_loads);
      CHECK(q.ci == after_serial.ci && q.cq_pi == after_serial.cq_pi && q.error == after_serial.error,
            "%s: QP state ci %u cq_pi %u error %u, serial %u %u %u", where.c_str(), q.ci, q.cq_pi, q.error,
            after_serial.ci, after_serial.cq_pi, after_serial.error);
      CHECK(same_counters(warp_ctr, serial_ctr),
            "%s: counters wqes %llu cqes %llu errors %llu flushes %llu bytes %llu stale %llu, serial %llu %llu %llu "
            "%llu %llu %llu",
            where.c_str(), (unsigned long long)warp_ctr.wqes, (unsigned long long)warp_ctr.cqes,
            (unsigned long long)warp_ctr.errors, (unsigned long long)warp_ctr.flushes,
            (unsigned long long)warp_ctr.bytes, (unsigned long long)warp_ctr.stale_retries,
            (unsigned long long)serial_ctr.wqes, (unsigned long long)serial_ctr.cqes,
            (unsigned long long)serial_ctr.errors, (unsigned long long)serial_ctr.flushes,
            (unsigned long long)serial_ctr.bytes, (unsigned long long)serial_ctr.stale_retries);
      CHECK(std::memcmp(dst.data(), dst_serial.data(), dst_serial.size()) == 0, "%s: destination bytes differ",
            where.c_str());
      CHECK(std::memcmp(atomics, atomics_serial, sizeof atomics) == 0 &&
                std::memcmp(fetched, fetched_serial, sizeof fetched) == 0,
            "%s: atomics or fetched values differ (order)", where.c_str());
      CHECK(std::memcmp(nic.cq(qp).buf, cq_serial.data(), cq_bytes) == 0, "%s: CQ contents differ", where.c_str());
      if (gicomm::test::failures().load() > 20) return;
    }
  }
  CHECK(st.shared_copies > 100 && st.aligned_copies > 100 && st.aligned_tails > 50 && st.own_copies > 100 &&
            st.multi_wqebb > 100 && st.atomic_epochs > 100 && st.serial > 50 && rounds_with_error > 10 &&
            stale_rounds > 10 && st.deferred > 20 && st.deferred_tails > 10 && st.published_after_post > 10 &&
            st.flushed() > 10,
        "coverage: %llu shared copies, %llu aligned (%llu with tails), %llu own-lane copies, %llu multi-WQEBB passes, "
        "%llu atomics, %llu serial passes, %llu error rounds, %llu stale rounds; deferred passes %llu (%llu with tails), "
        "%llu published after the next post, %llu flushed",
        (unsigned long long)st.shared_copies, (unsigned long long)st.aligned_copies,
        (unsigned long long)st.aligned_tails, (unsigned long long)st.own_copies, (unsigned long long)st.multi_wqebb,
        (unsigned long long)st.atomic_epochs, (unsigned long long)st.serial, (unsigned long long)rounds_with_error,
        (unsigned long long)stale_rounds, (unsigned long long)st.deferred, (unsigned long long)st.deferred_tails,
        (unsigned long long)st.published_after_post, (unsigned long long)st.flushed());
  std::printf("warp passes == serial path: %llu passes (%llu serial), %llu shared, %llu aligned (%llu with tails) and "
              "%llu own-lane copy epochs, %llu passes with multi-WQEBB WQEs, %llu atomics, %llu batches with an error, "
              "%llu with a stale ctrl; a helped block's deferred passes: %llu (%llu with tails), %llu published after the "
              "next pass posted, %llu flushed\n",
              (unsigned long long)st.passes, (unsigned long long)st.serial, (unsigned long long)st.shared_copies,
              (unsigned long long)st.aligned_copies, (unsigned long long)st.aligned_tails,
              (unsigned long long)st.own_copies, (unsigned long long)st.multi_wqebb,
              (unsigned long long)st.atomic_epochs, (unsigned long long)rounds_with_error,
              (unsigned long long)stale_rounds, (unsigned long long)st.deferred, (unsigned long long)st.deferred_tails,
              (unsigned long long)st.published_after_post, (unsigned long long)st.flushed());
  CHECK(st.block_passes > 100 && st.block_wide > 15 && st.block_cut > 6 && st.block_alone > 20 &&
            st.block_collapsed > 10 && st.block_entries > 20,
        "coverage: %llu block passes (%llu of 4 sub-windows or more), %llu leaving checked sub-windows, %llu of warp 0 alone, %llu "
        "into a collapsed CQ from several sub-windows, %llu sub-windows taken from a later entry",
        (unsigned long long)st.block_passes, (unsigned long long)st.block_wide, (unsigned long long)st.block_cut,
        (unsigned long long)st.block_alone, (unsigned long long)st.block_collapsed,
        (unsigned long long)st.block_entries);
  std::printf("block passes: %llu (%llu of 4 sub-windows or more), %llu leaving checked sub-windows to the next pass, %llu whose "
              "sub-windows were checked and warp 0's alone taken, %llu into a collapsed CQ from several sub-windows, "
              "%llu sub-windows taken from a later entry\n",
              (unsigned long long)st.block_passes, (unsigned long long)st.block_wide,
              (unsigned long long)st.block_cut, (unsigned long long)st.block_alone,
              (unsigned long long)st.block_collapsed, (unsigned long long)st.block_entries);
}

// The grid's help: every QP-less block of a helped launch helps one QP's block, the helpers of an
// owner are numbered 0..n-1 (n = grid_helpers), and the rounds' first indices of the owner's copying
// warps and its helpers' warps are 0..step-1, each once (so every round of an epoch is moved once).
static void check_grid_roles() {
  for (uint32_t blocks = 1; blocks <= 140; ++blocks) {
    for (uint32_t qps = 0; qps <= blocks; ++qps) {
      std::vector<std::vector<uint32_t>> ordinals(qps);
      for (uint32_t b = 0; b < blocks; ++b) {
        const sn::GridRole r = sn::grid_role(blocks, qps, b);
        CHECK(!r.helps || (b >= qps && r.owner < qps), "blocks %u qps %u: block %u helps %u", blocks, qps, b, r.owner);
        if (r.helps) ordinals[r.owner].push_back(r.ordinal);
      }
      for (uint32_t o = 0; o < qps; ++o) {
        const uint32_t n = sn::grid_helpers(blocks, qps, o);
        std::vector<uint32_t> want(n);
        for (uint32_t i = 0; i < n; ++i) want[i] = i;
        CHECK(ordinals[o] == want, "blocks %u qps %u owner %u: %zu helpers, grid_helpers says %u", blocks, qps, o,
              ordinals[o].size(), n);
        CHECK(n <= sn::kMaxGridHelpers, "at most %u helpers", sn::kMaxGridHelpers);
      }
    }
  }
  CHECK(sn::grid_helpers(16, 1, 0) == 15 && sn::grid_helpers(132, 1, 0) == 15 && sn::grid_helpers(16, 16, 3) == 0 &&
            sn::grid_helpers(16, 4, 0) == 3,
        "one QP on 16 or 132 blocks has 15 helpers; 16 QPs none; 4 QPs 3 each");
  for (uint32_t wpb : {2u, 8u})
    for (uint32_t share : {0u, wpb - 1, wpb})
      for (uint32_t helpers = 0; helpers <= sn::kMaxGridHelpers; ++helpers) {
        const uint32_t step = sn::grid_step(share, helpers, wpb);
        CHECK(step == share + helpers * (wpb - 1), "wpb %u share %u helpers %u: step %u", wpb, share, helpers, step);
        std::vector<int> seen(step, 0);
        const auto take = [&](uint32_t f) {
          if (f < step) ++seen[f];
          else CHECK(false, "first round %u past step %u", f, step);
        };
        // A helper block's warp 0 runs its queue: only warps 1..wpb-1 take rounds; the owner's
        // copying warps take the places after every helper's.
        for (uint32_t h = 0; h < helpers; ++h)
          for (uint32_t w = 1; w < wpb; ++w) take(sn::grid_first_round(wpb, h, w));
        for (uint32_t i = 0; i < share; ++i) {
          const uint32_t f = sn::grid_owner_first_round(helpers, wpb, i);
          CHECK(f >= helpers * (wpb - 1), "the owner's warp %u comes after the helpers' (%u)", i, f);
          take(f);
        }
        CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(step),
              "wpb %u share %u helpers %u: a first round taken twice or not at all", wpb, share, helpers);
      }
  // The owner's 7 copying warps take part in a deferred grid job beside up to 7 helper blocks (49
  // warps), not beside 8 (56) or 15 (105); an undeferred job or one with no helpers is all theirs.
  CHECK(sn::grid_deferred_share(7, 7, 8) == 7 && sn::grid_deferred_share(7, 1, 8) == 7 &&
            sn::grid_deferred_share(7, 8, 8) == 0 && sn::grid_deferred_share(7, 15, 8) == 0,
        "the owner's warps take part while the helpers' copying warps are fewer than 8 times theirs");
  for (uint32_t helpers : {0u, 3u, 15u}) {
    const sn::GridShare d = sn::grid_share(true, helpers, 8), u = sn::grid_share(false, helpers, 8);
    CHECK(d.share == (helpers == 15 ? 0u : 7u) && d.step == d.share + helpers * 7 && u.share == 8 &&
              u.step == 8 + helpers * 7,
          "helpers %u: deferred share %u step %u, undeferred share %u step %u", helpers, d.share, d.step, u.share,
          u.step);
  }
  CHECK(!sn::grid_epoch(31, 8, 15) && sn::grid_epoch(32, 8, 15) && !sn::grid_epoch(1000, 8, 0),
        "an epoch goes to the grid from 4 rounds per warp, and only with helpers");
}

int main() {
  std::mt19937 rng(2024);
  check_plan_window(rng);
  check_prefix_epochs_slots(rng);
  check_block_pass_rules(rng);
  check_copy_blocks(rng);
  check_grid_roles();
  check_passes_match_serial(rng);
  if (gicomm::test::failures().load()) {
    std::fprintf(stderr, "test_warp_plan: %d failures\n", gicomm::test::failures().load());
    return 1;
  }
  std::printf("test_warp_plan: ok\n");
  return 0;
}
