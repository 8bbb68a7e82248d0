// mlx5 send-WQE encoders, __host__ __device__.
//
// Layouts follow rdma-core providers/mlx5/mlx5dv.h exactly (mlx5_wqe_ctrl_seg, mlx5_wqe_raddr_seg,
// mlx5_wqe_data_seg, mlx5_wqe_inl_data_seg, mlx5_wqe_atomic_seg, mlx5_wqe_av); tests/mlx5 compares
// every encoder byte for byte with rdma-core's own helpers. We do not include mlx5dv.h here because
// the GPU build and machines without rdma-core must compile this too.
//
// Every segment is 16 bytes and is written as four 32-bit words whose byte order is explicit at
// each store: a word holding a big-endian field is produced with to_be32/to_be16. A whole WQE is
// first built in a WqeImage (registers on the GPU) and then copied to the send queue with wide
// stores (store_wqe), because one 16-byte store is cheaper than four 4-byte ones on both sides.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gicomm/common/hd.h"

namespace gicomm::mlx5 {

// ---- constants (values from mlx5dv.h) ---------------------------------------------------------
constexpr uint8_t kOpcodeNop = 0x00;
constexpr uint8_t kOpcodeRdmaWrite = 0x08;
constexpr uint8_t kOpcodeRdmaWriteImm = 0x09;
constexpr uint8_t kOpcodeSend = 0x0a;
constexpr uint8_t kOpcodeRdmaRead = 0x10;
constexpr uint8_t kOpcodeAtomicCs = 0x11;
constexpr uint8_t kOpcodeAtomicFa = 0x12;

constexpr uint8_t kCtrlCqUpdate = 2 << 2;   // MLX5_WQE_CTRL_CQ_UPDATE: request a CQE (signaled)
constexpr uint8_t kCtrlSolicited = 1 << 1;  // MLX5_WQE_CTRL_SOLICITED
constexpr uint8_t kCtrlFence = 4 << 5;      // MLX5_WQE_CTRL_FENCE

constexpr uint32_t kSendWqeBB = 64;  // MLX5_SEND_WQE_BB
constexpr uint32_t kSendWqeShift = 6;
constexpr uint32_t kInlineSeg = 0x80000000u;     // MLX5_INLINE_SEG, or-ed into the inline byte count
constexpr uint32_t kExtendedUdAv = 0x80000000u;  // MLX5_EXTENDED_UD_AV: full 48-byte address vector
constexpr uint32_t kSndDbr = 1;                   // MLX5_SND_DBR: send index in the doorbell record
constexpr uint32_t kRcvDbr = 0;

// A WqeImage holds up to this many WQEBBs (256 bytes, ds <= 16).
constexpr uint32_t kMaxWqeBBs = 4;
constexpr uint32_t kMaxDs = kMaxWqeBBs * kSendWqeBB / 16;
// Largest inline payload in an RC write: 256 B - ctrl - raddr - 4 B inline header.
constexpr uint32_t kMaxInlineRc = kMaxWqeBBs * kSendWqeBB - 16 - 16 - 4;

// ---- raw segments -----------------------------------------------------------------------------
// One 16-byte segment as four little-endian-loaded words: w[i] covers bytes 4i..4i+3.
struct alignas(16) Seg16 {
  uint32_t w[4];
};
static_assert(sizeof(Seg16) == 16, "segment is 16 bytes");

// A WQE being built: up to kMaxWqeBBs basic blocks of 4 segments.
struct alignas(16) WqeImage {
  Seg16 seg[kMaxDs];
};

// ---- per-segment encoders ------------------------------------------------------------------------
// mlx5_wqe_ctrl_seg, exactly as mlx5dv_set_ctrl_seg() fills it:
//   bytes 0..3  opmod_idx_opcode = BE32(opmod<<24 | pi<<8 | opcode)
//   bytes 4..7  qpn_ds           = BE32(qpn<<8 | ds)
//   byte  8     signature, bytes 9..10 dci_stream_channel_id (BE16, left 0 by the helper), byte 11 fm_ce_se
//   bytes 12..15 imm, stored as given (the caller passes it already in wire order, like rdma-core)
GICOMM_HD void set_ctrl_seg(Seg16& s, uint16_t pi, uint8_t opcode, uint8_t opmod, uint32_t qpn,
                            uint8_t fm_ce_se, uint8_t ds, uint8_t signature, uint32_t imm) {
  s.w[0] = to_be32((static_cast<uint32_t>(opmod) << 24) | (static_cast<uint32_t>(pi) << 8) | opcode);
  s.w[1] = to_be32((qpn << 8) | ds);
  s.w[2] = static_cast<uint32_t>(signature) | (static_cast<uint32_t>(fm_ce_se) << 24);
  s.w[3] = imm;
}

// mlx5_wqe_raddr_seg: BE64 remote address, BE32 rkey, 4 reserved bytes (zero).
GICOMM_HD void set_raddr_seg(Seg16& s, uint64_t raddr, uint32_t rkey) {
  const uint64_t be = to_be64(raddr);
  s.w[0] = static_cast<uint32_t>(be);
  s.w[1] = static_cast<uint32_t>(be >> 32);
  s.w[2] = to_be32(rkey);
  s.w[3] = 0;
}

// mlx5_wqe_data_seg, as mlx5dv_set_data_seg(): BE32 byte_count, BE32 lkey, BE64 address.
GICOMM_HD void set_data_seg(Seg16& s, uint32_t length, uint32_t lkey, uint64_t addr) {
  const uint64_t be = to_be64(addr);
  s.w[0] = to_be32(length);
  s.w[1] = to_be32(lkey);
  s.w[2] = static_cast<uint32_t>(be);
  s.w[3] = static_cast<uint32_t>(be >> 32);
}

// mlx5_wqe_atomic_seg: BE64 swap_add (the addend for fetch-add), BE64 compare.
GICOMM_HD void set_atomic_seg(Seg16& s, uint64_t swap_add, uint64_t compare) {
  const uint64_t a = to_be64(swap_add);
  const uint64_t c = to_be64(compare);
  s.w[0] = static_cast<uint32_t>(a);
  s.w[1] = static_cast<uint32_t>(a >> 32);
  s.w[2] = static_cast<uint32_t>(c);
  s.w[3] = static_cast<uint32_t>(c >> 32);
}

// Number of 16-byte units an inline segment of `length` payload bytes occupies (4-byte header).
GICOMM_HD uint32_t inline_seg_ds(uint32_t length) { return (4 + length + 15) / 16; }

// mlx5_wqe_inl_data_seg followed by the payload: BE32(length | MLX5_INLINE_SEG), then the bytes,
// zero padded to the segment end. `first` is the first inline segment; the payload may run into
// the following segments of the same image.
GICOMM_HD void set_inline_seg(Seg16* first, const void* payload, uint32_t length) {
  uint8_t* bytes = reinterpret_cast<uint8_t*>(first);
  const uint32_t ds = inline_seg_ds(length);
  for (uint32_t i = 0; i < ds; ++i) first[i] = Seg16{{0, 0, 0, 0}};
  first->w[0] = to_be32(length | kInlineSeg);
  const uint8_t* src = static_cast<const uint8_t*>(payload);
  for (uint32_t i = 0; i < length; ++i) bytes[4 + i] = src[i];
}

// Fast path for the common 8-byte inline value (nvshmem_p-style): header + one 64-bit value.
GICOMM_HD void set_inline_seg_u64(Seg16& s, uint64_t value_in_memory_order) {
  s.w[0] = to_be32(8u | kInlineSeg);
  s.w[1] = static_cast<uint32_t>(value_in_memory_order);
  s.w[2] = static_cast<uint32_t>(value_in_memory_order >> 32);
  s.w[3] = 0;
}

// mlx5_wqe_av as mlx5dv_set_dgram_seg() fills it. The compact form (ext = 0) is the first 16 bytes
// only; the extended form (ext = 1) is 48 bytes. Only the fields DC to a peer on the same fabric
// needs are parameters; the rest (rmac, tclass, hop limit, GRH, rgid) are zero.
struct AddressVector {
  uint64_t dc_key = 0;
  uint32_t dct_number = 0;  // 24-bit DCT number
  uint8_t stat_rate_sl = 0;
  uint8_t fl_mlid = 0;
  uint16_t rlid = 0;
  bool extended = false;  // 48-byte AV (ds 3) instead of the 16-byte compact one (ds 1)
};

GICOMM_HD uint32_t av_ds(const AddressVector& av) { return av.extended ? 3u : 1u; }

GICOMM_HD void set_av_seg(Seg16* s, const AddressVector& av) {
  const uint64_t key = to_be64(av.dc_key);
  s[0].w[0] = static_cast<uint32_t>(key);
  s[0].w[1] = static_cast<uint32_t>(key >> 32);
  s[0].w[2] = to_be32((av.extended ? kExtendedUdAv : 0u) | (av.dct_number & 0xffffffu));
  s[0].w[3] = static_cast<uint32_t>(av.stat_rate_sl) | (static_cast<uint32_t>(av.fl_mlid) << 8) |
              (static_cast<uint32_t>(to_be16(av.rlid)) << 16);
  if (av.extended) {
    s[1] = Seg16{{0, 0, 0, 0}};
    s[2] = Seg16{{0, 0, 0, 0}};
  }
}

// ---- whole work requests ----------------------------------------------------------------------------
// What every work request shares: its slot (producer index, 16 bits on the wire), the QP number,
// and whether it asks for a CQE.
struct WqeHeader {
  uint16_t pi = 0;
  uint32_t qpn = 0;
  bool signaled = false;
  bool fence = false;
};

GICOMM_HD uint8_t fm_ce_se_of(const WqeHeader& h) {
  return static_cast<uint8_t>((h.signaled ? kCtrlCqUpdate : 0) | (h.fence ? kCtrlFence : 0));
}

// WQEBBs occupied by a WQE of `ds` 16-byte units.
GICOMM_HD uint32_t wqebbs_of_ds(uint32_t ds) { return (ds * 16 + kSendWqeBB - 1) / kSendWqeBB; }

// The optional DC address vector sits between ctrl and raddr (mlx5 WQE construction order).
// Returns the index of the next free segment.
GICOMM_HD uint32_t put_av_if_dc(WqeImage& img, const AddressVector* dc) {
  if (dc == nullptr) return 1;
  set_av_seg(&img.seg[1], *dc);
  return 1 + av_ds(*dc);
}

// RC (dc == nullptr) or DC RDMA write from a registered local buffer. Returns ds. An empty write
// (length 0) has no data segment, as rdma-core posts it (_mlx5_post_send skips an SGE of length 0:
// a data segment's byte_count 0 means 2 GiB to a ConnectX): ctrl + raddr, ds 2 (RC).
GICOMM_HD uint32_t build_rdma_write(WqeImage& img, const WqeHeader& h, uint64_t raddr, uint32_t rkey,
                                    uint64_t laddr, uint32_t lkey, uint32_t length,
                                    const AddressVector* dc = nullptr) {
  uint32_t n = put_av_if_dc(img, dc);
  set_raddr_seg(img.seg[n++], raddr, rkey);
  if (length != 0) set_data_seg(img.seg[n++], length, lkey, laddr);
  set_ctrl_seg(img.seg[0], h.pi, kOpcodeRdmaWrite, 0, h.qpn, fm_ce_se_of(h), static_cast<uint8_t>(n), 0, 0);
  return n;
}

// RDMA write with immediate: `imm_host` is given in host order and stored big-endian, as
// ibv_post_send does for IBV_WR_RDMA_WRITE_WITH_IMM (wr.imm_data is already BE there). Empty
// (length 0): no data segment, as build_rdma_write.
GICOMM_HD uint32_t build_rdma_write_imm(WqeImage& img, const WqeHeader& h, uint64_t raddr, uint32_t rkey,
                                        uint64_t laddr, uint32_t lkey, uint32_t length, uint32_t imm_host,
                                        const AddressVector* dc = nullptr) {
  uint32_t n = put_av_if_dc(img, dc);
  set_raddr_seg(img.seg[n++], raddr, rkey);
  if (length != 0) set_data_seg(img.seg[n++], length, lkey, laddr);
  set_ctrl_seg(img.seg[0], h.pi, kOpcodeRdmaWriteImm, 0, h.qpn, fm_ce_se_of(h), static_cast<uint8_t>(n), 0,
               to_be32(imm_host));
  return n;
}

// Largest inline payload of an RDMA write that fits a WqeImage (kMaxWqeBBs WQEBBs) after ctrl, the
// DC address vector (if any) and raddr: kMaxInlineRc for RC, 16 / 48 bytes less with a compact /
// extended AV.
GICOMM_HD uint32_t max_inline_rdma_write(const AddressVector* dc = nullptr) {
  return kMaxInlineRc - (dc == nullptr ? 0u : 16u * av_ds(*dc));
}

// RDMA write with the payload inline in the WQE. Returns ds, or 0 when `length` exceeds
// max_inline_rdma_write(dc) (the WQE would not fit; nothing is written). An empty payload gets no
// inline segment, as rdma-core's set_data_inl_seg (ds 2 for RC).
GICOMM_HD uint32_t build_rdma_write_inline(WqeImage& img, const WqeHeader& h, uint64_t raddr, uint32_t rkey,
                                           const void* payload, uint32_t length,
                                           const AddressVector* dc = nullptr) {
  if (length > max_inline_rdma_write(dc)) return 0;
  uint32_t n = put_av_if_dc(img, dc);
  set_raddr_seg(img.seg[n++], raddr, rkey);
  if (length != 0) {
    set_inline_seg(&img.seg[n], payload, length);
    n += inline_seg_ds(length);
  }
  set_ctrl_seg(img.seg[0], h.pi, kOpcodeRdmaWrite, 0, h.qpn, fm_ce_se_of(h), static_cast<uint8_t>(n), 0, 0);
  return n;
}

// The 8-byte inline RC write of mini-gda's fast path: ctrl + raddr + inline(8 B) = 48 B, ds 3.
GICOMM_HD uint32_t build_rdma_write_inline_u64(WqeImage& img, const WqeHeader& h, uint64_t raddr,
                                               uint32_t rkey, uint64_t value_in_memory_order) {
  set_raddr_seg(img.seg[1], raddr, rkey);
  set_inline_seg_u64(img.seg[2], value_in_memory_order);
  set_ctrl_seg(img.seg[0], h.pi, kOpcodeRdmaWrite, 0, h.qpn, fm_ce_se_of(h), 3, 0, 0);
  return 3;
}

// Atomic fetch-and-add on the remote 8-byte word; the old value lands in the local 8-byte buffer.
// ctrl + raddr + atomic + data = 64 B, ds 4 (5/7 with a DC AV).
GICOMM_HD uint32_t build_atomic_fetch_add(WqeImage& img, const WqeHeader& h, uint64_t raddr, uint32_t rkey,
                                          uint64_t add, uint64_t laddr, uint32_t lkey,
                                          const AddressVector* dc = nullptr) {
  uint32_t n = put_av_if_dc(img, dc);
  set_raddr_seg(img.seg[n++], raddr, rkey);
  set_atomic_seg(img.seg[n++], add, 0);
  set_data_seg(img.seg[n++], 8, lkey, laddr);
  set_ctrl_seg(img.seg[0], h.pi, kOpcodeAtomicFa, 0, h.qpn, fm_ce_se_of(h), static_cast<uint8_t>(n), 0, 0);
  return n;
}

GICOMM_HD uint32_t build_nop(WqeImage& img, const WqeHeader& h) {
  set_ctrl_seg(img.seg[0], h.pi, kOpcodeNop, 0, h.qpn, fm_ce_se_of(h), 1, 0, 0);
  return 1;
}

// ---- decoding (used by the softnic and the tests) ----------------------------------------------------
struct CtrlFields {
  uint8_t opcode;
  uint8_t opmod;
  uint16_t wqe_index;
  uint32_t qpn;
  uint8_t ds;
  uint8_t signature;
  uint8_t fm_ce_se;
  uint32_t imm_raw;  // as stored (wire order)
};

GICOMM_HD CtrlFields decode_ctrl(const Seg16& s) {
  const uint32_t a = from_be32(s.w[0]);
  const uint32_t b = from_be32(s.w[1]);
  CtrlFields f;
  f.opcode = static_cast<uint8_t>(a & 0xff);
  f.wqe_index = static_cast<uint16_t>((a >> 8) & 0xffff);
  f.opmod = static_cast<uint8_t>(a >> 24);
  f.qpn = b >> 8;
  f.ds = static_cast<uint8_t>(b & 0x3f);  // ds is 6 bits; the upper 2 bits of the byte are reserved
  f.signature = static_cast<uint8_t>(s.w[2] & 0xff);
  f.fm_ce_se = static_cast<uint8_t>(s.w[2] >> 24);
  f.imm_raw = s.w[3];
  return f;
}

GICOMM_HD uint64_t decode_raddr(const Seg16& s, uint32_t* rkey) {
  *rkey = from_be32(s.w[2]);
  return from_be64(static_cast<uint64_t>(s.w[0]) | (static_cast<uint64_t>(s.w[1]) << 32));
}

GICOMM_HD uint64_t decode_data(const Seg16& s, uint32_t* length, uint32_t* lkey) {
  *length = from_be32(s.w[0]);
  *lkey = from_be32(s.w[1]);
  return from_be64(static_cast<uint64_t>(s.w[2]) | (static_cast<uint64_t>(s.w[3]) << 32));
}

GICOMM_HD uint64_t decode_atomic_add(const Seg16& s) {
  return from_be64(static_cast<uint64_t>(s.w[0]) | (static_cast<uint64_t>(s.w[1]) << 32));
}

// True when the first word of a data-or-inline segment marks inline data.
GICOMM_HD bool is_inline_seg(const Seg16& s) { return (from_be32(s.w[0]) & kInlineSeg) != 0; }
GICOMM_HD uint32_t inline_length(const Seg16& s) { return from_be32(s.w[0]) & ~kInlineSeg; }

// ---- placing a built WQE into the send queue -----------------------------------------------------------
// Byte address of WQEBB `index` (any 16-bit or wider counter) of a ring of `wqe_cnt` WQEBBs
// (a power of two).
GICOMM_HD uint8_t* wqebb_ptr(void* sq_buf, uint32_t wqe_cnt, uint32_t index) {
  return static_cast<uint8_t*>(sq_buf) + static_cast<size_t>(index & (wqe_cnt - 1)) * kSendWqeBB;
}

// Stores segment `s` (0-based within the WQE) of the WQE at WQEBB `pi`, wrapping at the ring end per
// WQEBB as the hardware does. Plain stores: the caller orders them before the doorbell
// (gicomm/order.cuh).
GICOMM_HD void store_seg(void* sq_buf, uint32_t wqe_cnt, uint32_t pi, uint32_t s, const Seg16& seg) {
  Seg16* bb = reinterpret_cast<Seg16*>(wqebb_ptr(sq_buf, wqe_cnt, pi + s / 4));
#if defined(__CUDA_ARCH__)
  reinterpret_cast<uint4*>(bb)[s % 4] = make_uint4(seg.w[0], seg.w[1], seg.w[2], seg.w[3]);
#else
  bb[s % 4] = seg;
#endif
}

// Copies `ds` segments of `img` into the ring at WQEBB `pi`.
GICOMM_HD void store_wqe(void* sq_buf, uint32_t wqe_cnt, uint32_t pi, const WqeImage& img, uint32_t ds) {
  for (uint32_t s = 0; s < ds; ++s) store_seg(sq_buf, wqe_cnt, pi, s, img.seg[s]);
}

// Segment `k` of an inline run of `length` payload bytes, as set_inline_seg lays the run out (the
// BE32 byte count, then payload byte i at run byte 4 + i, zero padded): run word j >= 1 is payload
// word j - 1, read as one 32-bit load when the payload is 4-byte aligned, never past `length`.
GICOMM_HD Seg16 inline_seg_at(const uint8_t* payload, uint32_t length, uint32_t k) {
  Seg16 seg;
  const bool aligned = (reinterpret_cast<uintptr_t>(payload) & 3) == 0;
  for (uint32_t i = 0; i < 4; ++i) {
    const uint32_t j = 4 * k + i;
    if (j == 0) {
      seg.w[0] = to_be32(length | kInlineSeg);
      continue;
    }
    const uint32_t at = 4 * (j - 1);
    uint32_t w = 0;
    if (at + 4 <= length && aligned) {
#if defined(__CUDA_ARCH__)
      w = *reinterpret_cast<const uint32_t*>(payload + at);
#else
      std::memcpy(&w, payload + at, 4);  // one load as well; no type-punned access on the host
#endif
    } else {
      for (uint32_t b = 0; b < 4 && at + b < length; ++b) w |= static_cast<uint32_t>(payload[at + b]) << (8 * b);
    }
    seg.w[i] = w;  // little-endian words: byte b of the payload word lands at byte b of the run word
  }
  return seg;
}

// The inline RC write built segment by segment straight into the ring, the same bytes as
// build_rdma_write_inline + store_wqe, with no WQE image: a 256-byte image indexed by a run-time
// length lives in (slow) local memory on a GPU. Returns ds, or 0 (nothing stored, `ctrl`
// untouched) when `length` exceeds kMaxInlineRc; `ctrl` receives the control segment (for the
// doorbell value).
GICOMM_HD uint32_t store_rdma_write_inline(void* sq_buf, uint32_t wqe_cnt, uint32_t pi, const WqeHeader& h,
                                           uint64_t raddr, uint32_t rkey, const void* payload, uint32_t length,
                                           Seg16* ctrl) {
  if (length > kMaxInlineRc) return 0;
  const uint32_t ds = 2 + (length != 0 ? inline_seg_ds(length) : 0u);
  set_ctrl_seg(*ctrl, h.pi, kOpcodeRdmaWrite, 0, h.qpn, fm_ce_se_of(h), static_cast<uint8_t>(ds), 0, 0);
  store_seg(sq_buf, wqe_cnt, pi, 0, *ctrl);
  Seg16 r;
  set_raddr_seg(r, raddr, rkey);
  store_seg(sq_buf, wqe_cnt, pi, 1, r);
  const uint8_t* bytes = static_cast<const uint8_t*>(payload);
  // Four inline segments at a time, their payload loads before their stores: a load that follows
  // a store the compiler cannot prove disjoint waits for it, so segment by segment would cost one
  // memory round trip each (measured on H200: ~330 SM cycles per 16 B).
  const uint32_t nseg = ds - 2;
  for (uint32_t k0 = 0; k0 < nseg; k0 += 4) {
    Seg16 run[4];
    for (uint32_t i = 0; i < 4; ++i)
      if (k0 + i < nseg) run[i] = inline_seg_at(bytes, length, k0 + i);
    for (uint32_t i = 0; i < 4; ++i)
      if (k0 + i < nseg) store_seg(sq_buf, wqe_cnt, pi, 2 + k0 + i, run[i]);
  }
  return ds;
}

}  // namespace gicomm::mlx5
