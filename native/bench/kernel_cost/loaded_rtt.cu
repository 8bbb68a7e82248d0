// gicomm-bench-loaded-rtt: the round trip of one small message while background CTAs stream bulk
// puts (paper Fig 6 / Table 11; native/bench/README.md is the CLI and record contract).
//
// One kernel on GPU 0, all blocks co-resident (2 + bulk_ctas <= the SM count), one active thread
// per block:
//   block 0, the probe: once every bulk CTA runs and settle_us have passed, it does warmup + iters
//            exchanges, one at a time:
//              probe=pingpong    put the 8-byte value i into the ping word; the responder sees it
//                                and puts i into the pong word through its own QP; the probe polls
//                                the pong word. rtt_ns = put -> both directions through the NIC.
//              probe=completion  put the 8-byte value i, then wait for its completion (quiet of
//                                the QP used). completion_ns.
//            Then it raises the stop phase.
//   block 1, the responder (pingpong only): polls the ping word, answers on QP 1 (always its own).
//   blocks 2.., bulk CTAs: inline 8-byte puts, `batch` WQEs per doorbell, as fast as the queue
//            takes them (pace_mmsgs 0) or paced to pace_mmsgs million messages per second in total
//            (each CTA spaces its batches on %globaltimer).
// Queues (mini-gda on a softnic session):
//   queue=reserved  the probe owns QP 0 (ThreadQp); each bulk CTA owns its own QP.
//   queue=shared    the probe and every bulk CTA submit to QP 0 with the shared-QP hand-off
//                   (atomic reservation, in-order doorbells): the probe's WQE waits behind the
//                   bulk WQEs reserved before it, as on one library context.
// mini-proxy (transport=mini-proxy, nic_backend softnic-cpu: the workers post to the softnic's cpu
// engine): ring 0 carries the probe's pings, ring 1 the responder's pongs (tuned enqueue, one
// producer each). queue=shared: every bulk CTA also enqueues on ring 0 (multi-producer baseline
// enqueue, the probe too), so a ping waits behind the bulk descriptors before it in one FIFO.
// queue=reserved: bulk CTAs enqueue on rings 2.. (baseline; CTA k on ring 2 + k % (rings - 2)),
// the probe keeps ring 0 to itself. bulk_enqueue=tuned (reserved only): bulk CTA k is the only
// producer of ring 2 + k (rings = 2 + bulk_ctas) and uses the tuned single-store enqueue, so the
// CTAs can offer more than the workers carry (the paper's Fig 7 loaded private probe). Workers: ring r belongs to worker r % workers, so the probe's
// ring can share its worker with bulk rings (workers param). `batch` is the workers' chaining.
// Load carried: each bulk CTA counts its puts between the moment it sees the probe's measuring
// phase and the stop phase, over the %globaltimer time between the two; bulk_msg_rate is the sum
// over CTAs (Mmsg/s, in the same record set as the RTT). After the kernel every QP is drained and
// the engine must have executed exactly the WQEs posted (probe, responder, bulk) with no error CQE.
//
// Point parameters (defaults in brackets):
//   transport mini-gda|mini-proxy [mini-gda]
//   nic_backend softnic-gpu|softnic-cpu [softnic-gpu for mini-gda; mini-proxy: softnic-cpu only]
//   workers 1..8 [2], rings 3..32 [min(32, 2 + max(1, bulk_ctas))] (mini-proxy)
//   bulk_ctas 0..128 [0]  queue shared|reserved [reserved]  pace_mmsgs >= 0 [0: unpaced]
//   bulk_enqueue baseline|tuned [baseline] (mini-proxy; tuned: queue reserved, bulk_ctas <= 30)
//   batch 1..16 [8]  probe pingpong|completion [pingpong]  settle_us [200]  sq_wqebbs [1024]
// --iters measured exchanges (<= 100000), --warmup unrecorded ones before them.
// Metrics: rtt_ns or completion_ns (p50/p99 ...), bulk_msg_rate (Mmsg/s), probe_msg_rate (Mmsg/s).
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gicomm/gda/gda.cuh"
#include "gicomm/gda/session.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/ring.h"
#include "gicomm/proxy/softnic_backend.h"
#include "kc_common.cuh"

namespace gicomm::kc {
namespace {

constexpr const char* kProgram = "gicomm-bench-loaded-rtt";
constexpr uint32_t kBulkSlots = 64;  // destination words per bulk CTA
constexpr uint32_t kMaxBatch = 16;

struct BulkStat {
  unsigned long long posted;        // all puts of the CTA
  unsigned long long win_posted;    // puts inside the measuring window
  unsigned long long win_ns;        // the window's length as this CTA saw it
};

struct RttArgs {
  gda::Context ctx;
  uint64_t* ping;        // destination words (engine-writable memory)
  uint64_t* pong;
  uint64_t* bulk_dst;
  uint32_t rkey;
  int shared;            // 1: probe and bulk on QP 0
  int pingpong;          // 1: round trip, 0: put + completion
  uint32_t bulk_ctas;
  uint32_t batch;
  unsigned long long period_ns;  // per-CTA batch period (0: unpaced)
  unsigned long long settle_ns;
  unsigned long long deadline_ns;  // hard bound of the whole kernel (safety; every wait is bounded too)
  uint32_t warmup, iters;
  uint32_t* cycles;      // per measured exchange
  unsigned int* ready;   // bulk CTAs running
  int* phase;            // 0 warm-up, 1 measuring, 2 stop
  BulkStat* bulk;
  unsigned long long* probe_done;  // exchanges completed (probe puts, = responder puts)
  ClockStamp* clock;     // the probe's measuring window
};

__device__ __forceinline__ int read_phase(const RttArgs& a) { return *reinterpret_cast<volatile int*>(a.phase); }
__device__ __forceinline__ void set_phase(const RttArgs& a, int v) {
  __threadfence();
  *reinterpret_cast<volatile int*>(a.phase) = v;
  __threadfence();
}

__device__ __forceinline__ gda::PutOp inline_put(uint64_t* dst, uint32_t rkey, uint64_t value) {
  gda::PutOp op{};
  op.raddr = reinterpret_cast<uint64_t>(dst);
  op.rkey = rkey;
  op.length = 8;
  op.inline_data = true;
  op.value = value;
  return op;
}

// Polls an 8-byte word written by the NIC until it holds `want`, the stop phase, or the timeout.
__device__ bool poll_word(const RttArgs& a, const gda::DeviceQp& qp, const uint64_t* w, uint64_t want, bool stop_ok) {
  const unsigned long long start = kc_globaltimer();
  for (uint32_t spin = 0;; ++spin) {
    const uint64_t v = *reinterpret_cast<const volatile uint64_t*>(w);
    if (v == want) return true;
    if ((spin & 63) == 63) {
      if (gda::failed(a.ctx)) return false;
      if (stop_ok && read_phase(a) == 2) return false;
      if (kc_globaltimer() - start > a.ctx.timeout_ns) {
        gda::report(a.ctx, gda::WaitSite::peer, qp, want, v);
        return false;
      }
    }
  }
}

template <class Order>
__global__ void rtt_kernel(RttArgs a) {
  if (threadIdx.x != 0) return;
  gda::DeviceQp* q0 = &a.ctx.qps[0];
  if (blockIdx.x == 0) {
    // ---- probe ----
    const unsigned long long t0 = kc_globaltimer();
    while (*reinterpret_cast<volatile unsigned int*>(a.ready) < a.bulk_ctas) {
      if (kc_globaltimer() - t0 > a.ctx.timeout_ns) {
        gda::report(a.ctx, gda::WaitSite::peer, *q0, a.bulk_ctas, *reinterpret_cast<volatile unsigned int*>(a.ready));
        set_phase(a, 2);
        return;
      }
    }
    const unsigned long long t1 = kc_globaltimer();
    while (kc_globaltimer() - t1 < a.settle_ns) {
    }
    gda::ThreadQp tq(q0);
    ClockStamp clk{};
    const uint32_t total = a.warmup + a.iters;
    uint32_t i = 0;
    for (; i < total; ++i) {
      if (i == a.warmup) {
        set_phase(a, 1);
        stamp_begin(&clk);
      }
      const uint64_t v = i + 1;
      const gda::PutOp op = inline_put(a.ping, a.rkey, v);
      const long long c0 = clock64();
      bool ok = a.shared ? gda::put_handoff<Order>(a.ctx, *q0, &op, 1) : tq.put<Order>(a.ctx, op, true);
      if (ok) {
        if (a.pingpong)
          ok = poll_word(a, *q0, a.pong, v, false);
        else
          ok = a.shared ? gda::quiet_qp(a.ctx, *q0) : tq.quiet(a.ctx);
      }
      const long long c1 = clock64();
      if (!ok) break;
      if (i >= a.warmup) a.cycles[i - a.warmup] = static_cast<uint32_t>(min(c1 - c0, 0xffffffffll));
    }
    if (i >= a.warmup) stamp_end(&clk);
    if (!a.shared) tq.flush();
    *a.clock = clk;
    *a.probe_done = i;
    set_phase(a, 2);
    return;
  }
  if (blockIdx.x == 1) {
    // ---- responder (QP 1): answers ping i with pong i ----
    if (!a.pingpong) return;
    gda::ThreadQp tq(&a.ctx.qps[1]);
    for (uint64_t v = 1; v <= a.warmup + a.iters; ++v) {
      if (!poll_word(a, a.ctx.qps[1], a.ping, v, true)) break;
      if (!tq.put<Order>(a.ctx, inline_put(a.pong, a.rkey, v), true)) break;
    }
    tq.flush();
    return;
  }
  // ---- bulk CTA k ----
  const uint32_t k = blockIdx.x - 2;
  gda::DeviceQp* qp = a.shared ? q0 : &a.ctx.qps[2 + k];
  gda::ThreadQp tq(qp);
  atomicAdd(a.ready, 1u);
  BulkStat st{};
  unsigned long long win_start = 0, win_posted0 = 0;
  const unsigned long long t0 = kc_globaltimer();
  unsigned long long next = t0;
  gda::PutOp ops[kMaxBatch];
  uint32_t slot = 0;
  for (;;) {
    const int ph = read_phase(a);
    if (ph == 2 || gda::failed(a.ctx)) break;
    unsigned long long now = kc_globaltimer();
    if (ph == 1 && win_start == 0) {
      win_start = now;
      win_posted0 = st.posted;
    }
    if (now - t0 > a.deadline_ns) break;
    if (a.period_ns) {
      if (now < next) continue;  // paced: wait for this CTA's next batch time (the phase check bounds it)
      next += a.period_ns;
      if (next + 64 * a.period_ns < now) next = now;  // fell far behind: do not burst to catch up
    }
    for (uint32_t j = 0; j < a.batch; ++j) {
      ops[j] = inline_put(a.bulk_dst + size_t(k) * kBulkSlots + slot, a.rkey, st.posted + j);
      slot = (slot + 1) % kBulkSlots;
    }
    bool ok = true;
    if (a.shared) {
      ok = gda::put_handoff<Order>(a.ctx, *qp, ops, a.batch);
    } else {
      for (uint32_t j = 0; j < a.batch && ok; ++j) ok = tq.put<Order>(a.ctx, ops[j], j + 1 == a.batch);
    }
    if (!ok) break;
    st.posted += a.batch;
  }
  if (win_start) {
    st.win_posted = st.posted - win_posted0;
    st.win_ns = kc_globaltimer() - win_start;
  }
  if (!a.shared) tq.flush();
  a.bulk[k] = st;
}


// ---- mini-proxy --------------------------------------------------------------------------------------
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
  const unsigned long long start = kc_globaltimer();
  for (uint32_t spin = 0;; ++spin) {
    const uint64_t v = proxy::load_relaxed_sys(a.remote_dev + slot);
    if (v == want) return true;
    if ((spin & 63) == 63) {
      if (proxy_failed(a)) return false;
      if (stop_ok && pphase(a) == 2) return false;
      if (kc_globaltimer() - start > a.timeout_ns) {
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
    const unsigned long long t0 = kc_globaltimer();
    while (*reinterpret_cast<volatile unsigned int*>(a.ready) < a.bulk_ctas) {
      if (kc_globaltimer() - t0 > a.timeout_ns) {
        proxy_fail(a, 3, 0, a.bulk_ctas, *reinterpret_cast<volatile unsigned int*>(a.ready));
        set_pphase(a, 2);
        return;
      }
    }
    const unsigned long long t1 = kc_globaltimer();
    while (kc_globaltimer() - t1 < a.settle_ns) {
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
    if (!a.pingpong) return;
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
  const unsigned long long t0 = kc_globaltimer();
  unsigned long long next = t0;
  uint32_t slot = 0;
  for (uint32_t iter = 0;; ++iter) {
    const int ph = pphase(a);
    // The failure word is in host memory: a PCIe read, so look every 64th descriptor only (read
    // on every one, it capped what all bulk CTAs together could offer at about 1 Mmsg/s).
    if (ph == 2 || ((iter & 63) == 0 && proxy_failed(a))) break;
    const unsigned long long now = kc_globaltimer();
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
    st.win_ns = kc_globaltimer() - win_start;
  }
  if (a.bulk_tuned) {
    a.tuned[ring] = tp;
    a.ring_tickets[ring] = tp.tail;
  }
  a.bulk[k] = st;
}

__global__ void drain_kernel(gda::Context ctx) {
  const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q < ctx.num_qps) gda::quiet_qp(ctx, ctx.qps[q]);
}

struct RttConfig {
  std::string transport, nic, queue, probe;
  bool bulk_tuned = false;  // mini-proxy bulk CTAs: tuned enqueue, one ring each
  uint32_t bulk_ctas, batch, workers, rings;
  double pace;
  long long settle_us, sq_wqebbs;
};

// What one kernel run gives back, whichever transport.
struct RttRun {
  std::vector<uint32_t> cycles;
  std::vector<BulkStat> bulk;
  ClockStamp clock{};
  unsigned long long done = 0;
};

std::vector<Record> records_of(const RttRun& run, bool pingpong, uint32_t iters) {
  double rate = 0;  // msgs per ns summed over CTAs
  for (const BulkStat& b : run.bulk)
    if (b.win_ns) rate += double(b.win_posted) / double(b.win_ns);
  const double mhz = mhz_of(run.clock);
  if (mhz <= 0) throw PointFailure("SM clock measurement failed (zero elapsed globaltimer)");
  std::vector<double> ns;
  for (uint32_t c : run.cycles) ns.push_back(double(c) * 1000.0 / mhz);
  std::vector<Record> out;
  out.push_back(Record::ok(pingpong ? "rtt_ns" : "completion_ns", "ns", bench::compute_stats(ns)));
  out.push_back(scalar("bulk_msg_rate", "Mmsg/s", rate * 1000.0));
  const double window_ns = double(run.clock.t1 - run.clock.t0);
  out.push_back(scalar("probe_msg_rate", "Mmsg/s", window_ns > 0 ? double(iters) * 1000.0 / window_ns : 0.0));
  for (Record& r : out) r.sm_clock_mhz = mhz;
  return out;
}

// Total pace_mmsgs spread over the CTAs: each CTA issues `per_period` messages per period (a
// mini-gda batch of `batch` WQEs; one descriptor for mini-proxy).
unsigned long long period_of(const RttConfig& c, uint32_t per_period) {
  return c.pace > 0 && c.bulk_ctas > 0
             ? static_cast<unsigned long long>(double(per_period) * c.bulk_ctas * 1000.0 / c.pace)
             : 0;
}

// Device memory of one kernel run, whichever transport: the probe's cycles per measured exchange,
// the bulk CTAs' readiness and load, the phase word, the probe's progress and clock window.
struct RunBufs {
  RunBufs(uint32_t iters_, uint32_t nbulk_)
      : iters(iters_), nbulk(nbulk_), cycles(iters), ready(1), phase(1), bulk(std::max<uint32_t>(1, nbulk)),
        probe_done(1), clock(1) {}

  // The fields RttArgs and ProxyRttArgs share; `per_period` is what a bulk CTA issues per pacing period.
  template <class Args>
  void fill(Args& a, const RttConfig& c, const Options& o, uint32_t per_period) const {
    a.shared = c.queue == "shared" ? 1 : 0;
    a.pingpong = c.probe == "pingpong" ? 1 : 0;
    a.bulk_ctas = nbulk;
    a.period_ns = period_of(c, per_period);
    a.settle_ns = static_cast<unsigned long long>(c.settle_us) * 1000ull;
    a.deadline_ns = 120ull * 1000000000ull;
    a.warmup = static_cast<uint32_t>(std::max(0, o.warmup));
    a.iters = iters;
    a.cycles = cycles.p;
    a.ready = ready.p;
    a.phase = phase.p;
    a.bulk = bulk.p;
    a.probe_done = probe_done.p;
    a.clock = clock.p;
  }

  // One kernel run: 2 + bulk_ctas blocks (probe, responder, bulk CTAs) of 32 threads on `s`, and
  // the bounded host wait for it.
  template <class Args>
  void launch(void (*kernel)(Args), const Args& a, cudaStream_t s) const {
    kernel<<<2 + nbulk, 32, 0, s>>>(a);
    KC_CUDA(cudaGetLastError());
    wait_stream(s, 150.0, kProgram);
  }

  void read_done(RttRun& run) const {
    KC_CUDA(cudaMemcpy(&run.done, probe_done.p, sizeof run.done, cudaMemcpyDeviceToHost));
  }
  void read_bulk(RttRun& run) const { run.bulk = nbulk ? bulk.read() : std::vector<BulkStat>{}; }
  // The probe's window and cycles, once it is known to have done every exchange.
  template <class Args>
  void read_probe(RttRun& run, const Args& a) const {
    if (run.done < a.warmup + a.iters) throw PointFailure("probe stopped after " + std::to_string(run.done) + " exchanges");
    KC_CUDA(cudaMemcpy(&run.clock, clock.p, sizeof run.clock, cudaMemcpyDeviceToHost));
    run.cycles = cycles.read();
  }

  uint32_t iters, nbulk;
  DevBuf<uint32_t> cycles;
  DevBuf<unsigned int> ready;
  DevBuf<int> phase;
  DevBuf<BulkStat> bulk;
  DevBuf<unsigned long long> probe_done;
  DevBuf<ClockStamp> clock;
};

RttRun run_gda(const RttConfig& c, const Options& o) {
  const bool shared = c.queue == "shared";
  const uint32_t nbulk = c.bulk_ctas;
  gda::SessionConfig sc;
  sc.engine = c.nic;
  sc.num_qps = 2 + (shared ? 0 : nbulk);
  sc.sq_wqebbs = static_cast<uint32_t>(c.sq_wqebbs);
  sc.timeout_ms = static_cast<uint32_t>(o.timeout_ms);
  // Destination words where the engine writes: ping, pong (own cache lines), then the bulk slots.
  NicBuf dst(c.nic, 0, 256 + size_t(std::max<uint32_t>(1, nbulk)) * kBulkSlots * 8);
  gda::Session s(sc);
  const uint32_t rkey = s.register_mr(dst.p, dst.bytes, softnic::kAccessRemoteWrite | softnic::kAccessLocalWrite).rkey;
  s.start_engine();
  KC_CUDA(cudaSetDevice(0));

  const RunBufs rb(static_cast<uint32_t>(std::max(1, o.iters)), nbulk);
  RttArgs a{};
  rb.fill(a, c, o, c.batch);
  a.ctx = s.context();
  uint8_t* base = static_cast<uint8_t*>(dst.p);
  a.ping = reinterpret_cast<uint64_t*>(base);
  a.pong = reinterpret_cast<uint64_t*>(base + 128);
  a.bulk_dst = reinterpret_cast<uint64_t*>(base + 256);
  a.rkey = rkey;
  a.batch = c.batch;

  const Stream stream;
  // Order: GPU-scope fence with the gpu engine (queues in GPU memory, the paper's default),
  // system-scope fence with the cpu engine (queues in host memory).
  rb.launch(c.nic == "softnic-gpu" ? rtt_kernel<order::GpuFence> : rtt_kernel<order::SysFence>, a, stream.s);
  std::string err = s.take_error();
  drain_kernel<<<(sc.num_qps + 127) / 128, 128, 0, stream.s>>>(s.context());
  KC_CUDA(cudaGetLastError());
  wait_stream(stream.s, 60.0, kProgram);
  if (err.empty()) err = s.take_error();
  s.stop_engine();
  const softnic::Counters k = s.engine_counters();
  RttRun run;
  rb.read_bulk(run);
  rb.read_done(run);
  uint64_t bulk_posted = 0;
  for (const BulkStat& b : run.bulk) bulk_posted += b.posted;
  if (!err.empty()) throw PointFailure("mini-gda: " + err + " (exchange " + std::to_string(run.done) + ")");
  const uint64_t expected = run.done * (a.pingpong ? 2 : 1) + bulk_posted;
  if (k.wqes != expected || k.errors || k.flushes) {
    std::ostringstream m;
    m << "mini-gda: engine executed " << k.wqes << " WQEs (" << k.errors << " errors, " << k.flushes
      << " flushed), expected " << expected << " (probe " << run.done << ", bulk " << bulk_posted << ")";
    throw PointFailure(m.str());
  }
  rb.read_probe(run, a);
  return run;
}

RttRun run_proxy(const RttConfig& c, const Options& o) {
  const bool shared = c.queue == "shared";
  const uint32_t nbulk = c.bulk_ctas;
  const uint32_t nrings = c.rings;
  const uint64_t timeout_ns = uint64_t(o.timeout_ms) * 1000000ull;
  HostBuf<uint64_t> remote(kProxyBulkBase + 32 * kProxyBulkSlots);
  HostBuf<ProxyFail> fail(1);
  DevBuf<proxy::TunedProducer> tuned(nrings);
  ProxyRig rig(nrings, timeout_ns);
  const auto mr = rig.nic.register_mr(remote.p, remote.n * 8, softnic::kAccessLocalWrite | softnic::kAccessRemoteWrite);
  rig.start(mr, mr, c.workers, c.batch);
  KC_CUDA(cudaSetDevice(0));

  const RunBufs rb(static_cast<uint32_t>(std::max(1, o.iters)), nbulk);
  DevBuf<unsigned long long> ring_tickets(nrings);
  ProxyRttArgs a{};
  rb.fill(a, c, o, 1);
  a.rings = rig.views.p;
  a.tuned = tuned.p;
  a.nrings = nrings;
  a.bulk_tuned = c.bulk_tuned ? 1 : 0;
  a.remote = remote.p;
  a.remote_dev = remote.d;
  a.timeout_ns = timeout_ns;
  a.ring_tickets = ring_tickets.p;
  a.fail = fail.d;
  const Stream stream;
  rb.launch(proxy_rtt_kernel, a, stream.s);
  RttRun run;
  rb.read_done(run);
  if (fail.p->flag) {
    const ProxyFail& f = *fail.p;
    std::ostringstream m;
    m << "mini-proxy: block " << f.block << " ring " << f.ring << ": "
      << (f.what == proxy::kWaitRingFull ? "ring full, consumer head "
                                         : f.what == proxy::kWaitCompletion ? "completion wait timed out, done "
                                                                            : "payload word wait timed out, value ")
      << f.seen << ", expected " << f.expected << " (exchange " << run.done << ")";
    if (rig.pool->failed()) m << "; worker: " << rig.pool->error();
    throw PointFailure(m.str());
  }
  // Drain: every ring must consume and complete exactly the tickets its producers took.
  const std::vector<uint64_t> res = rig.reserve.read();
  const std::vector<unsigned long long> tk = ring_tickets.read();
  std::vector<uint64_t> expected(nrings);
  for (uint32_t r = 0; r < nrings; ++r) {
    const bool tuned_ring = r == 1 || (r == 0 && !shared) || (r >= 2 && c.bulk_tuned);
    expected[r] = tuned_ring ? tk[r] : res[r];
  }
  std::string err;
  if (!rig.drain(expected, &err)) throw PointFailure("mini-proxy drain: " + err);
  rb.read_bulk(run);
  rb.read_probe(run, a);
  return run;
}

std::vector<Record> run_point(const Point& p, const Options& o) {
  const auto& q = p.params;
  RttConfig c;
  c.transport = q.get_string("transport", "mini-gda");
  c.nic = nic_backend_of(p, o, c.transport == "mini-proxy" ? "softnic-cpu" : "softnic-gpu");
  c.queue = q.get_string("queue", "reserved");
  c.probe = q.get_string("probe", "pingpong");
  const std::string bulk_enqueue = q.get_string("bulk_enqueue", "baseline");
  const long long bulk_ctas = q.get_int("bulk_ctas", 0);
  c.pace = q.get_double("pace_mmsgs", 0);
  const long long batch = q.get_int("batch", 8);
  c.settle_us = q.get_int("settle_us", 200);
  c.sq_wqebbs = q.get_int("sq_wqebbs", 1024);
  const long long workers = q.get_int("workers", 2);
  const long long rings = q.get_int("rings", std::min<long long>(32, 2 + std::max<long long>(1, bulk_ctas)));
  auto bad = [](const std::string& m) { throw PointFailure("bad parameter: " + m); };
  if (c.transport != "mini-gda" && c.transport != "mini-proxy") bad("transport must be mini-gda or mini-proxy, got " + c.transport);
  if (c.transport == "mini-gda" && c.nic != "softnic-gpu" && c.nic != "softnic-cpu")
    bad("mini-gda runs on nic_backend softnic-gpu or softnic-cpu, got " + c.nic);
  if (c.transport == "mini-proxy" && c.nic != "softnic-cpu")
    bad("mini-proxy workers post to nic_backend softnic-cpu, got " + c.nic);
  if (c.queue != "shared" && c.queue != "reserved") bad("queue must be shared or reserved, got " + c.queue);
  if (c.probe != "pingpong" && c.probe != "completion") bad("probe must be pingpong or completion, got " + c.probe);
  if (bulk_enqueue != "baseline" && bulk_enqueue != "tuned") bad("bulk_enqueue must be baseline or tuned, got " + bulk_enqueue);
  c.bulk_tuned = bulk_enqueue == "tuned";
  if (c.bulk_tuned && (c.transport != "mini-proxy" || c.queue != "reserved"))
    bad("bulk_enqueue=tuned needs transport mini-proxy and queue reserved (one producer per ring)");
  if (c.bulk_tuned && rings != 2 + std::max<long long>(1, bulk_ctas))
    bad("bulk_enqueue=tuned gives each bulk CTA its own ring: rings must be 2 + bulk_ctas (bulk_ctas <= 30), got rings " +
        std::to_string(rings) + " for bulk_ctas " + std::to_string(bulk_ctas));
  if (bulk_ctas < 0 || bulk_ctas > 128) bad("bulk_ctas must be in 0..128");
  if (batch < 1 || batch > kMaxBatch) bad("batch must be in 1..16");
  if (c.pace < 0) bad("pace_mmsgs must be >= 0");
  if (c.sq_wqebbs < 64 || c.sq_wqebbs > 65536 || (c.sq_wqebbs & (c.sq_wqebbs - 1)))
    bad("sq_wqebbs must be a power of two in 64..65536");
  if (workers < 1 || workers > proxy::kMaxWorkers) bad("workers must be in 1..8");
  if (rings < 3 || rings > proxy::kMaxRings || rings < workers) bad("rings must be in max(3, workers)..32");
  if (o.iters > 100000) bad("--iters must be <= 100000 here");
  c.bulk_ctas = static_cast<uint32_t>(bulk_ctas);
  c.batch = static_cast<uint32_t>(batch);
  c.workers = static_cast<uint32_t>(workers);
  c.rings = static_cast<uint32_t>(rings);
  if (gpu_count() < 1) throw HardwareMissing("no CUDA device: gicomm-bench-loaded-rtt needs a GPU");
  if (c.nic == "softnic-gpu" && gpu_count() < 2)
    throw PointFailure("nic_backend softnic-gpu needs 2 GPUs (engine on GPU 1), found " + std::to_string(gpu_count()));
  KC_CUDA(cudaSetDevice(0));
  int sms = 0;
  KC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // The probe, the responder and every bulk CTA spin on each other: all must be resident at once.
  if (2 + bulk_ctas > sms) bad("2 + bulk_ctas must fit the GPU's " + std::to_string(sms) + " SMs (all blocks co-resident)");
  const RttRun run = c.transport == "mini-gda" ? run_gda(c, o) : run_proxy(c, o);
  std::vector<Record> out = records_of(run, c.probe == "pingpong", static_cast<uint32_t>(std::max(1, o.iters)));
  for (Record& r : out) {
    r.transport = c.transport;
    r.nic_backend = c.nic;
  }
  return out;
}

}  // namespace
}  // namespace gicomm::kc

int main(int argc, char** argv) {
  gicomm::bench::DriverInfo info{"gicomm-bench-loaded-rtt", "mini-gda", "softnic-gpu"};
  return gicomm::bench::run_driver(argc, argv, info, gicomm::kc::run_point);
}
