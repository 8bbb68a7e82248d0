// loaded_rtt on mini-gda: the probe, responder and bulk CTAs on the QPs of one softnic session
// (loaded_rtt.cu describes the experiment).
#include <sstream>

#include "gicomm/gda/gda.cuh"
#include "gicomm/order.cuh"
#include "harness/gda_rig.h"
#include "loaded_rtt.cuh"

namespace gicomm::bench::loaded_rtt {
namespace {

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
  const unsigned long long start = globaltimer();
  for (uint32_t spin = 0;; ++spin) {
    const uint64_t v = *reinterpret_cast<const volatile uint64_t*>(w);
    if (v == want) return true;
    if ((spin & 63) == 63) {
      if (gda::failed(a.ctx)) return false;
      if (stop_ok && read_phase(a) == 2) return false;
      if (globaltimer() - start > a.ctx.timeout_ns) {
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
    const unsigned long long t0 = globaltimer();
    while (*reinterpret_cast<volatile unsigned int*>(a.ready) < a.bulk_ctas) {
      if (globaltimer() - t0 > a.ctx.timeout_ns) {
        gda::report(a.ctx, gda::WaitSite::peer, *q0, a.bulk_ctas, *reinterpret_cast<volatile unsigned int*>(a.ready));
        set_phase(a, 2);
        return;
      }
    }
    const unsigned long long t1 = globaltimer();
    while (globaltimer() - t1 < a.settle_ns) {
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
  const unsigned long long t0 = globaltimer();
  unsigned long long next = t0;
  gda::PutOp ops[kMaxBatch];
  uint32_t slot = 0;
  for (;;) {
    const int ph = read_phase(a);
    if (ph == 2 || gda::failed(a.ctx)) break;
    unsigned long long now = globaltimer();
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
    st.win_ns = globaltimer() - win_start;
  }
  if (!a.shared) tq.flush();
  a.bulk[k] = st;
}


}  // namespace

RttRun run_gda(const RttConfig& c, Run& run) {
  const uint32_t nbulk = c.bulk_ctas;
  gda::SessionConfig sc = gda_config(run, 2 + (c.shared ? 0 : nbulk));
  sc.sq_wqebbs = static_cast<uint32_t>(c.sq_wqebbs);
  // Destination words where the engine writes: ping, pong (own cache lines), then the bulk slots.
  GdaMemory mem;
  mem.dst_bytes = 256 + size_t(std::max<uint32_t>(1, nbulk)) * kBulkSlots * 8;
  mem.dst_access = softnic::kAccessRemoteWrite | softnic::kAccessLocalWrite;
  GdaRig rig(sc, mem);

  const RunBufs rb(static_cast<uint32_t>(std::max(1, run.iters())), nbulk);
  RttArgs a{};
  rb.fill(a, c, run.warmup(), c.batch);
  a.ctx = rig.context();
  uint8_t* base = static_cast<uint8_t*>(rig.dst().p);
  a.ping = reinterpret_cast<uint64_t*>(base);
  a.pong = reinterpret_cast<uint64_t*>(base + 128);
  a.bulk_dst = reinterpret_cast<uint64_t*>(base + 256);
  a.rkey = rig.target().rkey;
  a.batch = c.batch;

  const Stream stream;
  // Order: GPU-scope fence with the gpu engine (queues in GPU memory, the paper's default),
  // system-scope fence with the cpu engine (queues in host memory).
  rb.launch(c.nic == NicBackend::softnic_gpu ? rtt_kernel<order::GpuFence> : rtt_kernel<order::SysFence>, a, stream.s);
  std::string err = rig.session().take_error();
  rig.drain(stream.s, 60.0);
  if (err.empty()) err = rig.session().take_error();
  RttRun out;
  rb.read_bulk(out);
  rb.read_done(out);
  uint64_t bulk_posted = 0;
  for (const BulkStat& b : out.bulk) bulk_posted += b.posted;
  if (!err.empty()) throw PointFailure("mini-gda: " + err + " (exchange " + std::to_string(out.done) + ")");
  rig.verify(out.done * (a.pingpong ? 2 : 1) + bulk_posted, std::nullopt,
             " (probe " + std::to_string(out.done) + ", bulk " + std::to_string(bulk_posted) + ")");
  rb.read_probe(out, a);
  return out;
}

}  // namespace gicomm::bench::loaded_rtt
