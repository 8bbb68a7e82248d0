// softnic core: WQE checking and execution, __host__ __device__, shared by the cpu engine (host
// threads) and the gpu engine (a persistent kernel), so both model the NIC with the same code.
//
// An engine supplies a memory policy `Mem` with:
//   void copy(void* dst, const void* src, uint32_t bytes)    payload move (remote <- local/inline)
//   void fetch_add(uint64_t* remote, uint64_t add, void* old) atomic on the remote word; its old
//                                                             value lands in `old` (8 bytes, local)
// Each is called at most once per WQE, after the WQE passed every check, so an engine may also
// record the calls and perform them later (the gpu engine does, to move a chunk's payloads with
// the whole warp).
#pragma once

#include <cstdint>

#include "gicomm/common/hd.h"
#include "gicomm/mlx5/cqe.h"
#include "gicomm/mlx5/queue.h"
#include "gicomm/mlx5/wqe.h"

namespace gicomm::softnic {

constexpr uint32_t kAccessLocalWrite = 1;
constexpr uint32_t kAccessRemoteWrite = 2;
constexpr uint32_t kAccessRemoteRead = 4;
constexpr uint32_t kAccessRemoteAtomic = 8;

constexpr uint32_t kMaxMessageBytes = 1u << 30;  // larger writes fail with LOCAL_LENGTH_ERR

struct MrEntry {
  uint64_t addr;
  uint64_t length;
  uint32_t key;  // (index << 8) | 8-bit tag; lkey == rkey
  uint32_t access;
};

struct DctEntry {
  uint32_t dct_number;
  uint32_t pad;
  uint64_t dc_key;
};

// Key tables; the arrays are append-only so engines read them without a lock.
struct Tables {
  const MrEntry* mrs = nullptr;
  uint32_t num_mrs = 0;
  const DctEntry* dcts = nullptr;
  uint32_t num_dcts = 0;
};

// Engine-side state of one QP (lives where its engine runs).
struct QpState {
  mlx5::SqDesc sq;
  mlx5::CqDesc cq;
  uint32_t ci = 0;        // next WQEBB to execute (unwrapped)
  uint32_t cq_pi = 0;     // next CQE to write (unwrapped)
  uint64_t last_doorbell = ~0ull;
  uint32_t error = 0;     // nonzero once a WQE failed: later WQEs are flushed
  uint32_t dc = 0;        // DC initiator: an address vector follows every ctrl segment
};

// Engine statistics (per engine thread / warp; summed by the engine).
struct Counters {
  uint64_t wqes = 0;           // WQEs executed (including errors and flushes)
  uint64_t cqes = 0;           // CQEs written (good and error)
  uint64_t errors = 0;         // error CQEs other than flushes
  uint64_t flushes = 0;        // WQEs flushed after an error
  uint64_t stale_retries = 0;  // WQE reads that saw an old ctrl index and were re-read (ordering)
  uint64_t bytes = 0;          // payload bytes moved
  uint64_t grid_rounds = 0;    // gpu engine: rounds of copies (8 KiB) moved by blocks helping another's QP

  Counters& operator+=(const Counters& o) {
    wqes += o.wqes;
    cqes += o.cqes;
    errors += o.errors;
    flushes += o.flushes;
    stale_retries += o.stale_retries;
    bytes += o.bytes;
    grid_rounds += o.grid_rounds;
    return *this;
  }
};

// Outcome of one WQE.
struct ExecResult {
  uint8_t syndrome = 0;  // 0: success; else an MLX5_CQE_SYNDROME_*
  uint8_t opcode = 0;    // the WQE's opcode (goes into the CQE)
  bool signaled = false;
  uint32_t byte_cnt = 0;
};

// Returns the memory region entry `key` names when [addr, addr+len) lies inside it and it grants
// `need`, else nullptr.
GICOMM_HD const MrEntry* check_key(const Tables& t, uint32_t key, uint64_t addr, uint64_t len, uint32_t need) {
  const uint32_t index = key >> 8;
  if (index >= t.num_mrs) return nullptr;
  const MrEntry* e = &t.mrs[index];
  if (e->key != key) return nullptr;
  if ((e->access & need) != need) return nullptr;
  if (addr < e->addr || len > e->length || addr - e->addr > e->length - len) return nullptr;
  return e;
}

GICOMM_HD bool check_dct(const Tables& t, const mlx5::Seg16& av) {
  const uint32_t dct = from_be32(av.w[2]) & 0xffffff;
  const uint64_t key = from_be64(static_cast<uint64_t>(av.w[0]) | (static_cast<uint64_t>(av.w[1]) << 32));
  for (uint32_t i = 0; i < t.num_dcts; ++i) {
    if (t.dcts[i].dct_number == dct) return t.dcts[i].dc_key == key;
  }
  return false;
}

// Checks the WQE in `img` (its ctrl segment already matched the expected index and QP) and, when
// it is valid, performs it. `dc` tells whether the QP is a DC initiator (an AV follows ctrl).
// With kPerform = false it only validates (the gpu engine validates a whole chunk in parallel
// before it lets any WQE after a bad one take effect).
template <bool kPerform = true, class Mem>
GICOMM_HD ExecResult execute_wqe(const Tables& t, const mlx5::WqeImage& img, bool dc, Mem& mem) {
  using namespace gicomm::mlx5;
  const CtrlFields c = decode_ctrl(img.seg[0]);
  ExecResult r;
  r.opcode = c.opcode;
  r.signaled = (c.fm_ce_se & kCtrlCqUpdate) != 0;
  if (c.ds == 0 || c.ds > kMaxDs) {
    r.syndrome = kSyndromeLocalQpOp;
    return r;
  }
  if (c.opcode == kOpcodeNop) return r;
  uint32_t n = 1;
  if (dc) {
    const bool extended = (from_be32(img.seg[1].w[2]) & kExtendedUdAv) != 0;
    if (!check_dct(t, img.seg[1])) {
      r.syndrome = kSyndromeRemoteAccess;
      return r;
    }
    n += extended ? 3 : 1;
  }
  if (n + 1 > c.ds) {
    r.syndrome = kSyndromeLocalQpOp;
    return r;
  }
  uint32_t rkey = 0;
  const uint64_t raddr = decode_raddr(img.seg[n], &rkey);
  ++n;
  if (c.opcode == kOpcodeRdmaWrite || c.opcode == kOpcodeRdmaWriteImm) {
    // No data segment: an empty write, as rdma-core posts it (ctrl + raddr). Nothing moves, and
    // InfiniBand does not check the rkey or address of a zero-length write (IBA C9-88).
    if (n == c.ds) return r;
    const Seg16& d = img.seg[n];
    uint32_t length = 0;
    const void* src = nullptr;
    if (is_inline_seg(d)) {
      length = inline_length(d);
      if (n + inline_seg_ds(length) != c.ds) {
        r.syndrome = kSyndromeLocalLength;
        return r;
      }
      src = reinterpret_cast<const uint8_t*>(&d) + 4;
    } else {
      if (n + 1 != c.ds) {
        r.syndrome = kSyndromeLocalQpOp;
        return r;
      }
      uint32_t lkey = 0;
      const uint64_t laddr = decode_data(d, &length, &lkey);
      if (length > kMaxMessageBytes) {
        r.syndrome = kSyndromeLocalLength;
        return r;
      }
      if (check_key(t, lkey, laddr, length, 0) == nullptr) {
        r.syndrome = kSyndromeLocalProt;
        return r;
      }
      src = reinterpret_cast<const void*>(static_cast<uintptr_t>(laddr));
    }
    if (check_key(t, rkey, raddr, length, kAccessRemoteWrite) == nullptr) {
      r.syndrome = kSyndromeRemoteAccess;
      return r;
    }
    if (kPerform && length != 0) mem.copy(reinterpret_cast<void*>(static_cast<uintptr_t>(raddr)), src, length);
    r.byte_cnt = length;
    return r;
  }
  if (c.opcode == kOpcodeAtomicFa) {
    if (n + 2 != c.ds) {
      r.syndrome = kSyndromeLocalQpOp;
      return r;
    }
    const uint64_t add = decode_atomic_add(img.seg[n]);
    uint32_t length = 0, lkey = 0;
    const uint64_t laddr = decode_data(img.seg[n + 1], &length, &lkey);
    if (length != 8) {
      r.syndrome = kSyndromeLocalLength;
      return r;
    }
    if (check_key(t, lkey, laddr, 8, kAccessLocalWrite) == nullptr) {
      r.syndrome = kSyndromeLocalProt;
      return r;
    }
    if ((raddr & 7) != 0) {
      r.syndrome = kSyndromeRemoteInvalReq;
      return r;
    }
    if (check_key(t, rkey, raddr, 8, kAccessRemoteAtomic) == nullptr) {
      r.syndrome = kSyndromeRemoteAccess;
      return r;
    }
    if (kPerform)
      mem.fetch_add(reinterpret_cast<uint64_t*>(static_cast<uintptr_t>(raddr)), add,
                    reinterpret_cast<void*>(static_cast<uintptr_t>(laddr)));
    r.byte_cnt = 8;
    return r;
  }
  r.syndrome = kSyndromeLocalQpOp;  // opcodes the model does not implement
  return r;
}

constexpr int kStaleRetries = 64;

// Writes the CQE for WQE `wqe_index` (good when syndrome == 0) and advances the CQ producer.
template <class Mem>
GICOMM_HD void complete_wqe(QpState& q, uint16_t wqe_index, const ExecResult& r, Mem& mem, Counters& ctr) {
  using namespace gicomm::mlx5;
  mlx5::Cqe64 body;
  const uint8_t owner = expected_owner(q.cq_pi, q.cq.collapsed ? 1 : q.cq.cqe_cnt);
  const uint32_t tail = r.syndrome == 0
                            ? encode_req_cqe(body, wqe_index, q.sq.qpn, r.opcode, r.byte_cnt, owner)
                            : encode_err_cqe(body, wqe_index, q.sq.qpn, r.opcode, r.syndrome, 0, owner);
  mem.publish_cqe(cqe_at(q.cq, q.cq_pi), body, tail);
  ++q.cq_pi;
  ++ctr.cqes;
}

// Fetches, checks and executes the one WQE at q.ci (serial path, shared by both engines), writes
// its CQE when it is signaled or fails, and advances q.ci. Mem also provides
//   void read_wqebb(Seg16* dst, const uint8_t* src)     64-byte read of the ring (DMA read)
//   void acquire()                                       order a re-read after a stale one
//   void publish_cqe(Cqe64* dst, const Cqe64& body, uint32_t tail)   body, release, tail
template <class Mem>
GICOMM_HD void service_one_wqe(QpState& q, const Tables& tables, Mem& mem, Counters& ctr) {
  using namespace gicomm::mlx5;
  WqeImage img;
  mem.read_wqebb(&img.seg[0], wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, q.ci));
  CtrlFields c = decode_ctrl(img.seg[0]);
  // A ctrl segment with an older index means the doorbell overtook the WQE stores (missing
  // producer ordering): re-read a few times, count it, and fail the WQE if it never shows up.
  for (int tries = 0; c.wqe_index != static_cast<uint16_t>(q.ci) && tries < kStaleRetries; ++tries) {
    ++ctr.stale_retries;
    mem.acquire();
    mem.read_wqebb(&img.seg[0], wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, q.ci));
    c = decode_ctrl(img.seg[0]);
  }
  const bool well_formed = c.wqe_index == static_cast<uint16_t>(q.ci) && c.ds != 0 && c.ds <= kMaxDs;
  uint32_t nbb = well_formed ? wqebbs_of_ds(c.ds) : 1;
  ExecResult r;
  r.opcode = c.opcode;
  r.signaled = (c.fm_ce_se & kCtrlCqUpdate) != 0;
  if (q.error) {
    r.syndrome = kSyndromeWrFlush;
  } else if (!well_formed || c.qpn != q.sq.qpn) {
    r.syndrome = kSyndromeLocalQpOp;
  } else {
    for (uint32_t b = 1; b < nbb; ++b) mem.read_wqebb(&img.seg[4 * b], wqebb_ptr(q.sq.buf, q.sq.wqe_cnt, q.ci + b));
    r = execute_wqe<true>(tables, img, q.dc != 0, mem);
  }
  if (r.syndrome == 0) {
    ctr.bytes += r.byte_cnt;
    if (r.signaled) complete_wqe(q, static_cast<uint16_t>(q.ci), r, mem, ctr);
  } else {
    // Errors and flushes always complete with a CQE (a ConnectX reports every failed WQE).
    if (r.syndrome == kSyndromeWrFlush) {
      ++ctr.flushes;
    } else {
      ++ctr.errors;
    }
    q.error = 1;
    complete_wqe(q, static_cast<uint16_t>(q.ci), r, mem, ctr);
  }
  ++ctr.wqes;
  q.ci += nbb;
}

// ---- requester/responder split --------------------------------------------------------------------
// The functions below serve engines whose responder is another QP with its own key table (the
// emulated rdma-core: two emulated devices, or two processes over a wire) and that execute the
// two-sided and read-type opcodes as well: RDMA read, compare-and-swap, the masked and 4-byte
// atomics, send (with immediate), DUMP and responder completions. execute_wqe above stays the
// one-table fast path of the softnic engines.

constexpr uint8_t kOpcodeSendImm = 0x0b;         // MLX5_OPCODE_SEND_IMM (wqe.h has the others)
constexpr uint8_t kOpcodeAtomicMaskedCs = 0x14;  // MLX5_OPCODE_ATOMIC_MASKED_CS
constexpr uint8_t kOpcodeAtomicMaskedFa = 0x15;  // MLX5_OPCODE_ATOMIC_MASKED_FA
// DUMP: the NIC reads the local buffer of its data segment and completes (NVSHMEM posts one with a
// fence to order GPU-memory writes; the PRM names it, rdma-core does not).
constexpr uint8_t kOpcodeDump = 0x23;
// Extended atomics carry the operand size in the ctrl segment's opmod: 0x08 | log2(bytes / 4)
// (4 bytes: 0x08, 8 bytes: 0x09); opmod 0 is the 8-byte form.
constexpr uint8_t kOpmodExtAtomic = 0x08;

constexpr uint8_t kCqeRespSend = 2;     // MLX5_CQE_RESP_SEND
constexpr uint8_t kCqeRespSendImm = 3;  // MLX5_CQE_RESP_SEND_IMM

constexpr uint8_t kSyndromeBadResp = 0x10;           // MLX5_CQE_SYNDROME_BAD_RESP_ERR
constexpr uint8_t kSyndromeTransportRetryExc = 0x15;  // MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR
constexpr uint8_t kSyndromeRnrRetryExc = 0x16;       // MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR
constexpr uint8_t kSyndromeRemoteAborted = 0x22;     // MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR

constexpr uint32_t kMaxWrSge = mlx5::kMaxDs;  // data segments one decoded WQE can carry
// The largest send WQE an mlx5 device takes: ds is 6 bits, so 63 segments in 16 WQEBBs (1 KiB);
// NVSHMEM's warp-combined inline writes use up to 19.
constexpr uint32_t kMaxDsLarge = 63;

struct Sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

// An atomic operation as the responder performs it on `bytes` (4 or 8) bytes of host-order memory:
//   compare-swap: when ((old ^ compare) & compare_mask) == 0 the word becomes
//                 (old & ~swap_mask) | (swap_add & swap_mask); plain CS has both masks all ones
//   fetch-add:    old + swap_add, where a carry out of a bit set in `boundary` is dropped (the
//                 masked fetch-add's field boundaries; all ones adds without carries: XOR)
struct AtomicOp {
  bool compare_swap = false;
  uint8_t bytes = 8;
  uint64_t swap_add = 0;
  uint64_t compare = 0;
  uint64_t swap_mask = ~0ull;
  uint64_t compare_mask = ~0ull;
  uint64_t boundary = 0;
};

// One send WQE, decoded (no memory touched yet).
struct SendWr {
  uint8_t opcode = 0;
  uint8_t opmod = 0;
  uint8_t fm_ce_se = 0;
  uint16_t wqe_index = 0;
  uint32_t qpn = 0;
  uint32_t ds = 0;
  uint32_t imm_raw = 0;             // as stored (wire order)
  uint64_t raddr = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;            // atomics: the swap value (CS) or the addend (FA), host order
  uint64_t compare = 0;             // atomics: the compare value (CS), host order
  AtomicOp atomic;                  // atomics: the whole operation (size, masks, boundary)
  uint32_t num_sge = 0;             // pointer data: gather list (write, send, DUMP) or scatter list (read, atomic)
  Sge sge[kMaxWrSge];
  const uint8_t* inline_data = nullptr;  // inline payload, inside the decoded image
  uint32_t inline_len = 0;
  uint64_t length = 0;              // message bytes (sum of the list, or the inline length)
  bool has_av = false;              // DC: an address vector follows the ctrl segment
  mlx5::Seg16 av;                   // its first 16 bytes (DCT number, DC key)
  uint32_t dct_number = 0;          // DC: the target, its access key, its LID, and (extended AV
  uint64_t dc_key = 0;              //     with a GRH) its GID
  uint16_t rlid = 0;
  bool grh = false;
  uint8_t rgid[16] = {};
};

GICOMM_HD bool opcode_is_atomic(uint8_t op) {
  return op == mlx5::kOpcodeAtomicCs || op == mlx5::kOpcodeAtomicFa || op == kOpcodeAtomicMaskedCs ||
         op == kOpcodeAtomicMaskedFa;
}
GICOMM_HD bool opcode_has_raddr(uint8_t op) {
  return op == mlx5::kOpcodeRdmaWrite || op == mlx5::kOpcodeRdmaWriteImm || op == mlx5::kOpcodeRdmaRead ||
         opcode_is_atomic(op);
}

GICOMM_HD uint64_t be64_of(const mlx5::Seg16& s, int word) {
  return from_be64(static_cast<uint64_t>(s.w[word]) | (static_cast<uint64_t>(s.w[word + 1]) << 32));
}

// Decodes the WQE in seg[0 .. max_ds) (ctrl, optional DC AV, raddr, atomic and data/inline
// segments, as the mlx5 provider and NVSHMEM lay them out). Returns 0, or the syndrome a ConnectX
// reports for a malformed WQE (LOCAL_QP_OP for a bad opcode, opmod or layout, LOCAL_LENGTH for an
// inline run or atomic size that does not fit). `seg` must hold every segment the ds covers.
GICOMM_HD uint8_t decode_send_wqe(const mlx5::Seg16* seg, uint32_t max_ds, bool dc, SendWr* wr) {
  using namespace gicomm::mlx5;
  const CtrlFields c = decode_ctrl(seg[0]);
  wr->opcode = c.opcode;
  wr->opmod = c.opmod;
  wr->fm_ce_se = c.fm_ce_se;
  wr->wqe_index = c.wqe_index;
  wr->qpn = c.qpn;
  wr->ds = c.ds;
  wr->imm_raw = c.imm_raw;
  wr->num_sge = 0;
  wr->inline_data = nullptr;
  wr->inline_len = 0;
  wr->length = 0;
  wr->has_av = false;
  if (c.ds == 0 || c.ds > max_ds) return kSyndromeLocalQpOp;
  const uint8_t op = c.opcode;
  const bool known = op == kOpcodeNop || op == kOpcodeSend || op == kOpcodeSendImm || op == kOpcodeDump ||
                     opcode_has_raddr(op);
  if (!known) return kSyndromeLocalQpOp;
  if (op == kOpcodeNop) return 0;
  uint32_t n = 1;
  if (dc && op != kOpcodeDump) {
    const bool extended = (from_be32(seg[1].w[2]) & kExtendedUdAv) != 0;
    if (n + (extended ? 3 : 1) > c.ds) return kSyndromeLocalQpOp;
    wr->has_av = true;
    wr->av = seg[1];
    wr->dc_key = be64_of(seg[1], 0);
    wr->dct_number = from_be32(seg[1].w[2]) & 0xffffff;
    wr->rlid = from_be16(static_cast<uint16_t>(seg[1].w[3] >> 16));
    wr->grh = false;
    if (extended) {
      // mlx5_wqe_av: grh_gid_fl (bit 30: a GRH follows) at bytes 28..31, rgid at 32..47.
      wr->grh = (from_be32(seg[2].w[3]) & (1u << 30)) != 0;
      const uint8_t* gid = reinterpret_cast<const uint8_t*>(&seg[3]);
      for (int i = 0; i < 16; ++i) wr->rgid[i] = gid[i];
    }
    n += extended ? 3 : 1;
  }
  if (opcode_has_raddr(op)) {
    if (n >= c.ds) return kSyndromeLocalQpOp;
    wr->raddr = decode_raddr(seg[n], &wr->rkey);
    ++n;
  }
  if (opcode_is_atomic(op)) {
    AtomicOp& a = wr->atomic;
    a = AtomicOp{};
    const bool masked = op == kOpcodeAtomicMaskedCs || op == kOpcodeAtomicMaskedFa;
    a.compare_swap = op == mlx5::kOpcodeAtomicCs || op == kOpcodeAtomicMaskedCs;
    if (c.opmod == 0) {
      a.bytes = 8;
    } else if (masked && (c.opmod & ~7u) == kOpmodExtAtomic && (c.opmod & 7u) <= 1) {
      a.bytes = static_cast<uint8_t>(4u << (c.opmod & 7u));
    } else {
      return kSyndromeLocalQpOp;  // sizes other than 4 and 8 bytes are not offered
    }
    uint32_t segs = 1;
    const Seg16& s0 = seg[n];
    if (!masked) {
      a.swap_add = be64_of(s0, 0);
      a.compare = be64_of(s0, 2);
    } else if (a.bytes == 4 && a.compare_swap) {
      a.swap_add = from_be32(s0.w[0]);
      a.compare = from_be32(s0.w[1]);
      a.swap_mask = from_be32(s0.w[2]);
      a.compare_mask = from_be32(s0.w[3]);
    } else if (a.bytes == 4) {
      a.swap_add = from_be32(s0.w[0]);
      a.boundary = from_be32(s0.w[1]);
    } else if (a.compare_swap) {
      segs = 2;  // 8-byte masked compare-swap: [swap, compare] then [swap mask, compare mask]
      if (n + 3 > c.ds) return kSyndromeLocalQpOp;
      a.swap_add = be64_of(s0, 0);
      a.compare = be64_of(s0, 2);
      a.swap_mask = be64_of(seg[n + 1], 0);
      a.compare_mask = be64_of(seg[n + 1], 2);
    } else {
      a.swap_add = be64_of(s0, 0);
      a.boundary = be64_of(s0, 2);
    }
    if (!a.compare_swap) a.compare = 0;
    if (n + segs + 1 != c.ds) return kSyndromeLocalQpOp;
    wr->swap_add = a.swap_add;
    wr->compare = a.compare;
    Sge& s = wr->sge[0];
    s.addr = decode_data(seg[n + segs], &s.length, &s.lkey);
    if (s.length != a.bytes) return kSyndromeLocalLength;
    wr->num_sge = 1;
    wr->length = a.bytes;
    return 0;
  }
  if (n == c.ds) return 0;  // a zero-length write, send or read
  const bool may_inline = op != kOpcodeRdmaRead && op != kOpcodeDump;
  if (may_inline && is_inline_seg(seg[n])) {
    const uint32_t len = inline_length(seg[n]);
    if (n + inline_seg_ds(len) != c.ds) return kSyndromeLocalLength;
    wr->inline_data = reinterpret_cast<const uint8_t*>(&seg[n]) + 4;
    wr->inline_len = len;
    wr->length = len;
    return 0;
  }
  if (c.ds - n > kMaxWrSge) return kSyndromeLocalQpOp;
  for (; n < c.ds; ++n) {
    Sge& s = wr->sge[wr->num_sge];
    s.addr = decode_data(seg[n], &s.length, &s.lkey);
    if (s.length > kMaxMessageBytes) return kSyndromeLocalLength;
    wr->length += s.length;
    ++wr->num_sge;
  }
  if (wr->length > kMaxMessageBytes) return kSyndromeLocalLength;
  return 0;
}

GICOMM_HD uint8_t decode_send_wqe(const mlx5::WqeImage& img, bool dc, SendWr* wr) {
  return decode_send_wqe(img.seg, mlx5::kMaxDs, dc, wr);
}

// Requester side: every gather/scatter entry names a local region that covers it. Scatter targets
// (RDMA read and atomic responses) need local write access.
GICOMM_HD uint8_t check_local_sges(const Tables& t, const SendWr& wr) {
  const bool scatter = wr.opcode == mlx5::kOpcodeRdmaRead || opcode_is_atomic(wr.opcode);
  const uint32_t need = scatter ? kAccessLocalWrite : 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    if (wr.sge[i].length == 0) continue;
    if (check_key(t, wr.sge[i].lkey, wr.sge[i].addr, wr.sge[i].length, need) == nullptr) return mlx5::kSyndromeLocalProt;
  }
  return 0;
}

// Responder side of a one-sided operation on [raddr, raddr + length): the rkey's region covers it
// and grants the access the opcode needs; atomics are `length` (4 or 8) bytes on a boundary of
// their size. Returns 0 or the syndrome the requester's error CQE carries.
GICOMM_HD uint8_t check_remote_op(const Tables& t, uint8_t opcode, uint64_t raddr, uint32_t rkey, uint64_t length,
                                  const MrEntry** region) {
  uint32_t need = kAccessRemoteWrite;
  if (opcode == mlx5::kOpcodeRdmaRead) need = kAccessRemoteRead;
  if (opcode_is_atomic(opcode)) {
    if (length != 4 && length != 8) length = 8;
    if ((raddr & (length - 1)) != 0) return mlx5::kSyndromeRemoteInvalReq;
    need = kAccessRemoteAtomic;
  }
  const MrEntry* e = check_key(t, rkey, raddr, length, need);
  if (e == nullptr && length == 0) {
    // A zero-length operation needs no valid key (no memory is touched).
    *region = nullptr;
    return 0;
  }
  if (e == nullptr) return mlx5::kSyndromeRemoteAccess;
  *region = e;
  return 0;
}

// The value an atomic leaves in memory, given the value it found there.
GICOMM_HD uint64_t atomic_result(const AtomicOp& a, uint64_t old) {
  const uint64_t width = a.bytes >= 8 ? ~0ull : (1ull << (8 * a.bytes)) - 1;
  old &= width;
  uint64_t now;
  if (a.compare_swap) {
    now = ((old ^ a.compare) & a.compare_mask & width) == 0 ? ((old & ~a.swap_mask) | (a.swap_add & a.swap_mask)) : old;
  } else if ((a.boundary & width) == 0) {
    now = old + a.swap_add;
  } else {
    // Field-wise add: the carry out of a bit whose boundary bit is set does not propagate.
    now = 0;
    uint64_t carry = 0;
    for (uint32_t i = 0; i < 8u * a.bytes; ++i) {
      const uint64_t x = (old >> i) & 1, y = (a.swap_add >> i) & 1;
      now |= (x ^ y ^ carry) << i;
      const uint64_t c = (x & y) | (x & carry) | (y & carry);
      carry = ((a.boundary >> i) & 1) ? 0 : c;
    }
  }
  return now & width;
}

// The plain 8-byte compare-swap (opcode ATOMIC_CS) and fetch-add (ATOMIC_FA).
GICOMM_HD uint64_t atomic_result(uint8_t opcode, uint64_t old, uint64_t swap_add, uint64_t compare) {
  AtomicOp a;
  a.compare_swap = opcode != mlx5::kOpcodeAtomicFa;
  a.swap_add = swap_add;
  a.compare = compare;
  return atomic_result(a, old);
}

// Responder CQE (receive of a send, send with immediate or write with immediate). `imm_raw` as the
// WQE carried it; `src_qpn` is the requester's QP. The body is built in `c`; the tail is returned.
GICOMM_HD uint32_t encode_resp_cqe(mlx5::Cqe64& c, uint16_t wqe_counter, uint32_t qpn, uint8_t cqe_opcode,
                                   uint32_t byte_cnt, uint32_t imm_raw, uint32_t src_qpn, uint8_t owner) {
  for (int i = 0; i < 15; ++i) c.w[i] = 0;
  c.w[24 / 4] = to_be32(src_qpn & 0xffffff);  // flags_rqpn
  c.w[mlx5::kCqeOffImm / 4] = imm_raw;
  c.w[mlx5::kCqeOffByteCnt / 4] = to_be32(byte_cnt);
  c.w[mlx5::kCqeOffQpn / 4] = to_be32(qpn & 0xffffff);
  return static_cast<uint32_t>(to_be16(wqe_counter)) | (static_cast<uint32_t>((cqe_opcode << 4) | (owner & 1)) << 24);
}

// Responder error CQE (MLX5_CQE_RESP_ERR): a receive that failed or was flushed.
GICOMM_HD uint32_t encode_resp_err_cqe(mlx5::Cqe64& c, uint16_t wqe_counter, uint32_t qpn, uint8_t syndrome,
                                       uint8_t owner) {
  const uint32_t tail = mlx5::encode_err_cqe(c, wqe_counter, qpn, 0, syndrome, 0, owner);
  return (tail & 0x00ffffffu) | (static_cast<uint32_t>((mlx5::kCqeRespErr << 4) | (owner & 1)) << 24);
}

}  // namespace gicomm::softnic
