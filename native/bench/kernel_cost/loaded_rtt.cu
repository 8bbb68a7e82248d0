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
// Load carried: each bulk CTA counts its puts between the moment it sees the probe's measuring
// phase and the stop phase, over the %globaltimer time between the two; bulk_msg_rate is the sum
// over CTAs (Mmsg/s, in the same record set as the RTT). After the kernel every QP is drained and
// the engine must have executed exactly the WQEs posted (probe, responder, bulk) with no error CQE.
//
// Point parameters (defaults in brackets):
//   transport mini-gda [mini-gda]   nic_backend softnic-gpu|softnic-cpu [softnic-gpu]
//   bulk_ctas 0..128 [0]  queue shared|reserved [reserved]  pace_mmsgs >= 0 [0: unpaced]
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

__global__ void drain_kernel(gda::Context ctx) {
  const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q < ctx.num_qps) gda::quiet_qp(ctx, ctx.qps[q]);
}

std::vector<Record> run_point(const Point& p, const Options& o) {
  const auto& q = p.params;
  const std::string transport = q.get_string("transport", "mini-gda");
  const std::string nic = nic_backend_of(p, o, "softnic-gpu");
  const std::string queue = q.get_string("queue", "reserved");
  const std::string probe = q.get_string("probe", "pingpong");
  const long long bulk_ctas = q.get_int("bulk_ctas", 0);
  const double pace = q.get_double("pace_mmsgs", 0);
  const long long batch = q.get_int("batch", 8);
  const long long settle_us = q.get_int("settle_us", 200);
  const long long sq_wqebbs = q.get_int("sq_wqebbs", 1024);
  auto bad = [](const std::string& m) { throw PointFailure("bad parameter: " + m); };
  if (transport != "mini-gda") bad("transport must be mini-gda (mini-proxy is not implemented in this driver), got " + transport);
  if (nic != "softnic-gpu" && nic != "softnic-cpu") bad("nic_backend must be softnic-gpu or softnic-cpu, got " + nic);
  if (queue != "shared" && queue != "reserved") bad("queue must be shared or reserved, got " + queue);
  if (probe != "pingpong" && probe != "completion") bad("probe must be pingpong or completion, got " + probe);
  if (bulk_ctas < 0 || bulk_ctas > 128) bad("bulk_ctas must be in 0..128");
  if (batch < 1 || batch > kMaxBatch) bad("batch must be in 1..16");
  if (pace < 0) bad("pace_mmsgs must be >= 0");
  if (sq_wqebbs < 64 || sq_wqebbs > 65536 || (sq_wqebbs & (sq_wqebbs - 1))) bad("sq_wqebbs must be a power of two in 64..65536");
  if (o.iters > 100000) bad("--iters must be <= 100000 here");
  if (gpu_count() < 1) throw HardwareMissing("no CUDA device: gicomm-bench-loaded-rtt needs a GPU");
  if (nic == "softnic-gpu" && gpu_count() < 2)
    throw PointFailure("nic_backend softnic-gpu needs 2 GPUs (engine on GPU 1), found " + std::to_string(gpu_count()));
  KC_CUDA(cudaSetDevice(0));
  int sms = 0;
  KC_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // softnic-gpu with the engine on the same GPU is not used here, so every block has an SM.
  if (2 + bulk_ctas > sms) bad("2 + bulk_ctas must fit the GPU's " + std::to_string(sms) + " SMs (all blocks co-resident)");

  const bool shared = queue == "shared";
  const uint32_t nbulk = static_cast<uint32_t>(bulk_ctas);
  gda::SessionConfig sc;
  sc.engine = nic;
  sc.num_qps = 2 + (shared ? 0 : nbulk);
  sc.sq_wqebbs = static_cast<uint32_t>(sq_wqebbs);
  sc.timeout_ms = static_cast<uint32_t>(o.timeout_ms);
  // Destination words where the engine writes: ping, pong (own cache lines), then the bulk slots.
  NicBuf dst(nic, 0, 256 + size_t(std::max<uint32_t>(1, nbulk)) * kBulkSlots * 8);
  gda::Session s(sc);
  const uint32_t rkey = s.register_mr(dst.p, dst.bytes, softnic::kAccessRemoteWrite | softnic::kAccessLocalWrite).rkey;
  s.start_engine();
  KC_CUDA(cudaSetDevice(0));

  const uint32_t iters = static_cast<uint32_t>(std::max(1, o.iters));
  DevBuf<uint32_t> cycles(iters);
  DevBuf<unsigned int> ready(1);
  DevBuf<int> phase(1);
  DevBuf<BulkStat> bulk(std::max<uint32_t>(1, nbulk));
  DevBuf<unsigned long long> probe_done(1);
  DevBuf<ClockStamp> clock(1);
  RttArgs a{};
  a.ctx = s.context();
  uint8_t* base = static_cast<uint8_t*>(dst.p);
  a.ping = reinterpret_cast<uint64_t*>(base);
  a.pong = reinterpret_cast<uint64_t*>(base + 128);
  a.bulk_dst = reinterpret_cast<uint64_t*>(base + 256);
  a.rkey = rkey;
  a.shared = shared ? 1 : 0;
  a.pingpong = probe == "pingpong" ? 1 : 0;
  a.bulk_ctas = nbulk;
  a.batch = static_cast<uint32_t>(batch);
  a.period_ns = pace > 0 && nbulk > 0 ? static_cast<unsigned long long>(double(batch) * nbulk * 1000.0 / pace) : 0;
  a.settle_ns = static_cast<unsigned long long>(settle_us) * 1000ull;
  a.deadline_ns = 120ull * 1000000000ull;
  a.warmup = static_cast<uint32_t>(std::max(0, o.warmup));
  a.iters = iters;
  a.cycles = cycles.p;
  a.ready = ready.p;
  a.phase = phase.p;
  a.bulk = bulk.p;
  a.probe_done = probe_done.p;
  a.clock = clock.p;

  cudaStream_t stream;
  KC_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct Guard {
    cudaStream_t s;
    ~Guard() { cudaStreamDestroy(s); }
  } g{stream};
  // Order: GPU-scope fence with the gpu engine (queues in GPU memory, the paper's default),
  // system-scope fence with the cpu engine (queues in host memory).
  if (nic == "softnic-gpu")
    rtt_kernel<order::GpuFence><<<2 + nbulk, 32, 0, stream>>>(a);
  else
    rtt_kernel<order::SysFence><<<2 + nbulk, 32, 0, stream>>>(a);
  KC_CUDA(cudaGetLastError());
  wait_stream(stream, 150.0, kProgram);
  std::string err = s.take_error();
  drain_kernel<<<(sc.num_qps + 127) / 128, 128, 0, stream>>>(s.context());
  KC_CUDA(cudaGetLastError());
  wait_stream(stream, 60.0, kProgram);
  if (err.empty()) err = s.take_error();
  s.stop_engine();
  const softnic::Counters k = s.engine_counters();
  const auto stats = bulk.read();
  unsigned long long done = 0;
  KC_CUDA(cudaMemcpy(&done, probe_done.p, sizeof done, cudaMemcpyDeviceToHost));
  uint64_t bulk_posted = 0;
  double rate = 0;  // msgs per ns summed over CTAs
  for (const BulkStat& b : stats) {
    bulk_posted += b.posted;
    if (b.win_ns) rate += double(b.win_posted) / double(b.win_ns);
  }
  if (!err.empty()) throw PointFailure("mini-gda: " + err + " (exchange " + std::to_string(done) + ")");
  const uint64_t expected = done * (a.pingpong ? 2 : 1) + (nbulk ? bulk_posted : 0);
  if (k.wqes != expected || k.errors || k.flushes) {
    std::ostringstream m;
    m << "mini-gda: engine executed " << k.wqes << " WQEs (" << k.errors << " errors, " << k.flushes
      << " flushed), expected " << expected << " (probe " << done << ", bulk " << bulk_posted << ")";
    throw PointFailure(m.str());
  }
  if (done < a.warmup + a.iters) throw PointFailure("probe stopped after " + std::to_string(done) + " exchanges");
  ClockStamp clk{};
  KC_CUDA(cudaMemcpy(&clk, clock.p, sizeof clk, cudaMemcpyDeviceToHost));
  const double mhz = mhz_of(clk);
  if (mhz <= 0) throw PointFailure("SM clock measurement failed (zero elapsed globaltimer)");
  std::vector<double> ns;
  for (uint32_t c : cycles.read()) ns.push_back(double(c) * 1000.0 / mhz);
  std::vector<Record> out;
  out.push_back(Record::ok(a.pingpong ? "rtt_ns" : "completion_ns", "ns", bench::compute_stats(ns)));
  out.push_back(scalar("bulk_msg_rate", "Mmsg/s", rate * 1000.0));
  const double window_ns = double(clk.t1 - clk.t0);
  out.push_back(scalar("probe_msg_rate", "Mmsg/s", window_ns > 0 ? double(iters) * 1000.0 / window_ns : 0.0));
  for (Record& r : out) r.sm_clock_mhz = mhz;
  return out;
}

}  // namespace
}  // namespace gicomm::kc

int main(int argc, char** argv) {
  gicomm::bench::DriverInfo info{"gicomm-bench-loaded-rtt", "mini-gda", "softnic-gpu"};
  return gicomm::bench::run_driver(argc, argv, info, gicomm::kc::run_point);
}
