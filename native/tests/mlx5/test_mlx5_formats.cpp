// Every gicomm mlx5 encoder/decoder against rdma-core's own inline helpers and struct layouts
// (infiniband/mlx5dv.h), byte for byte, over randomized fields.
#include <infiniband/mlx5dv.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "check.h"
// g++ -O3 (Release) inlines build_rdma_write_inline into the inline-limit check below and, losing
// that `length` was checked against max_inline_rdma_write() first, warns that the payload copy could
// run past the image (-Warray-bounds, a false positive; which inlining triggers it depends on the
// code around the call). The encoders' own bounds are what this test checks at run time.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#include "gicomm/mlx5/cqe.h"
#include "gicomm/mlx5/doorbell.h"
#include "gicomm/mlx5/queue.h"
#include "gicomm/mlx5/wqe.h"
#pragma GCC diagnostic pop

namespace m = gicomm::mlx5;


static bool same(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }

// Layout: our byte offsets and sizes are rdma-core's.
static_assert(sizeof(mlx5_wqe_ctrl_seg) == 16);
static_assert(sizeof(mlx5_wqe_raddr_seg) == 16);
static_assert(sizeof(mlx5_wqe_data_seg) == 16);
static_assert(sizeof(mlx5_wqe_atomic_seg) == 16);
static_assert(sizeof(mlx5_wqe_av) == 48);
static_assert(sizeof(mlx5_cqe64) == 64);
static_assert(sizeof(mlx5_err_cqe) == 64);
static_assert(offsetof(mlx5_cqe64, wqe_counter) == m::kCqeOffWqeCounter);
static_assert(offsetof(mlx5_cqe64, op_own) == m::kCqeOffOpOwn);
static_assert(offsetof(mlx5_cqe64, sop_drop_qpn) == m::kCqeOffQpn);
static_assert(offsetof(mlx5_cqe64, byte_cnt) == m::kCqeOffByteCnt);
static_assert(offsetof(mlx5_cqe64, imm_inval_pkey) == m::kCqeOffImm);
static_assert(offsetof(mlx5_err_cqe, syndrome) == m::kCqeOffSyndrome);
static_assert(offsetof(mlx5_err_cqe, vendor_err_synd) == m::kCqeOffVendorSyndrome);
static_assert(offsetof(mlx5_err_cqe, s_wqe_opcode_qpn) == m::kCqeOffQpn);
static_assert(m::kOpcodeRdmaWrite == MLX5_OPCODE_RDMA_WRITE && m::kOpcodeRdmaWriteImm == MLX5_OPCODE_RDMA_WRITE_IMM);
static_assert(m::kOpcodeAtomicFa == MLX5_OPCODE_ATOMIC_FA && m::kOpcodeNop == MLX5_OPCODE_NOP);
static_assert(m::kCtrlCqUpdate == MLX5_WQE_CTRL_CQ_UPDATE && m::kCtrlFence == MLX5_WQE_CTRL_FENCE);
static_assert(m::kInlineSeg == MLX5_INLINE_SEG && m::kSendWqeBB == MLX5_SEND_WQE_BB && m::kSndDbr == MLX5_SND_DBR);
static_assert(m::kCqeReqErr == MLX5_CQE_REQ_ERR && m::kCqeInvalid == MLX5_CQE_INVALID && m::kCqeReq == MLX5_CQE_REQ);
static_assert(m::kSyndromeLocalProt == MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
static_assert(m::kSyndromeRemoteAccess == MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
static_assert(m::kSyndromeLocalLength == MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
static_assert(m::kSyndromeWrFlush == MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
static_assert(m::kSyndromeLocalQpOp == MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);

// Edges of the write builders, as rdma-core's providers/mlx5/qp.c posts them: _mlx5_post_send
// skips an SGE of length 0 (a data segment's byte_count 0 would mean 2 GiB to a ConnectX) and
// set_data_inl_seg adds no inline segment when the inline payload is empty, so an empty RDMA write,
// inline or not, is ctrl + raddr (ds 2; ds 3 with a compact DC address vector). And each inline
// builder refuses (returns 0, writes nothing) a payload that does not fit kMaxWqeBBs WQEBBs beside
// the segments before it.
static void check_zero_length_and_inline_limits() {
  m::WqeHeader h;
  h.pi = 0x1234;
  h.qpn = 0xabcde;
  h.signaled = true;
  const uint64_t raddr = 0x1122334455667788ull, laddr = 0x99aabbccddeeff00ull;
  const uint32_t rkey = 0x5566, lkey = 0x7788;
  // What rdma-core writes for an empty write: ctrl (ds 2) + raddr, nothing after.
  uint8_t ref[64] = {0};
  mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg*>(ref), h.pi, MLX5_OPCODE_RDMA_WRITE, 0, h.qpn,
                      MLX5_WQE_CTRL_CQ_UPDATE, 2, 0, 0);
  reinterpret_cast<mlx5_wqe_ctrl_seg*>(ref)->dci_stream_channel_id = 0;
  auto* rseg = reinterpret_cast<mlx5_wqe_raddr_seg*>(ref + 16);
  rseg->raddr = htobe64(raddr);
  rseg->rkey = htobe32(rkey);
  rseg->reserved = 0;
  struct Guarded {
    m::WqeImage img;
    uint8_t guard[64];
  };
  auto fresh = [] {
    Guarded g;
    std::memset(&g, 0xa5, sizeof g);
    return g;
  };
  auto guard_intact = [](const Guarded& g) {
    for (uint8_t b : g.guard)
      if (b != 0xa5) return false;
    return true;
  };
  auto untouched_after = [](const Guarded& g, size_t from) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&g.img);
    for (size_t i = from; i < sizeof g.img; ++i)
      if (p[i] != 0xa5) return false;
    return true;
  };
  {
    Guarded g = fresh();
    const uint32_t ds = m::build_rdma_write(g.img, h, raddr, rkey, laddr, lkey, 0);
    CHECK(ds == 2 && same(ref, &g.img, 32) && untouched_after(g, 32),
           "empty RDMA write: ds %u (rdma-core: 2, ctrl + raddr, no data segment)", ds);
  }
  {
    Guarded g = fresh();
    const uint32_t ds = m::build_rdma_write_inline(g.img, h, raddr, rkey, &laddr, 0);
    CHECK(ds == 2 && same(ref, &g.img, 32) && untouched_after(g, 32),
           "empty inline write: ds %u (rdma-core: 2, no inline segment)", ds);
    alignas(64) uint8_t ring[4 * 64];
    std::memset(ring, 0x5a, sizeof ring);
    m::Seg16 ctrl;
    const uint32_t sds = m::store_rdma_write_inline(ring, 4, h.pi, h, raddr, rkey, &laddr, 0, &ctrl);
    uint8_t* at = ring + (h.pi & 3) * 64;
    bool rest_untouched = true;
    for (size_t i = 0; i < sizeof ring; ++i)
      if ((ring + i < at || ring + i >= at + 32) && ring[i] != 0x5a) rest_untouched = false;
    CHECK(sds == 2 && same(at, ref, 32) && same(&ctrl, ref, 16) && rest_untouched,
           "empty streamed inline write: ds %u or ring bytes differ from rdma-core's", sds);
  }
  {
    uint8_t imm_ref[32];
    std::memcpy(imm_ref, ref, 32);
    mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg*>(imm_ref), h.pi, MLX5_OPCODE_RDMA_WRITE_IMM, 0, h.qpn,
                        MLX5_WQE_CTRL_CQ_UPDATE, 2, 0, htobe32(0xfeed));
    reinterpret_cast<mlx5_wqe_ctrl_seg*>(imm_ref)->dci_stream_channel_id = 0;
    Guarded g = fresh();
    const uint32_t ds = m::build_rdma_write_imm(g.img, h, raddr, rkey, laddr, lkey, 0, 0xfeed);
    CHECK(ds == 2 && same(imm_ref, &g.img, 32) && untouched_after(g, 32),
           "empty RDMA write with immediate: ds %u (rdma-core: 2)", ds);
  }
  {
    // DC, compact AV: ctrl + av + raddr, ds 3.
    m::AddressVector av;
    av.dc_key = 0x0102030405060708ull;
    av.dct_number = 0x800001;
    Guarded g = fresh();
    const uint32_t ds = m::build_rdma_write(g.img, h, raddr, rkey, laddr, lkey, 0, &av);
    const auto* segs = reinterpret_cast<const uint8_t*>(&g.img);
    CHECK(ds == 3 && same(segs + 32, ref + 16, 16) && untouched_after(g, 48), "empty DC write: ds %u (expected 3)",
           ds);
  }
  // Inline limits: 220 B fits an RC WQE (ds 16), 221 B does not; a compact DC AV leaves 204 B, an
  // extended one 172 B. A refused build writes nothing (the guard after the image stays intact).
  uint8_t payload[m::kMaxInlineRc + 64];
  for (size_t i = 0; i < sizeof payload; ++i) payload[i] = static_cast<uint8_t>(i * 7 + 1);
  struct Limit {
    const char* name;
    bool dc, extended;
    uint32_t max;
  };
  const Limit limits[] = {{"RC", false, false, m::kMaxInlineRc},
                          {"DC compact AV", true, false, m::kMaxInlineRc - 16},
                          {"DC extended AV", true, true, m::kMaxInlineRc - 48}};
  for (const Limit& l : limits) {
    m::AddressVector av;
    av.dct_number = 0x800002;
    av.extended = l.extended;
    const m::AddressVector* avp = l.dc ? &av : nullptr;
    CHECK(m::max_inline_rdma_write(avp) == l.max, "%s: max inline %u, expected %u", l.name,
           m::max_inline_rdma_write(avp), l.max);
    Guarded ok = fresh();
    const uint32_t ds = m::build_rdma_write_inline(ok.img, h, raddr, rkey, payload, l.max, avp);
    CHECK(ds == m::kMaxDs && guard_intact(ok), "%s: %u B inline: ds %u, expected %u", l.name, l.max, ds, m::kMaxDs);
    Guarded over = fresh();
    const uint32_t ds_over = m::build_rdma_write_inline(over.img, h, raddr, rkey, payload, l.max + 1, avp);
    CHECK(ds_over == 0 && guard_intact(over) && untouched_after(over, 0),
           "%s: %u B inline must be refused without writing (ds %u, guard %s)", l.name, l.max + 1, ds_over,
           guard_intact(over) ? "intact" : "overwritten");
  }
  {
    alignas(64) uint8_t ring[8 * 64];
    std::memset(ring, 0x5a, sizeof ring);
    m::Seg16 ctrl;
    const uint32_t ds = m::store_rdma_write_inline(ring, 8, 3, h, raddr, rkey, payload, m::kMaxInlineRc + 1, &ctrl);
    bool untouched = true;
    for (uint8_t b : ring) untouched = untouched && b == 0x5a;
    CHECK(ds == 0 && untouched, "streamed inline write of %u B must be refused without writing (ds %u)",
           m::kMaxInlineRc + 1, ds);
  }
}

int main() {
  std::mt19937_64 rng(12345);
  auto r32 = [&] { return static_cast<uint32_t>(rng()); };
  auto r8 = [&] { return static_cast<uint8_t>(rng()); };
  const int kRounds = 20000;
  for (int i = 0; i < kRounds; ++i) {
    // ctrl segment: every field random.
    {
      const uint16_t pi = static_cast<uint16_t>(rng());
      const uint8_t opcode = r8(), opmod = r8(), fm = r8(), sig = r8();
      const uint8_t ds = r8() & 0x3f;
      const uint32_t qpn = r32() & 0xffffff, imm = r32();
      mlx5_wqe_ctrl_seg ref;
      std::memset(&ref, 0xa5, sizeof(ref));
      mlx5dv_set_ctrl_seg(&ref, pi, opcode, opmod, qpn, fm, ds, sig, imm);
      ref.dci_stream_channel_id = 0;  // the rdma-core helper leaves it untouched; ours zeroes it
      m::Seg16 ours;
      m::set_ctrl_seg(ours, pi, opcode, opmod, qpn, fm, ds, sig, imm);
      CHECK(same(&ref, &ours, 16), "ctrl seg differs (round %d)", i);
      const m::CtrlFields f = m::decode_ctrl(ours);
      CHECK(f.opcode == opcode && f.opmod == opmod && f.wqe_index == pi && f.qpn == qpn && f.ds == ds &&
                 f.signature == sig && f.fm_ce_se == fm && f.imm_raw == imm,
             "ctrl decode mismatch (round %d)", i);
      // Doorbell value: memory image of ctrl bytes 0..7.
      const uint64_t db = m::doorbell_value(ours);
      CHECK(same(&db, &ref, 8), "doorbell value is not ctrl bytes 0..7");
      CHECK(m::doorbell_wqe_index(db) == pi && m::doorbell_qpn(db) == qpn, "doorbell decode");
      const uint64_t db2 = m::doorbell_value(pi, qpn, opcode, ds);
      mlx5_wqe_ctrl_seg ref2;
      mlx5dv_set_ctrl_seg(&ref2, pi, opcode, 0, qpn, 0, ds, 0, 0);
      CHECK(same(&db2, &ref2, 8), "doorbell_value(fields) differs");
    }
    // data segment.
    {
      const uint32_t len = r32(), lkey = r32();
      const uint64_t addr = rng();
      mlx5_wqe_data_seg ref;
      mlx5dv_set_data_seg(&ref, len, lkey, static_cast<uintptr_t>(addr));
      m::Seg16 ours;
      m::set_data_seg(ours, len, lkey, addr);
      CHECK(same(&ref, &ours, 16), "data seg differs");
      uint32_t l2 = 0, k2 = 0;
      CHECK(m::decode_data(ours, &l2, &k2) == addr && l2 == len && k2 == lkey, "data decode");
    }
    // raddr segment (rdma-core fills it field by field in qp.c set_raddr_seg).
    {
      const uint64_t raddr = rng();
      const uint32_t rkey = r32();
      mlx5_wqe_raddr_seg ref;
      ref.raddr = htobe64(raddr);
      ref.rkey = htobe32(rkey);
      ref.reserved = 0;
      m::Seg16 ours;
      m::set_raddr_seg(ours, raddr, rkey);
      CHECK(same(&ref, &ours, 16), "raddr seg differs");
      uint32_t k2 = 0;
      CHECK(m::decode_raddr(ours, &k2) == raddr && k2 == rkey, "raddr decode");
    }
    // atomic segment.
    {
      const uint64_t add = rng(), cmp = rng();
      mlx5_wqe_atomic_seg ref;
      ref.swap_add = htobe64(add);
      ref.compare = htobe64(cmp);
      m::Seg16 ours;
      m::set_atomic_seg(ours, add, cmp);
      CHECK(same(&ref, &ours, 16), "atomic seg differs");
      CHECK(m::decode_atomic_add(ours) == add, "atomic decode");
    }
    // address vector (DC), compact and extended, against mlx5dv_set_dgram_seg.
    {
      m::AddressVector av;
      av.dc_key = rng();
      av.dct_number = r32() & 0xffffff;
      av.stat_rate_sl = r8();
      av.fl_mlid = r8();
      av.rlid = static_cast<uint16_t>(rng());
      av.extended = (i & 1) != 0;
      uint8_t rmac[6] = {0}, rgid[16] = {0};
      mlx5_wqe_datagram_seg ref;
      std::memset(&ref, 0x77, sizeof(ref));
      mlx5dv_set_dgram_seg(&ref, av.dc_key, av.dct_number, av.extended ? 1 : 0, av.stat_rate_sl, av.fl_mlid,
                           av.rlid, rmac, 0, 0, 0, rgid);
      std::memset(ref.av.reserved0, 0, sizeof(ref.av.reserved0));
      m::Seg16 ours[3];
      std::memset(ours, 0x33, sizeof(ours));
      m::set_av_seg(ours, av);
      CHECK(same(&ref, ours, av.extended ? 48 : 16), "address vector differs (ext %d)", int(av.extended));
    }
    // inline segment: header as rdma-core's set_data_inl_seg writes it, then the payload.
    {
      const uint32_t len = r32() % (m::kMaxInlineRc + 1);
      uint8_t payload[m::kMaxInlineRc];
      for (uint32_t b = 0; b < len; ++b) payload[b] = r8();
      m::Seg16 ours[m::kMaxDs];
      m::set_inline_seg(ours, payload, len);
      const uint32_t hdr = htobe32(len | MLX5_INLINE_SEG);
      CHECK(same(ours, &hdr, 4), "inline header differs");
      CHECK(same(reinterpret_cast<uint8_t*>(ours) + 4, payload, len), "inline payload differs");
      CHECK(m::is_inline_seg(ours[0]) && m::inline_length(ours[0]) == len, "inline decode");
      const uint32_t ds = m::inline_seg_ds(len);
      for (uint32_t b = 4 + len; b < ds * 16; ++b)
        CHECK(reinterpret_cast<uint8_t*>(ours)[b] == 0, "inline padding not zero");
      if (len == 8) {
        uint64_t v;
        std::memcpy(&v, payload, 8);
        m::Seg16 fast;
        m::set_inline_seg_u64(fast, v);
        CHECK(same(&fast, ours, 16), "8-byte inline fast path differs from the generic one");
      }
    }
    // The streamed inline write (what mini-gda's GPU path runs) writes the same ring bytes as the
    // image-built one, from a payload at any alignment, wrapping at the ring end, touching nothing
    // else of the ring.
    {
      const uint32_t len = 1 + r32() % m::kMaxInlineRc;
      alignas(8) uint8_t src[m::kMaxInlineRc + 8];
      for (auto& b : src) b = r8();
      const uint8_t* payload = src + r32() % 8;
      m::WqeHeader h;
      h.pi = static_cast<uint16_t>(rng());
      h.qpn = r32() & 0xffffff;
      h.signaled = rng() & 1;
      const uint64_t raddr = rng();
      const uint32_t rkey = r32();
      constexpr uint32_t kRingBBs = 8;
      alignas(64) uint8_t ring_ref[kRingBBs * 64], ring_ours[kRingBBs * 64];
      for (auto& b : ring_ref) b = r8();
      std::memcpy(ring_ours, ring_ref, sizeof(ring_ref));
      m::WqeImage img;
      const uint32_t ds_ref = m::build_rdma_write_inline(img, h, raddr, rkey, payload, len);
      m::store_wqe(ring_ref, kRingBBs, h.pi, img, ds_ref);
      m::Seg16 ctrl;
      const uint32_t ds = m::store_rdma_write_inline(ring_ours, kRingBBs, h.pi, h, raddr, rkey, payload, len, &ctrl);
      CHECK(ds == ds_ref && same(&ctrl, &img.seg[0], 16), "streamed inline write: ds %u vs %u or ctrl differs", ds,
             ds_ref);
      CHECK(same(ring_ours, ring_ref, sizeof(ring_ref)), "streamed inline write of %u B (payload at +%u) differs",
             len, unsigned(payload - src));
    }
    // Whole RC RDMA write WQE (ctrl + raddr + data, ds 3) built the way rdma-core's
    // _mlx5_post_send would for IBV_WR_RDMA_WRITE with one SGE.
    {
      m::WqeHeader h;
      h.pi = static_cast<uint16_t>(rng());
      h.qpn = r32() & 0xffffff;
      h.signaled = (i % 3) == 0;
      const uint64_t raddr = rng(), laddr = rng();
      // 1..65535: an empty write has no data segment (check_zero_length_and_inline_limits).
      const uint32_t rkey = r32(), lkey = r32(), len = 1 + r32() % 65535;
      uint8_t ref[64] = {0};
      auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(ref);
      auto* rseg = reinterpret_cast<mlx5_wqe_raddr_seg*>(ref + 16);
      auto* dseg = reinterpret_cast<mlx5_wqe_data_seg*>(ref + 32);
      mlx5dv_set_ctrl_seg(ctrl, h.pi, MLX5_OPCODE_RDMA_WRITE, 0, h.qpn, h.signaled ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 3,
                          0, 0);
      ctrl->dci_stream_channel_id = 0;
      rseg->raddr = htobe64(raddr);
      rseg->rkey = htobe32(rkey);
      rseg->reserved = 0;
      mlx5dv_set_data_seg(dseg, len, lkey, static_cast<uintptr_t>(laddr));
      m::WqeImage img;
      std::memset(&img, 0, sizeof(img));
      const uint32_t ds = m::build_rdma_write(img, h, raddr, rkey, laddr, lkey, len);
      CHECK(ds == 3 && same(ref, &img, 48), "RC RDMA write WQE differs");
      // write with immediate: imm is stored big-endian (wr.imm_data is BE in verbs).
      const uint32_t imm = r32();
      mlx5dv_set_ctrl_seg(ctrl, h.pi, MLX5_OPCODE_RDMA_WRITE_IMM, 0, h.qpn,
                          h.signaled ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 3, 0, htobe32(imm));
      ctrl->dci_stream_channel_id = 0;
      m::build_rdma_write_imm(img, h, raddr, rkey, laddr, lkey, len, imm);
      CHECK(same(ref, &img, 48), "RDMA write-with-imm WQE differs");
      // 8-byte inline write, ds 3.
      const uint64_t value = rng();
      mlx5dv_set_ctrl_seg(ctrl, h.pi, MLX5_OPCODE_RDMA_WRITE, 0, h.qpn, h.signaled ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 3,
                          0, 0);
      ctrl->dci_stream_channel_id = 0;
      auto* inl = reinterpret_cast<mlx5_wqe_inl_data_seg*>(ref + 32);
      inl->byte_count = htobe32(8 | MLX5_INLINE_SEG);
      std::memcpy(ref + 36, &value, 8);
      std::memset(ref + 44, 0, 4);
      CHECK(m::build_rdma_write_inline_u64(img, h, raddr, rkey, value) == 3 && same(ref, &img, 48),
             "8-byte inline write WQE differs");
      CHECK(m::build_rdma_write_inline(img, h, raddr, rkey, &value, 8) == 3 && same(ref, &img, 48),
             "generic inline write WQE differs");
      // fetch-add: ctrl + raddr + atomic + data, ds 4.
      const uint64_t add = rng();
      mlx5dv_set_ctrl_seg(ctrl, h.pi, MLX5_OPCODE_ATOMIC_FA, 0, h.qpn, h.signaled ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 4,
                          0, 0);
      ctrl->dci_stream_channel_id = 0;
      auto* aseg = reinterpret_cast<mlx5_wqe_atomic_seg*>(ref + 32);
      aseg->swap_add = htobe64(add);
      aseg->compare = 0;
      mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(ref + 48), 8, lkey, static_cast<uintptr_t>(laddr));
      CHECK(m::build_atomic_fetch_add(img, h, raddr, rkey, add, laddr, lkey) == 4 && same(ref, &img, 64),
             "fetch-add WQE differs");
      // DC write with a compact AV: ctrl + av(16) + raddr + data, ds 4.
      m::AddressVector av;
      av.dc_key = rng();
      av.dct_number = r32() & 0xffffff;
      uint8_t z6[6] = {0}, z16[16] = {0};
      uint8_t dref[96] = {0};
      mlx5dv_set_ctrl_seg(reinterpret_cast<mlx5_wqe_ctrl_seg*>(dref), h.pi, MLX5_OPCODE_RDMA_WRITE, 0, h.qpn,
                          h.signaled ? MLX5_WQE_CTRL_CQ_UPDATE : 0, 4, 0, 0);
      mlx5_wqe_datagram_seg dg;
      mlx5dv_set_dgram_seg(&dg, av.dc_key, av.dct_number, 0, 0, 0, 0, z6, 0, 0, 0, z16);
      std::memcpy(dref + 16, &dg, 16);
      std::memcpy(dref + 32, rseg, 16);
      mlx5dv_set_data_seg(reinterpret_cast<mlx5_wqe_data_seg*>(dref + 48), len, lkey, static_cast<uintptr_t>(laddr));
      reinterpret_cast<mlx5_wqe_raddr_seg*>(dref + 32)->raddr = htobe64(raddr);
      reinterpret_cast<mlx5_wqe_raddr_seg*>(dref + 32)->rkey = htobe32(rkey);
      CHECK(m::build_rdma_write(img, h, raddr, rkey, laddr, lkey, len, &av) == 4 && same(dref, &img, 64),
             "DC write WQE (compact AV) differs");
      av.extended = true;
      CHECK(m::build_rdma_write(img, h, raddr, rkey, laddr, lkey, len, &av) == 6, "DC extended AV must be ds 6");
      CHECK(m::wqebbs_of_ds(6) == 2 && m::wqebbs_of_ds(3) == 1 && m::wqebbs_of_ds(4) == 1, "WQEBB count");
    }
    // dbrec: BE32 of the 16-bit producer index, as post_send_db writes it.
    {
      const uint32_t cur_post = r32();
      const uint32_t ref = htobe32(cur_post & 0xffff);
      CHECK(m::sq_dbrec_value(cur_post) == ref, "dbrec value differs");
      CHECK(m::sq_dbrec_pi(ref) == (cur_post & 0xffff), "dbrec decode");
      CHECK(m::cq_dbrec_value(cur_post) == htobe32(cur_post & 0xffffff), "cq dbrec value differs");
    }
    // CQE decode against fields set through rdma-core's structs.
    {
      mlx5_cqe64 ref;
      std::memset(&ref, 0, sizeof(ref));
      const uint16_t counter = static_cast<uint16_t>(rng());
      const uint32_t qpn = r32() & 0xffffff, bytes = r32(), imm = r32();
      const uint8_t opcode = r8() & 0xf, owner = r8() & 1;
      ref.wqe_counter = htobe16(counter);
      ref.sop_drop_qpn = htobe32(qpn | (0x08u << 24));
      ref.byte_cnt = htobe32(bytes);
      ref.imm_inval_pkey = htobe32(imm);
      ref.op_own = static_cast<uint8_t>((opcode << 4) | owner);
      m::Cqe64 ours;
      std::memcpy(&ours, &ref, 64);
      const m::CqeFields f = m::decode_cqe(ours);
      CHECK(f.opcode == mlx5dv_get_cqe_opcode(&ref) && f.owner == mlx5dv_get_cqe_owner(&ref) &&
                 f.wqe_counter == counter && f.qpn == qpn && f.byte_cnt == bytes && f.imm == imm && f.wqe_opcode == 8,
             "cqe decode mismatch");
      // Our encoder produces what rdma-core's consumer reads.
      const uint32_t tail = m::encode_req_cqe(ours, counter, qpn, 0x08, bytes, owner);
      ours.w[15] = tail;
      mlx5_cqe64 back;
      std::memcpy(&back, &ours, 64);
      CHECK(mlx5dv_get_cqe_opcode(&back) == MLX5_CQE_REQ && mlx5dv_get_cqe_owner(&back) == owner &&
                 be16toh(back.wqe_counter) == counter && (be32toh(back.sop_drop_qpn) & 0xffffff) == qpn &&
                 be32toh(back.byte_cnt) == bytes,
             "req cqe encode mismatch");
      const uint8_t synd = r8(), vendor = r8();
      ours.w[15] = m::encode_err_cqe(ours, counter, qpn, 0x08, synd, vendor, owner);
      mlx5_err_cqe err;
      std::memcpy(&err, &ours, 64);
      CHECK(err.syndrome == synd && err.vendor_err_synd == vendor && be16toh(err.wqe_counter) == counter &&
                 (err.op_own >> 4) == MLX5_CQE_REQ_ERR && (be32toh(err.s_wqe_opcode_qpn) & 0xffffff) == qpn,
             "err cqe encode mismatch");
      const m::CqeFields e = m::decode_cqe(ours);
      CHECK(e.syndrome == synd && e.vendor_syndrome == vendor && e.opcode == m::kCqeReqErr, "err cqe decode");
    }
  }
  // Owner-bit protocol: a fresh CQ shows nothing ready; owner flips every pass.
  {
    m::Cqe64 c;
    m::init_cqe(c);
    CHECK(!m::cqe_ready(m::tail_op_own(c.w[15]), 0, 8), "fresh CQE must not be ready");
    CHECK(m::expected_owner(7, 8) == 0 && m::expected_owner(8, 8) == 1 && m::expected_owner(16, 8) == 0, "owner");
    c.w[15] = m::encode_req_cqe(c, 3, 1, 8, 0, 0);
    CHECK(m::cqe_ready(m::tail_op_own(c.w[15]), 3, 8), "first-pass CQE ready");
    CHECK(!m::cqe_ready(m::tail_op_own(c.w[15]), 11, 8), "first-pass CQE must look stale on the second pass");
  }
  check_zero_length_and_inline_limits();
  // Ring placement: a 2-WQEBB WQE at the last slot wraps to slot 0.
  {
    alignas(64) uint8_t ring[4 * 64];
    std::memset(ring, 0, sizeof(ring));
    m::WqeImage img;
    for (uint32_t s = 0; s < 8; ++s) img.seg[s] = m::Seg16{{s + 1, s + 1, s + 1, s + 1}};
    m::store_wqe(ring, 4, 7, img, 6);
    CHECK(same(ring + 3 * 64, &img.seg[0], 64) && same(ring, &img.seg[4], 32), "wrapped WQE placement");
  }
  if (check_result("test_mlx5_formats")) return 1;
  std::printf("test_mlx5_formats: %d randomized rounds, all encoders match rdma-core\n", kRounds);
  return 0;
}
