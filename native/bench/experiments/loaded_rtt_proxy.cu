// loaded_rtt on mini-proxy: the probe and responder on their own tuned rings, the bulk CTAs on
// rings of their own or on the probe's (loaded_rtt.cu describes the experiment).
#include <sstream>

#include "harness/proxy_rig.h"
#include "harness/two_rank.h"
#include "loaded_rtt.cuh"

namespace gicomm::bench::loaded_rtt {
namespace {

struct ProxyFail {
  uint32_t flag;
  uint32_t block;
  uint32_t what;  // proxy::kWaitRingFull, proxy::kWaitCompletion, 3: payload word
  uint32_t ring;
  unsigned long long expected, seen;
};

struct ProxyRttArgs {
  const proxy::RingView* rings;  // device array
  proxy::TunedProducer* tuned;   // per ring: rings 0 and 1, and the bulk rings when bulk_tuned
  uint32_t nrings;
  int shared, pingpong, bulk_tuned;
  int peer_pong;                 // two ranks: rank 1's responder answers the probe (no block 1)
  uint32_t bulk_ctas;
  uint64_t* remote;              // host words the workers write (mapped): [0] ping, [8] pong, bulk from 16
  const uint64_t* remote_dev;    // the same through the device mapping
  unsigned long long period_ns, settle_ns, deadline_ns, timeout_ns;
  uint32_t warmup, iters;
  uint32_t* cycles;
  unsigned int* ready;
  int* phase;
  BulkStat* bulk;
  unsigned long long* probe_done;
  unsigned long long* ring_tickets;  // per ring: tickets taken (for the drain check)
  ClockStamp* clock;
  ProxyFail* fail;
};
constexpr uint32_t kPingSlot = 0, kPongSlot = 8, kProxyBulkBase = 16, kProxyBulkSlots = 64;

__device__ void proxy_fail(const ProxyRttArgs& a, uint32_t what, uint32_t ring, unsigned long long expected,
                           unsigned long long seen) {
  if (atomicCAS(&a.fail->flag, 0u, 1u) == 0u) {
    a.fail->block = blockIdx.x;
    a.fail->what = what;
    a.fail->ring = ring;
    a.fail->expected = expected;
    a.fail->seen = seen;
    __threadfence_system();
  }
}
__device__ __forceinline__ bool proxy_failed(const ProxyRttArgs& a) {
  return *reinterpret_cast<volatile uint32_t*>(&a.fail->flag) != 0;
}
__device__ __forceinline__ int pphase(const ProxyRttArgs& a) { return *reinterpret_cast<volatile int*>(a.phase); }
__device__ __forceinline__ void set_pphase(const ProxyRttArgs& a, int v) {
  __threadfence();
  *reinterpret_cast<volatile int*>(a.phase) = v;
  __threadfence();
}

// Polls a host word the workers write, bounded by the timeout (and the stop phase when stop_ok).
__device__ bool proxy_poll(const ProxyRttArgs& a, uint32_t slot, uint64_t want, bool stop_ok, uint32_t ring) {
  const unsigned long long start = globaltimer();
  for (uint32_t spin = 0;; ++spin) {
    const uint64_t v = proxy::load_relaxed_sys(a.remote_dev + slot);
    if (v == want) return true;
    if ((spin & 63) == 63) {
      if (proxy_failed(a)) return false;
      if (stop_ok && pphase(a) == 2) return false;
      if (globaltimer() - start > a.timeout_ns) {
        proxy_fail(a, 3, ring, want, v);
        return false;
      }
    }
  }
}

__global__ void proxy_rtt_kernel(ProxyRttArgs a) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 0) {
    // ---- probe on ring 0 ----
    const unsigned long long t0 = globaltimer();
    while (*reinterpret_cast<volatile unsigned int*>(a.ready) < a.bulk_ctas) {
      if (globaltimer() - t0 > a.timeout_ns) {
        proxy_fail(a, 3, 0, a.bulk_ctas, *reinterpret_cast<volatile unsigned int*>(a.ready));
        set_pphase(a, 2);
        return;
      }
    }
    const unsigned long long t1 = globaltimer();
    while (globaltimer() - t1 < a.settle_ns) {
    }
    const proxy::RingView r = a.rings[0];
    proxy::TunedProducer tp = a.tuned[0];
    ClockStamp clk{};
    const uint32_t total = a.warmup + a.iters;
    uint32_t i = 0;
    for (; i < total; ++i) {
      if (i == a.warmup) {
        set_pphase(a, 1);
        stamp_begin(&clk);
      }
      const uint64_t v = i + 1;
      proxy::WaitError e{};
      const uint32_t info = proxy::make_info(proxy::Op::write_inline, kPingSlot, false);
      const long long c0 = clock64();
      const uint64_t ticket = a.shared ? proxy::enqueue_baseline(r, v, info, a.timeout_ns, &e)
                                       : proxy::enqueue_tuned(r, tp, v, info, a.timeout_ns, &e);
      bool ok = ticket != ~0ull;
      if (!ok) proxy_fail(a, e.what, 0, e.expected, e.seen);
      if (ok) {
        if (a.pingpong) {
          ok = proxy_poll(a, kPongSlot, v, false, 1);
        } else {
          ok = proxy::wait_done(r, ticket + 1, a.timeout_ns, &e) == WaitStatus::ok;
          if (!ok) proxy_fail(a, e.what, 0, e.expected, e.seen);
        }
      }
      const long long c1 = clock64();
      if (!ok) break;
      if (i >= a.warmup) a.cycles[i - a.warmup] = static_cast<uint32_t>(min(c1 - c0, 0xffffffffll));
    }
    if (i >= a.warmup) stamp_end(&clk);
    if (!a.shared) {
      a.tuned[0] = tp;
      a.ring_tickets[0] = tp.tail;
    }
    *a.clock = clk;
    *a.probe_done = i;
    set_pphase(a, 2);
    return;
  }
  if (blockIdx.x == 1) {
    // ---- responder on ring 1 (tuned: its only producer) ----
    if (!a.pingpong || a.peer_pong) return;
    const proxy::RingView r = a.rings[1];
    proxy::TunedProducer tp = a.tuned[1];
    for (uint64_t v = 1; v <= a.warmup + a.iters; ++v) {
      if (!proxy_poll(a, kPingSlot, v, true, 0)) break;
      proxy::WaitError e{};
      if (proxy::enqueue_tuned(r, tp, v, proxy::make_info(proxy::Op::write_inline, kPongSlot, false), a.timeout_ns, &e) ==
          ~0ull) {
        proxy_fail(a, e.what, 1, e.expected, e.seen);
        break;
      }
    }
    a.tuned[1] = tp;
    a.ring_tickets[1] = tp.tail;
    return;
  }
  // ---- bulk CTA k ----
  const uint32_t k = blockIdx.x - 2;
  const uint32_t ring = a.shared ? 0 : 2 + k % (a.nrings - 2);
  const proxy::RingView r = a.rings[ring];
  proxy::TunedProducer tp = a.tuned[ring];  // used only when bulk_tuned (ring 2 + k, its only producer)
  atomicAdd(a.ready, 1u);
  BulkStat st{};
  unsigned long long win_start = 0, win_posted0 = 0;
  const unsigned long long t0 = globaltimer();
  unsigned long long next = t0;
  uint32_t slot = 0;
  for (uint32_t iter = 0;; ++iter) {
    const int ph = pphase(a);
    // The failure word is in host memory: a PCIe read, so look every 64th descriptor only (read
    // on every one, it capped what all bulk CTAs together could offer at about 1 Mmsg/s).
    if (ph == 2 || ((iter & 63) == 0 && proxy_failed(a))) break;
    const unsigned long long now = globaltimer();
    if (ph == 1 && win_start == 0) {
      win_start = now;
      win_posted0 = st.posted;
    }
    if (now - t0 > a.deadline_ns) break;
    if (a.period_ns) {
      if (now < next) continue;
      next += a.period_ns;
      if (next + 64 * a.period_ns < now) next = now;
    }
    proxy::WaitError e{};
    const uint32_t s = kProxyBulkBase + (k % 32) * kProxyBulkSlots + slot;
    slot = (slot + 1) % kProxyBulkSlots;
    const uint32_t info = proxy::make_info(proxy::Op::write_inline, s, false);
    const uint64_t ticket = a.bulk_tuned ? proxy::enqueue_tuned(r, tp, st.posted, info, a.timeout_ns, &e)
                                         : proxy::enqueue_baseline(r, st.posted, info, a.timeout_ns, &e);
    if (ticket == ~0ull) {
      proxy_fail(a, e.what, ring, e.expected, e.seen);
      break;
    }
    ++st.posted;
  }
  if (win_start) {
    st.win_posted = st.posted - win_posted0;
    st.win_ns = globaltimer() - win_start;
  }
  if (a.bulk_tuned) {
    a.tuned[ring] = tp;
    a.ring_tickets[ring] = tp.tail;
  }
  a.bulk[k] = st;
}

}  // namespace

RttRun run_proxy(const RttConfig& c, Run& run) {
  const uint32_t nbulk = c.bulk_ctas;
  const uint32_t nrings = c.rings;
  MappedBuffer<uint64_t> remote(kProxyBulkBase + 32 * kProxyBulkSlots);
  MappedBuffer<ProxyFail> fail(1);
  DeviceBuffer<proxy::TunedProducer> tuned(nrings);
  ProxyRigSpec spec = ProxyRigSpec::on_node0(nrings, c.workers, c.batch, run.timeout_ns());
  spec.fetch_bytes = 0;  // nothing checks the words that landed at a peer (the path proof counts them)
  run.rdma_provider = require_proxy_backend(c.nic);
  ProxyRig rig(spec);
  rig.start(c.nic, {remote.p, remote.n * 8}, {remote.p, remote.n * 8}, false);
  GICOMM_CUDA(cudaSetDevice(0));
  // Two ranks (verbs): the probe's pings and the bulk writes land at rank 1, whose responder
  // (harness/responder.h, scheme "flag"; the point's `responder`) answers each ping into the pong
  // word here.
  const bool peer_pong = c.peer_pong;
  if (peer_pong) {
    net::Message ask = c.ask;
    ask.set("scheme", "flag");
    ask.set_u64("ping_word", kPingSlot);
    ask.set_u64("pong_word", kPongSlot);
    // The first ping comes once every bulk CTA runs and settle_us passed.
    ask.set_u64("wait_ms", uint64_t(run.options.timeout_ms) + uint64_t(c.settle_us) / 1000 + 1);
    start_peer_responder(run, ask);
  }

  const RunBufs rb(static_cast<uint32_t>(std::max(1, run.iters())), nbulk);
  DeviceBuffer<unsigned long long> ring_tickets(nrings);
  ProxyRttArgs a{};
  rb.fill(a, c, run.warmup(), 1);
  a.rings = rig.views.p;
  a.tuned = tuned.p;
  a.nrings = nrings;
  a.bulk_tuned = c.bulk_tuned ? 1 : 0;
  a.peer_pong = peer_pong ? 1 : 0;
  a.remote = remote.p;
  a.remote_dev = remote.d;
  a.timeout_ns = spec.timeout_ns;
  a.ring_tickets = ring_tickets.p;
  a.fail = fail.d;
  const Stream stream;
  rb.launch(proxy_rtt_kernel, a, stream.s);
  RttRun out;
  rb.read_done(out);
  if (fail.p->flag) {
    const ProxyFail& f = *fail.p;
    std::ostringstream m;
    m << "mini-proxy: block " << f.block << " ring " << f.ring << ": "
      << (f.what == proxy::kWaitRingFull ? "ring full, consumer head "
                                         : f.what == proxy::kWaitCompletion ? "completion wait timed out, done "
                                                                            : "payload word wait timed out, value ")
      << f.seen << ", expected " << f.expected << " (exchange " << out.done << ")";
    if (rig.worker_failed()) m << "; worker: " << rig.worker_error();
    throw PointFailure(m.str());
  }
  // Drain: every ring must consume and complete exactly the tickets its producers took.
  const std::vector<uint64_t> res = rig.reserve.read();
  const std::vector<unsigned long long> tk = ring_tickets.read();
  std::vector<uint64_t> expected(nrings);
  for (uint32_t r = 0; r < nrings; ++r) {
    const bool tuned_ring = r == 1 || (r == 0 && !c.shared) || (r >= 2 && c.bulk_tuned);
    expected[r] = tuned_ring ? tk[r] : res[r];
  }
  if (peer_pong) expected[1] = 0;  // the answers came from rank 1
  std::string err;
  if (!rig.drain(expected, &err)) throw PointFailure("mini-proxy drain: " + err);
  rb.read_bulk(out);
  rb.read_probe(out, a);
  return out;
}

}  // namespace gicomm::bench::loaded_rtt
