// The gpu engine's warp decisions (gicomm/softnic/warp_plan.h), on the CPU: the same functions the
// GPU runs, checked one by one and then composed into a pass exactly as gpu_engine.cu composes them
// (each lane's step run for 32 lanes, ballots as masks). The composed passes must leave memory,
// CQEs, QP state and counters identical to the serial path (service_one_wqe, the cpu engine's
// code) on random send queues: one-WQEBB and 2..4-WQEBB WQEs mixed, inline payloads of 0..220 B,
// pointer payloads of 0..5000 B at every alignment, writes with immediate, fetch-adds, NOPs, DC
// address vectors, WQEs that fail their checks (then the flushes) and stale ctrl segments. Half
// the QPs are a helped block's, whose passes of long aligned copies are deferred (run_pass_effects,
// the order the GPU runs): their copies move only when the next step awaits them, and every staged
// CQE is checked to go out after its pass's last payload byte.
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
  sn::CopyDesc job[kWarpLanes];
  uint32_t job_nb = 0, job_total = 0;
  bool posted = false;
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

  bool post_ready() {  // aligned_epoch with two rounds at least
    epoch = AlignedPack(copy_lanes, rec);
    return epoch.aligned && epoch.nb != 0 && sn::aligned_rounds(epoch.total) >= 2;
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

// service_chunk of gpu_engine.cu, lane by lane.
static uint32_t sim_pass(sn::QpState& q, const sn::Tables& t, uint16_t db_index, sn::Counters& ctr, CheckIo& io,
                         PassStats& st, SimWarp& w) {
  HostMem mem;
  ++st.passes;
  if (q.error) {
    ++st.serial;
    w.flush(io, st);
    sn::service_one_wqe(q, t, mem, ctr);
    return 1;
  }
  const uint32_t ci = q.ci;
  const uint32_t avail = static_cast<uint16_t>(db_index - static_cast<uint16_t>(ci)) + 1u;
  const uint32_t n_read = sn::window_reads(avail, q.sq.wqe_cnt);
  // 1. The window (lanes not read keep garbage, as shared memory would).
  alignas(16) m::Seg16 window[sn::kWindowSegs];
  std::memset(window, 0xcd, sizeof window);
  for (uint32_t s = 0; s < 4 * kWarpLanes; ++s)
    if (s / 4 < n_read) std::memcpy(&window[s], m::wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, ci + s / 4) + 16 * (s % 4), 16);
  io.readable.push_back({reinterpret_cast<const uint8_t*>(window), sizeof window});
  // 2. Starts.
  uint32_t ok = 0;
  sn::NbbPlanes planes{0, 0};
  for (uint32_t lane = 0; lane < kWarpLanes; ++lane) {
    bool ctrl_ok = false;
    uint32_t nbb = 1;
    if (lane < n_read) {
      const m::CtrlFields c = m::decode_ctrl(window[4 * lane]);
      ctrl_ok = c.wqe_index == static_cast<uint16_t>(ci + lane) && c.qpn == q.sq.qpn && c.ds >= 1 && c.ds <= m::kMaxDs;
      nbb = ctrl_ok ? m::wqebbs_of_ds(c.ds) : 1u;
    }
    ok |= uint32_t(ctrl_ok) << lane;
    planes.bit0 |= ((nbb - 1) & 1u) << lane;
    planes.bit1 |= (((nbb - 1) >> 1) & 1u) << lane;
  }
  const sn::WindowPlan plan = sn::plan_window_planes(ok, planes, n_read, avail);
  // 3. Checks and effects recorded.
  sn::EffectRecorder rec[kWarpLanes];
  sn::ExecResult r[kWarpLanes];
  uint32_t good = 0;
  for (uint32_t lane = 0; lane < kWarpLanes; ++lane) {
    if (((plan.starts >> lane) & 1u) == 0) continue;
    r[lane] = sn::execute_wqe<true>(t, *reinterpret_cast<const m::WqeImage*>(&window[4 * lane]), q.dc != 0, rec[lane]);
    good |= uint32_t(r[lane].syndrome == 0 && rec[lane].calls <= 1) << lane;
  }
  const sn::Prefix pre = sn::executable_prefix(plan, good);
  if (pre.starts == 0) {
    io.readable.pop_back();
    ++st.serial;
    w.flush(io, st);
    sn::service_one_wqe(q, t, mem, ctr);
    return 1;
  }
  if (pre.consumed > static_cast<uint32_t>(__builtin_popcount(pre.starts))) ++st.multi_wqebb;
  // 4. Effects.
  uint32_t copy_lanes = 0, atomic_lanes = 0;
  for (uint32_t lane = 0; lane < kWarpLanes; ++lane) {
    const bool mine = (pre.starts >> lane) & 1u;
    copy_lanes |= uint32_t(mine && rec[lane].kind == sn::EffectRecorder::kCopy && rec[lane].move.len != 0) << lane;
    atomic_lanes |= uint32_t(mine && rec[lane].kind == sn::EffectRecorder::kFetchAdd) << lane;
  }
  SimPass pass{w.blk, io, st, rec, pre.starts, copy_lanes, atomic_lanes};
  const bool deferred =
      sn::run_pass_effects(pass, sn::deferrable_pass(w.blk != nullptr, copy_lanes, atomic_lanes), w.pending, w.unfenced);
  if (deferred)
    for (uint32_t l = 0; l < kWarpLanes; ++l)
      if ((copy_lanes >> l) & 1u) w.blk->staged_copies.push_back(rec[l].move);
  io.readable.pop_back();
  // 5. CQEs and state.
  uint32_t signaled = 0;
  uint64_t bytes = 0;
  for (uint32_t lane = 0; lane < kWarpLanes; ++lane) {
    const bool mine = (pre.starts >> lane) & 1u;
    signaled |= uint32_t(mine && r[lane].signaled) << lane;
    if (mine) bytes += r[lane].byte_cnt;
  }
  for (uint32_t lane = 0; lane < kWarpLanes; ++lane) {
    const sn::CqeSlot slot = sn::cqe_slot(lane, signaled, q.cq_pi, q.cq.collapsed);
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
  const uint32_t nsig = static_cast<uint32_t>(__builtin_popcount(signaled));
  q.ci = ci + pre.consumed;
  q.cq_pi += nsig;
  ctr.wqes += static_cast<uint32_t>(__builtin_popcount(pre.starts));
  ctr.cqes += nsig;
  ctr.bytes += bytes;
  return static_cast<uint32_t>(__builtin_popcount(pre.starts));
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
    qc.collapsed_cq = qp_round % 4 == 1;
    qc.dc = qp_round % 5 == 2;
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
      // Some hold pointer writes of one length from and to 16-byte boundaries (a sweep's pointer
      // puts), half of them ending in a partial block, half with an atomic now and then: epochs of
      // aligned copies, and on a helped block's QP, deferred passes (one after another when a batch
      // spans passes).
      const bool aligned = !small && rng() % 4 == 0;
      const bool signals = rng() % 2 == 0;
      const uint32_t n = 1 + rng() % (aligned ? 64 : 40);
      const uint32_t aligned_len = 16 * (1 + rng() % (rng() % 2 ? 16 : 300)) + (rng() % 2 ? rng() % 16 : 0);
      const uint32_t bad_at = rng() % n;
      for (uint32_t i = 0; i < n && used + 4 <= budget; ++i) {
        m::WqeImage img;
        const m::WqeHeader h = sq.header(rng() % 3 != 0);
        const uint32_t kind = aligned ? (signals && rng() % 8 == 0 ? 8 : 0) : rng() % 10;
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
      SimBlock block;  // half the QPs are a helped block's
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
}

int main() {
  std::mt19937 rng(2024);
  check_plan_window(rng);
  check_prefix_epochs_slots(rng);
  check_copy_blocks(rng);
  check_passes_match_serial(rng);
  if (gicomm::test::failures().load()) {
    std::fprintf(stderr, "test_warp_plan: %d failures\n", gicomm::test::failures().load());
    return 1;
  }
  std::printf("test_warp_plan: ok\n");
  return 0;
}
