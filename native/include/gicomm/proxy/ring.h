// mini-proxy ring protocol: GPU (or CPU) producers hand 16-byte request descriptors to CPU workers
// through rings in host memory. Shared by the GPU producers (bench/proxy), the CPU producers of
// the protocol tests and the workers (src/proxy), so CI exercises the exact code the GPU runs.
//
// Two enqueue paths, selectable per run (paper Section 3.2, REFERENCE.md A2 "mini-proxy"):
//   baseline: any number of producers per ring. A device atomic reserves a ticket, the producer
//             reads the host-resident consumer progress (a PCIe round trip from the GPU) to check
//             for space, writes the descriptor body and publishes it with a system-scope release
//             store of its sequence tag.
//   tuned:    exactly one producer per ring. The producer keeps its tail and a cached copy of the
//             consumer progress in registers and re-reads the host copy only when the ring looks
//             full; validity is the sequence tag inside the descriptor, so the whole hand-off is a
//             single posted 16-byte store (no fence, no read).
// Both paths produce the same slot contents, so one consumer (try_consume) serves both.
#pragma once

#include <cstdint>

#include "gicomm/common/hd.h"
#include "gicomm/common/timeout.h"

#if !defined(__CUDA_ARCH__)
#include <atomic>
#include <chrono>
#include <thread>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#endif

namespace gicomm {
namespace proxy {

constexpr uint32_t kMaxRings = 32;
constexpr uint32_t kMaxWorkers = 8;
constexpr uint32_t kMaxBatch = 16;
// Capacity limits: a power of two, and small enough that a lap of tags never aliases (tags are the
// low 32 bits of the ticket).
constexpr uint32_t kMinRingCapacity = 2;
constexpr uint32_t kMaxRingCapacity = 1u << 16;

// What a worker does with a descriptor.
enum class Op : uint32_t {
  nop = 0,           // consumed and completed without touching the NIC
  write_inline = 1,  // RDMA write of the 8 bytes in `value` (inline WQE)
  write = 2,         // RDMA write from the source buffer: value = src offset (40 b) | len (24 b)
};

// One request: 16 bytes, 16-byte aligned, so a GPU producer can publish it with one vector store
// (one posted PCIe write) and a worker can read it with one 16-byte load.
struct alignas(16) Desc {
  uint64_t value;  // inline payload, or src offset | len << 40 for Op::write
  uint32_t info;   // [0,24) remote slot index (8-byte units) | [24,28) op | bit 28 signal
  uint32_t seq;    // validity tag: tag_of(ticket). A slot is valid for ticket t iff seq == tag_of(t)
};
static_assert(sizeof(Desc) == 16, "descriptor must be 16 bytes");

constexpr uint32_t kInfoSlotMask = (1u << 24) - 1;
constexpr uint32_t kInfoSignal = 1u << 28;

// Tag of ticket t: never 0 in the first lap (freshly zeroed slots are never valid), and different
// from the previous lap's tag of the same slot (t - capacity) because capacity < 2^32.
GICOMM_HD uint32_t tag_of(uint64_t ticket) { return static_cast<uint32_t>(ticket) + 1u; }

GICOMM_HD uint32_t make_info(Op op, uint32_t remote_slot, bool signal) {
  return (remote_slot & kInfoSlotMask) | (static_cast<uint32_t>(op) << 24) | (signal ? kInfoSignal : 0u);
}
GICOMM_HD Op info_op(uint32_t info) { return static_cast<Op>((info >> 24) & 0xf); }
GICOMM_HD uint32_t info_slot(uint32_t info) { return info & kInfoSlotMask; }

GICOMM_HD bool is_pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Counters of one ring, in host memory (pinned, mapped into the GPU). Each on its own cache line:
// head is written by the worker and read by producers; done is written by the worker and polled
// by whoever waits for completion; tail is the reservation counter of host-side baseline producers.
struct alignas(64) RingCounters {
  alignas(64) uint64_t head;  // consumer progress: tickets [0, head) have been taken out
  alignas(64) uint64_t done;  // host-resident completion counter: tickets [0, done) are complete
  alignas(64) uint64_t tail;  // baseline reservation counter when producers are CPU threads
  alignas(64) uint64_t pad;
};

// A producer's or consumer's view of one ring. Plain pointers so it can be passed to a kernel.
struct RingView {
  Desc* slots;             // capacity descriptors, host memory
  uint64_t* head;          // consumer progress, host memory (RingCounters::head)
  uint64_t* done;          // completion counter producers wait on (host-resident or GPU-resident)
  uint64_t* reserve;       // baseline ticket counter: device memory for GPU producers (a device
                           // atomic), RingCounters::tail for CPU producers
  uint32_t capacity;       // power of two in [kMinRingCapacity, kMaxRingCapacity]
  uint32_t id;             // ring index, for messages
};

// Ring r of a set laid out in mapped host memory, where the host reaches the slots and counters at
// *_host and the GPU at *_dev: the view the workers use and the view GPU producers use (their
// baseline enqueue reserves slots with a device atomic on reserve_dev[r]).
struct RingViews {
  RingView host;
  RingView dev;
};

inline RingViews mapped_ring_views(uint32_t r, uint32_t capacity, Desc* slots_host, Desc* slots_dev,
                                   RingCounters* counters_host, RingCounters* counters_dev,
                                   uint64_t* reserve_dev) {
  RingViews v{};
  v.host.slots = slots_host + static_cast<size_t>(r) * capacity;
  v.host.head = &counters_host[r].head;
  v.host.done = &counters_host[r].done;
  v.host.reserve = &counters_host[r].tail;
  v.host.capacity = capacity;
  v.host.id = r;
  v.dev = v.host;
  v.dev.slots = slots_dev + static_cast<size_t>(r) * capacity;
  v.dev.head = &counters_dev[r].head;
  v.dev.done = &counters_dev[r].done;
  v.dev.reserve = reserve_dev + r;
  return v;
}

// ---- Memory-access primitives, one definition per side -------------------------------------------
// On the GPU every access to host memory is system scope; on the host they are C++ atomics (the
// builtins, since the memory is shared with a device and not declared std::atomic).

GICOMM_HD uint64_t load_acquire_sys(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

GICOMM_HD uint64_t load_relaxed_sys(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

GICOMM_HD void store_release_sys_u32(uint32_t* p, uint32_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

GICOMM_HD void store_release_sys_u64(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

// Device-scope atomic on the GPU (the counter lives in device memory); a host atomic otherwise.
GICOMM_HD uint64_t fetch_add_ticket(uint64_t* p) {
#if defined(__CUDA_ARCH__)
  return atomicAdd(reinterpret_cast<unsigned long long*>(p), 1ull);
#else
  return __atomic_fetch_add(p, 1, __ATOMIC_RELAXED);
#endif
}

// Scope of the tuned path's 16-byte store on the GPU. `sys` is the protocol's store: a strong
// (relaxed) system-scope store, which the memory model guarantees becomes visible to the CPU worker.
// `gpu` and `weak` exist only to measure what the scope costs (bench/proxy, param store=): the PTX
// model promises the CPU nothing for them, so they are never the default.
enum class StoreScope : uint32_t { sys = 0, gpu = 1, weak = 2 };

// One 16-byte store. GPU: a single st.v2.b64 (one posted PCIe write of 16 bytes).
// x86-64 host: one movdqa (atomic for aligned 16-byte accesses on AVX-capable CPUs, Intel SDM
// vol. 3A 9.1.1). Elsewhere the body is written first and the tag last with a release store, which
// gives the consumer the same guarantee (it never sees a new tag with an old body).
template <StoreScope S = StoreScope::sys>
GICOMM_HD void store16(Desc* slot, const Desc& d) {
#if defined(__CUDA_ARCH__)
  const uint64_t hi = (static_cast<uint64_t>(d.seq) << 32) | d.info;
  if (S == StoreScope::sys)
    asm volatile("st.relaxed.sys.global.v2.b64 [%0], {%1, %2};" ::"l"(slot), "l"(d.value), "l"(hi) : "memory");
  else if (S == StoreScope::gpu)
    asm volatile("st.relaxed.gpu.global.v2.b64 [%0], {%1, %2};" ::"l"(slot), "l"(d.value), "l"(hi) : "memory");
  else
    asm volatile("st.global.v2.b64 [%0], {%1, %2};" ::"l"(slot), "l"(d.value), "l"(hi) : "memory");
#elif defined(__x86_64__)
  const __m128i v = _mm_set_epi32(static_cast<int>(d.seq), static_cast<int>(d.info),
                                  static_cast<int>(d.value >> 32), static_cast<int>(d.value));
  asm volatile("movdqa %1, %0" : "=m"(*slot) : "x"(v) : "memory");
#else
  __atomic_store_n(&slot->value, d.value, __ATOMIC_RELAXED);
  __atomic_store_n(&slot->info, d.info, __ATOMIC_RELAXED);
  __atomic_store_n(&slot->seq, d.seq, __ATOMIC_RELEASE);
#endif
}

#if !defined(__CUDA_ARCH__)
// One 16-byte load (host side only: workers are CPU threads).
inline Desc load16(const Desc* slot) {
  Desc d;
#if defined(__x86_64__)
  __m128i v;
  asm volatile("movdqa %1, %0" : "=x"(v) : "m"(*slot) : "memory");
  _mm_store_si128(reinterpret_cast<__m128i*>(&d), v);
#else
  d.seq = __atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE);
  d.value = __atomic_load_n(&slot->value, __ATOMIC_RELAXED);
  d.info = __atomic_load_n(&slot->info, __ATOMIC_RELAXED);
#endif
  return d;
}
#endif

// ---- Bounded waiting -------------------------------------------------------------------------------
// Every wait in the protocol is bounded by timeout_ns, measured on the side's own clock (the GPU's
// %globaltimer, the host's steady_clock) from the moment the wait starts: the clock is read only
// when a wait actually begins, so the fast path pays nothing for it. 0 disables the bound (tests of
// the protocol only; benchmarks always pass --timeout-ms).
GICOMM_HD uint64_t now_ns() {
#if defined(__CUDA_ARCH__)
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
#endif
}

// Back-off inside a bounded wait. Host producers exist only in the protocol tests, where producers
// outnumber cores many times over: yielding lets the thread that holds the awaited ticket run.
GICOMM_HD void spin_pause() {
#if defined(__CUDA_ARCH__)
  __nanosleep(32);
#else
  std::this_thread::yield();
#endif
}

// Why an enqueue or wait gave up: which counter, what it expected, what it last saw.
struct WaitError {
  uint32_t ring;
  uint32_t what;      // 1: ring full (waiting for head), 2: completion (waiting for done)
  uint64_t expected;  // the value waited for
  uint64_t seen;      // the last value read
};
constexpr uint32_t kWaitRingFull = 1;
constexpr uint32_t kWaitCompletion = 2;

// ---- Baseline enqueue ------------------------------------------------------------------------------
// Any number of producers. Returns the ticket, or ~0 on timeout (err filled in).
GICOMM_HD uint64_t enqueue_baseline(const RingView& r, uint64_t value, uint32_t info,
                                    uint64_t timeout_ns, WaitError* err) {
  const uint64_t ticket = fetch_add_ticket(r.reserve);  // device atomic slot reservation
  // Space check against the host-resident consumer progress: from the GPU, a PCIe read.
  uint64_t head = load_acquire_sys(r.head);
  const uint64_t start = ticket - head >= r.capacity ? now_ns() : 0;
  while (ticket - head >= r.capacity) {
    if (timeout_ns != 0 && now_ns() - start > timeout_ns) {
      if (err) *err = WaitError{r.id, kWaitRingFull, ticket - r.capacity + 1, head};
      return ~0ull;
    }
    spin_pause();
    head = load_acquire_sys(r.head);
  }
  Desc* slot = &r.slots[ticket & (r.capacity - 1)];
  slot->value = value;
  slot->info = info;
  // System-scope release: the body above is visible before the tag that makes it valid.
  store_release_sys_u32(&slot->seq, tag_of(ticket));
  return ticket;
}

// ---- Tuned enqueue ---------------------------------------------------------------------------------
// One producer per ring; its state stays in registers between calls.
struct TunedProducer {
  uint64_t tail;         // next ticket
  uint64_t cached_head;  // last consumer progress seen
};

// The tuned enqueue in its two steps, for a caller that times the store alone (the floor under
// the enqueue): tuned_reserve waits until the next ticket's slot is free, checking the producer's
// cached consumer progress first and reading the host's only when the ring looks full;
// tuned_publish is the hand-off itself, one 16-byte store. false / ~0 on timeout (err filled in).
GICOMM_HD bool tuned_reserve(const RingView& r, TunedProducer& p, uint64_t timeout_ns, WaitError* err) {
  const uint64_t ticket = p.tail;
  if (ticket - p.cached_head >= r.capacity) {
    // Looks full: only now pay for a read of the host-resident progress.
    p.cached_head = load_relaxed_sys(r.head);
    const uint64_t start = now_ns();
    while (ticket - p.cached_head >= r.capacity) {
      if (timeout_ns != 0 && now_ns() - start > timeout_ns) {
        if (err) *err = WaitError{r.id, kWaitRingFull, ticket - r.capacity + 1, p.cached_head};
        return false;
      }
      spin_pause();
      p.cached_head = load_relaxed_sys(r.head);
    }
  }
  return true;
}

// tuned_publish, itself in steps for a caller that times the store alone: the slot and the
// descriptor of the next ticket, then the store, then the ticket taken.
struct TunedStore {
  Desc* slot;
  Desc d;
};
GICOMM_HD TunedStore tuned_prepare(const RingView& r, const TunedProducer& p, uint64_t value, uint32_t info) {
  TunedStore s;
  s.slot = &r.slots[p.tail & (r.capacity - 1)];
  s.d.value = value;
  s.d.info = info;
  s.d.seq = tag_of(p.tail);
  return s;
}

template <StoreScope S = StoreScope::sys>
GICOMM_HD uint64_t tuned_publish(const RingView& r, TunedProducer& p, uint64_t value, uint32_t info) {
  const TunedStore s = tuned_prepare(r, p, value, info);
  store16<S>(s.slot, s.d);  // the whole hand-off: one 16-byte store
  return p.tail++;
}

template <StoreScope S = StoreScope::sys>
GICOMM_HD uint64_t enqueue_tuned(const RingView& r, TunedProducer& p, uint64_t value, uint32_t info,
                                 uint64_t timeout_ns, WaitError* err) {
  if (!tuned_reserve(r, p, timeout_ns, err)) return ~0ull;
  return tuned_publish<S>(r, p, value, info);
}

// Wait until the ring's completion counter reaches `target` (all tickets below it are complete).
GICOMM_HD WaitStatus wait_done(const RingView& r, uint64_t target, uint64_t timeout_ns,
                               WaitError* err) {
  uint64_t d = load_acquire_sys(r.done);
  if (d >= target) return WaitStatus::ok;
  const uint64_t start = now_ns();
  while (d < target) {
    if (timeout_ns != 0 && now_ns() - start > timeout_ns) {
      if (err) *err = WaitError{r.id, kWaitCompletion, target, d};
      return WaitStatus::timeout;
    }
    d = load_acquire_sys(r.done);
  }
  return WaitStatus::ok;
}

#if !defined(__CUDA_ARCH__)
// ---- Consumer (worker) side ------------------------------------------------------------------------
// Take the descriptor of ticket `head` if it has been published. The caller owns the ring (one
// worker per ring) and advances the published head itself, after it has used the copy.
inline bool try_consume(const RingView& r, uint64_t head, Desc* out) {
  const Desc d = load16(&r.slots[head & (r.capacity - 1)]);
  if (d.seq != tag_of(head)) return false;
  // The tag was read in the same 16-byte access as the body; the fence orders what the worker
  // does next (the NIC post) after the read.
  std::atomic_thread_fence(std::memory_order_acquire);
  *out = d;
  return true;
}
#endif

}  // namespace proxy
}  // namespace gicomm
