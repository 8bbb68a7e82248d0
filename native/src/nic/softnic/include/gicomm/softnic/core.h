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

  Counters& operator+=(const Counters& o) {
    wqes += o.wqes;
    cqes += o.cqes;
    errors += o.errors;
    flushes += o.flushes;
    stale_retries += o.stale_retries;
    bytes += o.bytes;
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

}  // namespace gicomm::softnic
