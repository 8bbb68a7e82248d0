// gicomm-bench-goodput: pipelined puts of one payload size, many in flight, goodput in GB/s
// (paper Fig 8 / Table 12; native/bench/README.md is the CLI and record contract).
//
// `ctas` producer CTAs (one active thread each, each owning one QP of a mini-gda softnic session)
// post pointer-payload RDMA writes of `size` bytes from a source buffer in the producer GPU's
// memory to a destination buffer on the engine's side (GPU 1 for softnic-gpu; pinned host memory
// for softnic-cpu), one doorbell per `batch` WQEs, with up to the SQ depth in flight (the slot
// wait on the collapsed CQ is the only flow control), then wait for their completion (quiet).
// goodput = payload bytes of the launch / (last completion seen - first post), over %globaltimer
// stamps taken by the producers themselves; msg_rate likewise in Mmsg/s. The engine must have
// executed every WQE and moved every byte (softnic counters), else the point fails.
//
// transport=mini-proxy: CTA c is the only producer of ring c (tuned enqueue: one 16-byte store per
// request), each request an Op::write of `size` bytes from a pinned source buffer (value = source
// offset | size << 40); a worker pool (`workers`, chaining `batch` <= 16) posts them as pointer
// RDMA writes to the softnic cpu engine, which copies into a pinned destination; the producer then
// waits for the ring's completion counter. nic_backend softnic-cpu only; ctas <= 32 (rings);
// size a multiple of 8 (the descriptor names the destination in 8-byte units).
//
// The "link" here is the softnic engine, not a wire: the report's 90%-of-link size is relative to
// this engine's own ceiling (the largest goodput of the sweep), which every record says in its
// params (link_ref).
//
// Point parameters (defaults in brackets):
//   size 8..65536 bytes [8]  ctas 1..64 [16]  batch 1..64 [16]  msgs_total [clamp(64 MiB / size, 1024, 262144)]
//   transport mini-gda|mini-proxy [mini-gda]  sq_wqebbs [1024] (mini-gda)  workers 1..8 [min(2, ctas)] (mini-proxy)
//   nic_backend softnic-gpu|softnic-cpu [mini-gda: softnic-gpu; mini-proxy: softnic-cpu only]
// --iters timed launches (capped at 50), --warmup untimed ones (capped at 5).
// Metrics: goodput_gbps (GB/s, 1e9 bytes), msg_rate (Mmsg/s).
#include <cuda_runtime.h>

#include <algorithm>
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

constexpr const char* kProgram = "gicomm-bench-goodput";

struct GoodputArgs {
  gda::Context ctx;
  uint8_t* src;
  uint8_t* dst;
  uint32_t lkey, rkey;
  uint32_t size;
  uint32_t batch;
  uint32_t msgs;              // per CTA
  uint64_t slots;             // payload slots per CTA in src and dst
  unsigned long long* t0;     // per CTA: first post, last completion (%globaltimer)
  unsigned long long* t1;
  ClockStamp* clock;          // CTA 0
};

template <class Order>
__global__ void producer_kernel(GoodputArgs a) {
  if (threadIdx.x != 0) return;
  const uint32_t c = blockIdx.x;
  gda::ThreadQp tq(&a.ctx.qps[c]);
  ClockStamp clk{};
  stamp_begin(&clk);
  const unsigned long long start = clk.t0;
  const uint64_t base = uint64_t(c) * a.slots * a.size;
  bool ok = true;
  for (uint32_t i = 0; i < a.msgs && ok; ++i) {
    const uint64_t off = base + (i % a.slots) * a.size;
    gda::PutOp op{};
    op.raddr = reinterpret_cast<uint64_t>(a.dst + off);
    op.rkey = a.rkey;
    op.laddr = reinterpret_cast<uint64_t>(a.src + off);
    op.lkey = a.lkey;
    op.length = a.size;
    op.inline_data = false;  // pointer payload: the engine reads it, as a NIC's DMA would
    ok = tq.put<Order>(a.ctx, op, (i + 1) % a.batch == 0 || i + 1 == a.msgs);
  }
  if (ok) tq.quiet(a.ctx);
  tq.flush();
  stamp_end(&clk);
  a.t0[c] = start;
  a.t1[c] = clk.t1;
  if (c == 0) *a.clock = clk;
}


// ---- mini-proxy producers ------------------------------------------------------------------------------
struct ProxyFail {
  uint32_t flag, ring, what;
  unsigned long long expected, seen;
};

struct ProxyGoodputArgs {
  const proxy::RingView* rings;  // device array, ring c = CTA c
  proxy::TunedProducer* tuned;   // per ring, carried across launches
  uint32_t size;
  uint32_t msgs;                 // per CTA
  uint64_t slots;                // payload slots per CTA
  unsigned long long timeout_ns;
  unsigned long long* t0;
  unsigned long long* t1;
  ClockStamp* clock;
  ProxyFail* fail;               // mapped host memory
};

__global__ void proxy_producer_kernel(ProxyGoodputArgs a) {
  if (threadIdx.x != 0) return;
  const uint32_t c = blockIdx.x;
  const proxy::RingView r = a.rings[c];
  proxy::TunedProducer tp = a.tuned[c];
  ClockStamp clk{};
  stamp_begin(&clk);
  const uint64_t base = uint64_t(c) * a.slots * a.size;
  proxy::WaitError e{};
  bool ok = true;
  for (uint32_t i = 0; i < a.msgs && ok; ++i) {
    const uint64_t off = base + (i % a.slots) * a.size;
    const uint64_t value = off | (uint64_t(a.size) << 40);
    const uint32_t info = proxy::make_info(proxy::Op::write, static_cast<uint32_t>(off / 8), false);
    ok = proxy::enqueue_tuned(r, tp, value, info, a.timeout_ns, &e) != ~0ull;
  }
  if (ok) ok = proxy::wait_done(r, tp.tail, a.timeout_ns, &e) == WaitStatus::ok;
  if (!ok && atomicCAS(&a.fail->flag, 0u, 1u) == 0u) {
    a.fail->ring = c;
    a.fail->what = e.what;
    a.fail->expected = e.expected;
    a.fail->seen = e.seen;
    __threadfence_system();
  }
  a.tuned[c] = tp;
  stamp_end(&clk);
  a.t0[c] = clk.t0;
  a.t1[c] = clk.t1;
  if (c == 0) *a.clock = clk;
}

struct Measured {
  std::vector<double> gbps, rate, mhz;
};

// Goodput and message rate of one launch from the producers' own stamps.
void add_launch(Measured& m, const DevBuf<unsigned long long>& t0, const DevBuf<unsigned long long>& t1,
                const DevBuf<ClockStamp>& clock, double total_msgs, double size) {
  const auto s0 = t0.read(), s1 = t1.read();
  const double ns = double(*std::max_element(s1.begin(), s1.end()) - *std::min_element(s0.begin(), s0.end()));
  if (ns <= 0) throw PointFailure("zero elapsed globaltimer");
  m.gbps.push_back(total_msgs * size / ns);  // bytes/ns = GB/s
  m.rate.push_back(total_msgs * 1000.0 / ns);
  ClockStamp c{};
  KC_CUDA(cudaMemcpy(&c, clock.p, sizeof c, cudaMemcpyDeviceToHost));
  if (mhz_of(c) > 0) m.mhz.push_back(mhz_of(c));
}

Measured measure_proxy(const Options& o, uint32_t n, uint32_t msgs, uint64_t slots, uint32_t size, uint32_t batch,
                       uint32_t workers) {
  const uint64_t timeout_ns = uint64_t(o.timeout_ms) * 1000000ull;
  const size_t bytes = size_t(slots) * size * n;
  HostBuf<uint8_t> src(bytes), dst(bytes);
  HostBuf<ProxyFail> fail(1);
  DevBuf<proxy::TunedProducer> tuned(n);
  ProxyRig rig(n, timeout_ns);  // ring c = CTA c
  const auto smr = rig.nic.register_mr(src.p, bytes, softnic::kAccessLocalWrite);
  const auto dmr = rig.nic.register_mr(dst.p, bytes, softnic::kAccessLocalWrite | softnic::kAccessRemoteWrite);
  rig.start(smr, dmr, workers, batch);
  KC_CUDA(cudaSetDevice(0));

  DevBuf<unsigned long long> t0(n), t1(n);
  DevBuf<ClockStamp> clock(1);
  ProxyGoodputArgs a{};
  a.rings = rig.views.p;
  a.tuned = tuned.p;
  a.size = size;
  a.msgs = msgs;
  a.slots = slots;
  a.timeout_ns = timeout_ns;
  a.t0 = t0.p;
  a.t1 = t1.p;
  a.clock = clock.p;
  a.fail = fail.d;
  const Stream stream;
  Measured m;
  uint64_t launches = 0;
  auto launch = [&](bool timed) {
    proxy_producer_kernel<<<n, 32, 0, stream.s>>>(a);
    KC_CUDA(cudaGetLastError());
    wait_stream(stream.s, 60.0 + 4.0 * o.timeout_ms / 1000.0, kProgram);
    ++launches;
    if (fail.p->flag) {
      std::ostringstream msg;
      msg << "mini-proxy: ring " << fail.p->ring
          << (fail.p->what == proxy::kWaitRingFull ? " full: consumer head " : " completion wait timed out: done ")
          << fail.p->seen << ", expected " << fail.p->expected;
      if (rig.pool->failed()) msg << "; worker: " << rig.pool->error();
      throw PointFailure(msg.str());
    }
    if (rig.pool->failed()) throw PointFailure("mini-proxy worker: " + rig.pool->error());
    if (timed) add_launch(m, t0, t1, clock, double(msgs) * n, double(size));
  };
  const int warm = std::min(std::max(o.warmup, 0), 5), reps = std::max(1, std::min(o.iters, 50));
  for (int i = 0; i < warm; ++i) launch(false);
  for (int i = 0; i < reps; ++i) launch(true);
  const std::vector<uint64_t> expected(n, launches * uint64_t(msgs));
  std::string err;
  const bool drained = rig.drain(expected, &err);
  rig.engine->stop();
  if (!drained) throw PointFailure("mini-proxy drain: " + err);
  const softnic::Counters k = rig.engine->counters();
  const uint64_t total = launches * uint64_t(msgs) * n;
  if (k.errors || k.flushes || k.bytes != total * uint64_t(size)) {
    std::ostringstream msg;
    msg << "mini-proxy: softnic moved " << k.bytes << " bytes in " << k.wqes << " WQEs (" << k.errors << " errors, "
        << k.flushes << " flushed), expected " << total * uint64_t(size) << " bytes";
    throw PointFailure(msg.str());
  }
  return m;
}

__global__ void drain_kernel(gda::Context ctx) {
  const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q < ctx.num_qps) gda::quiet_qp(ctx, ctx.qps[q]);
}

std::vector<Record> records_of(const Point& p, const std::string& transport, const std::string& nic, Measured& m,
                               long long msgs_total) {
  if (m.mhz.empty()) m.mhz.push_back(measure_sm_mhz());
  bench::Params params = p.params;
  params.set("link_ref", std::string("softnic engine ceiling (") + nic + "), not a wire");
  params.set("msgs_total", msgs_total);
  std::vector<Record> out;
  out.push_back(Record::ok("goodput_gbps", "GB/s", bench::compute_stats(m.gbps)));
  out.push_back(Record::ok("msg_rate", "Mmsg/s", bench::compute_stats(m.rate)));
  for (Record& r : out) {
    r.sm_clock_mhz = median(m.mhz);
    r.params = params;
    r.transport = transport;
    r.nic_backend = nic;
  }
  return out;
}

std::vector<Record> run_point(const Point& p, const Options& o) {
  const auto& q = p.params;
  const std::string transport = q.get_string("transport", "mini-gda");
  const std::string nic = nic_backend_of(p, o, transport == "mini-proxy" ? "softnic-cpu" : "softnic-gpu");
  const long long size = q.get_int("size", 8);
  const long long ctas = q.get_int("ctas", 16);
  const long long batch = q.get_int("batch", 16);
  const long long sq_wqebbs = q.get_int("sq_wqebbs", 1024);
  const long long msgs_total = q.get_int("msgs_total", std::clamp<long long>((64ll << 20) / std::max(1ll, size), 1024, 262144));
  auto bad = [](const std::string& m) { throw PointFailure("bad parameter: " + m); };
  const long long workers = q.get_int("workers", std::min(2ll, ctas));
  if (transport != "mini-gda" && transport != "mini-proxy") bad("transport must be mini-gda or mini-proxy, got " + transport);
  if (transport == "mini-gda" && nic != "softnic-gpu" && nic != "softnic-cpu")
    bad("mini-gda runs on nic_backend softnic-gpu or softnic-cpu, got " + nic);
  if (transport == "mini-proxy") {
    if (nic != "softnic-cpu") bad("mini-proxy workers post to nic_backend softnic-cpu, got " + nic);
    if (ctas > proxy::kMaxRings) bad("mini-proxy: ctas must be <= 32 (one tuned ring per CTA)");
    if (batch > proxy::kMaxBatch) bad("mini-proxy: batch (worker chaining) must be <= 16");
    if (size % 8) bad("mini-proxy: size must be a multiple of 8");
    if (workers < 1 || workers > proxy::kMaxWorkers || workers > ctas) bad("mini-proxy: workers must be in 1..min(8, ctas)");
  }
  if (size < 1 || size > (1 << 20)) bad("size must be in 1..1048576");
  if (ctas < 1 || ctas > 64) bad("ctas must be in 1..64");
  if (batch < 1 || batch > 64) bad("batch must be in 1..64");
  if (sq_wqebbs < 64 || sq_wqebbs > 65536 || (sq_wqebbs & (sq_wqebbs - 1))) bad("sq_wqebbs must be a power of two in 64..65536");
  if (msgs_total < ctas || msgs_total > (1ll << 26)) bad("msgs_total must be in ctas..2^26");
  if (gpu_count() < 1) throw HardwareMissing("no CUDA device: gicomm-bench-goodput needs a GPU");
  if (nic == "softnic-gpu" && gpu_count() < 2)
    throw PointFailure("nic_backend softnic-gpu needs 2 GPUs (engine on GPU 1), found " + std::to_string(gpu_count()));

  const uint32_t n = static_cast<uint32_t>(ctas);
  const uint32_t msgs = static_cast<uint32_t>(msgs_total / ctas);
  // Payload slots per CTA: at most 64 MiB of source (and destination) in all.
  const uint64_t slots = std::max<uint64_t>(1, std::min<uint64_t>(msgs, (64ull << 20) / (uint64_t(size) * n)));
  const size_t bytes = size_t(slots) * size * n;
  if (transport == "mini-proxy") {
    KC_CUDA(cudaSetDevice(0));
    Measured m = measure_proxy(o, n, msgs, slots, static_cast<uint32_t>(size), static_cast<uint32_t>(batch),
                               static_cast<uint32_t>(workers));
    return records_of(p, transport, nic, m, static_cast<long long>(msgs) * n);
  }
  gda::SessionConfig sc;
  sc.engine = nic;
  sc.num_qps = n;
  sc.sq_wqebbs = static_cast<uint32_t>(sq_wqebbs);
  sc.timeout_ms = static_cast<uint32_t>(o.timeout_ms);
  NicBuf src(nic, 0, bytes);                                   // producer side
  NicBuf dst(nic, nic == "softnic-gpu" ? 1 : 0, bytes);        // engine ("wire") side
  gda::Session s(sc);
  const uint32_t lkey = s.register_mr(src.p, bytes, softnic::kAccessLocalWrite).lkey;
  const uint32_t rkey = s.register_mr(dst.p, bytes, softnic::kAccessRemoteWrite | softnic::kAccessLocalWrite).rkey;
  s.start_engine();
  KC_CUDA(cudaSetDevice(0));

  DevBuf<unsigned long long> t0(n), t1(n);
  DevBuf<ClockStamp> clock(1);
  GoodputArgs a{};
  a.ctx = s.context();
  a.src = static_cast<uint8_t*>(src.p);
  a.dst = static_cast<uint8_t*>(dst.p);
  a.lkey = lkey;
  a.rkey = rkey;
  a.size = static_cast<uint32_t>(size);
  a.batch = static_cast<uint32_t>(batch);
  a.msgs = msgs;
  a.slots = slots;
  a.t0 = t0.p;
  a.t1 = t1.p;
  a.clock = clock.p;

  const Stream stream;
  uint64_t launches = 0;
  Measured m;
  auto launch = [&](bool timed) {
    if (nic == "softnic-gpu")
      producer_kernel<order::GpuFence><<<n, 32, 0, stream.s>>>(a);
    else
      producer_kernel<order::SysFence><<<n, 32, 0, stream.s>>>(a);
    KC_CUDA(cudaGetLastError());
    wait_stream(stream.s, 60.0 + 4.0 * o.timeout_ms / 1000.0, kProgram);
    ++launches;
    const std::string err = s.take_error();
    if (!err.empty()) throw PointFailure("mini-gda: " + err);
    if (timed) add_launch(m, t0, t1, clock, double(msgs) * n, double(size));
  };
  const int warm = std::min(std::max(o.warmup, 0), 5), reps = std::max(1, std::min(o.iters, 50));
  for (int i = 0; i < warm; ++i) launch(false);
  for (int i = 0; i < reps; ++i) launch(true);
  drain_kernel<<<(n + 127) / 128, 128, 0, stream.s>>>(s.context());
  KC_CUDA(cudaGetLastError());
  wait_stream(stream.s, 60.0, kProgram);
  const std::string err = s.take_error();
  if (!err.empty()) throw PointFailure("mini-gda: " + err);
  s.stop_engine();
  const softnic::Counters k = s.engine_counters();
  const uint64_t expected = launches * uint64_t(msgs) * n;
  if (k.wqes != expected || k.errors || k.flushes || k.bytes != expected * uint64_t(size)) {
    std::ostringstream m;
    m << "mini-gda: engine executed " << k.wqes << " WQEs, " << k.bytes << " bytes (" << k.errors << " errors, "
      << k.flushes << " flushed), expected " << expected << " WQEs, " << expected * uint64_t(size) << " bytes";
    throw PointFailure(m.str());
  }
  return records_of(p, transport, nic, m, static_cast<long long>(msgs) * n);
}

}  // namespace
}  // namespace gicomm::kc

int main(int argc, char** argv) {
  gicomm::bench::DriverInfo info{"gicomm-bench-goodput", "mini-gda", "softnic-gpu"};
  return gicomm::bench::run_driver(argc, argv, info, gicomm::kc::run_point);
}
