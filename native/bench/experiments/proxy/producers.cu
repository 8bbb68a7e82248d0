// GPU producers of the mini-proxy experiments (see producers.h).
#include "proxy/producers.h"

namespace gicomm {
namespace proxy_bench {

namespace {

__device__ void report(const ProducerArgs& a, const proxy::WaitError& e, uint64_t op) {
  // Plain stores into mapped host memory (no PCIe atomics needed); if several threads fail at
  // once the host sees one of them, which is enough to name a ring and its counters.
  volatile DeviceError* d = a.err;
  if (d->flag != 0u) return;
  d->ring = e.ring;
  d->what = e.what;
  d->op = static_cast<uint32_t>(op);
  d->expected = e.expected;
  d->seen = e.seen;
  __threadfence_system();
  d->flag = 1u;
}

// The request of `index` on ring `r`: computed before the timed enqueue, as a caller would have
// its request ready before handing it over.
struct Request {
  uint64_t value;
  uint32_t info;
};
__device__ __forceinline__ Request request_of(const ProducerArgs& a, uint32_t r, uint64_t index) {
  return Request{payload_value(r, index),
                 proxy::make_info(proxy::Op::write_inline, payload_slot(r, a.window, index), false)};
}

__device__ __forceinline__ uint64_t enqueue(const ProducerArgs& a, const proxy::RingView& ring,
                                            proxy::TunedProducer& tp, const Request& q, proxy::WaitError* e) {
  return bench::enqueue_as(ring, tp, q.value, q.info, a.tuned_mode != 0, a.store_scope, a.timeout_ns, e);
}

// The floor-comparable phase of issue mode: `msgs` more tuned enqueues, each followed by its
// completion as before, but the clock reads bracket the 16-byte store alone. The request, the
// ring check and the store scope (a template argument: no dispatch) are settled before the first
// read, as the floor of a single 16 B store to a host ring is timed.
template <proxy::StoreScope S>
__device__ bool store_phase(const ProducerArgs& a, const proxy::RingView& ring, proxy::TunedProducer& tp,
                            uint64_t first, proxy::WaitError* e) {
  for (uint64_t i = 0; i < a.msgs; ++i) {
    const uint64_t index = a.base + first + i;
    const Request q = request_of(a, 0, index);
    if (!proxy::tuned_reserve(ring, tp, a.timeout_ns, e)) {
      report(a, *e, first + i);
      return false;
    }
    const proxy::TunedStore st = proxy::tuned_prepare(ring, tp, q.value, q.info);
    // Every operand of the store in registers before the first clock read (the compiler would
    // otherwise compute the request inside the timed region).
    asm volatile("" ::"l"(st.slot), "l"(st.d.value), "r"(st.d.info), "r"(st.d.seq) : "memory");
    const long long c0 = clock64();
    proxy::store16<S>(st.slot, st.d);
    const long long c1 = clock64();
    // ... and still live after the second read (a use that depends on it and never happens): the
    // clock value cannot take a register the store reads, which would make the second read wait
    // until the store has read its operands.
    if (c1 == c0) a.store_cycles[i] = static_cast<uint32_t>(st.d.value ^ st.d.info ^ st.d.seq);
    ++tp.tail;
    if (proxy::wait_done(ring, index + 1, a.timeout_ns, e) != WaitStatus::ok) {
      report(a, *e, first + i);
      return false;
    }
    a.store_cycles[i] = static_cast<uint32_t>(c1 - c0);
  }
  return true;
}

__global__ void issue_kernel(ProducerArgs a) {
  const proxy::RingView ring = a.rings[0];
  proxy::TunedProducer tp = a.tuned[0];
  proxy::WaitError e;
  a.t_start[0] = proxy::now_ns();
  a.c_start[0] = clock64();
  const uint64_t total = a.warmup + a.msgs;
  bool ok = true;
  // Paper-comparable: the clock reads bracket the whole enqueue call, as the paper times issue.
  for (uint64_t i = 0; i < total; ++i) {
    const uint64_t index = a.base + i;
    const Request q = request_of(a, 0, index);
    const long long c0 = clock64();
    if (enqueue(a, ring, tp, q, &e) == ~0ull) {
      report(a, e, i);
      ok = false;
      break;
    }
    const long long c1 = clock64();
    if (proxy::wait_done(ring, index + 1, a.timeout_ns, &e) != WaitStatus::ok) {
      report(a, e, i);
      ok = false;
      break;
    }
    const long long c2 = clock64();
    if (i >= a.warmup) {
      a.issue_cycles[i - a.warmup] = static_cast<uint32_t>(c1 - c0);
      a.rtt_cycles[i - a.warmup] = static_cast<uint32_t>(c2 - c0);
    }
  }
  if (ok && a.store_cycles != nullptr && a.tuned_mode) {
    switch (a.store_scope) {
      case 1:
        store_phase<proxy::StoreScope::gpu>(a, ring, tp, total, &e);
        break;
      case 2:
        store_phase<proxy::StoreScope::weak>(a, ring, tp, total, &e);
        break;
      default:
        store_phase<proxy::StoreScope::sys>(a, ring, tp, total, &e);
    }
  }
  a.c_end[0] = clock64();
  a.t_end[0] = proxy::now_ns();
  a.tuned[0] = tp;
}

// Poll a destination word (host memory, written by the NIC model) until it holds `want`.
__device__ bool wait_word(const ProducerArgs& a, uint32_t ring, uint32_t slot, uint64_t want, uint64_t op) {
  const uint64_t* p = a.remote + slot;
  uint64_t v = proxy::load_acquire_sys(p);
  if (v == want) return true;
  const uint64_t start = proxy::now_ns();
  while (v != want) {
    if (proxy::now_ns() - start > a.timeout_ns) {
      proxy::WaitError e{ring, kWaitPayload, want, v};
      report(a, e, op);
      return false;
    }
    v = proxy::load_acquire_sys(p);
  }
  return true;
}

__global__ void pingpong_kernel(ProducerArgs a) {
  const uint32_t me = blockIdx.x;  // 0: ping on ring 0, 1: pong on ring 1
  const proxy::RingView ring = a.rings[me];
  proxy::TunedProducer tp = a.tuned[me];
  proxy::WaitError e;
  a.t_start[me] = proxy::now_ns();
  a.c_start[me] = clock64();
  const uint64_t total = a.warmup + a.msgs;
  for (uint64_t i = 0; i < total; ++i) {
    const uint64_t index = a.base + i;
    if (me == 0) {
      const Request q = request_of(a, 0, index);
      const long long c0 = clock64();
      if (enqueue(a, ring, tp, q, &e) == ~0ull) {
        report(a, e, i);
        break;
      }
      const long long c1 = clock64();
      if (!wait_word(a, 1, payload_slot(1, a.window, index), payload_value(1, index), i)) break;
      const long long c2 = clock64();
      if (i >= a.warmup) {
        a.issue_cycles[i - a.warmup] = static_cast<uint32_t>(c1 - c0);
        a.rtt_cycles[i - a.warmup] = static_cast<uint32_t>(c2 - c0);
      }
    } else {
      if (!wait_word(a, 0, payload_slot(0, a.window, index), payload_value(0, index), i)) break;
      if (enqueue(a, ring, tp, request_of(a, 1, index), &e) == ~0ull) {
        report(a, e, i);
        break;
      }
    }
  }
  a.c_end[me] = clock64();
  a.t_end[me] = proxy::now_ns();
  a.tuned[me] = tp;
}

__global__ void rate_kernel(ProducerArgs a) {
  const uint32_t r = blockIdx.x;
  const proxy::RingView ring = a.rings[r];
  proxy::TunedProducer tp = a.tuned[r];
  proxy::WaitError e;
  a.t_start[r] = proxy::now_ns();
  a.c_start[r] = clock64();
  bool ok = true;
  for (uint64_t i = 0; i < a.msgs; ++i) {
    if (enqueue(a, ring, tp, request_of(a, r, a.base + i), &e) == ~0ull) {
      report(a, e, i);
      ok = false;
      break;
    }
  }
  if (ok && proxy::wait_done(ring, a.base + a.msgs, a.timeout_ns, &e) != WaitStatus::ok) report(a, e, a.msgs);
  a.c_end[r] = clock64();
  a.t_end[r] = proxy::now_ns();
  a.tuned[r] = tp;
}

}  // namespace

cudaError_t launch_issue(const ProducerArgs& a, cudaStream_t s) {
  issue_kernel<<<1, 1, 0, s>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_pingpong(const ProducerArgs& a, cudaStream_t s, bool ping_only) {
  pingpong_kernel<<<ping_only ? 1 : 2, 1, 0, s>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_rate(const ProducerArgs& a, cudaStream_t s) {
  rate_kernel<<<a.nrings, 1, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace proxy_bench
}  // namespace gicomm
