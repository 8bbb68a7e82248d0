// goodput: pipelined puts of one payload size, many in flight, goodput in GB/s (paper Fig 8 /
// Table 12). Parameters: config/experiments/goodput.yaml; mini-proxy's side: goodput_proxy.cu.
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
// --iters timed launches (at most 50), --warmup untimed ones before them (at most 5).
// Metrics: goodput_gbps (GB/s, 1e9 bytes), msg_rate (Mmsg/s).
#include <algorithm>

#include "gicomm/gda/gda.cuh"
#include "gicomm/order.cuh"
#include "gicomm/proxy/ring.h"
#include "goodput.cuh"
#include "harness/gda_rig.h"
#include "harness/two_rank.h"

namespace gicomm::bench::goodput {
namespace {

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




Measured measure_gda(Run& run, const Shape& s) {
  const uint32_t n = s.n;
  gda::SessionConfig sc = gda_config(run, n);
  sc.sq_wqebbs = run.param<uint32_t>("sq_wqebbs");
  const size_t bytes = size_t(s.slots) * s.size * n;
  GdaMemory mem;  // source on the producer's side, destination on the engine's ("wire") side
  mem.src_bytes = bytes;
  mem.src_access = softnic::kAccessLocalWrite;
  mem.dst_bytes = bytes;
  mem.dst_device = run.nic() == NicBackend::softnic_gpu ? 1 : 0;  // softnic-gpu-same: the producer's GPU
  mem.dst_access = softnic::kAccessRemoteWrite | softnic::kAccessLocalWrite;
  GdaRig rig(sc, mem);

  DeviceBuffer<unsigned long long> t0(n), t1(n);
  DeviceBuffer<ClockStamp> clock(1);
  GoodputArgs a{};
  a.ctx = rig.context();
  a.src = static_cast<uint8_t*>(rig.src().p);
  a.dst = static_cast<uint8_t*>(rig.dst().p);
  a.lkey = rig.target().lkey;
  a.rkey = rig.target().rkey;
  a.size = s.size;
  a.batch = s.batch;
  a.msgs = s.msgs;
  a.slots = s.slots;
  a.t0 = t0.p;
  a.t1 = t1.p;
  a.clock = clock.p;

  const Stream stream;
  uint64_t launches = 0;
  Measured m;
  auto launch = [&](bool timed) {
    if (run.nic() != NicBackend::softnic_cpu)  // the doorbell word is GPU memory
      producer_kernel<order::GpuFence><<<n, 32, 0, stream.s>>>(a);
    else
      producer_kernel<order::SysFence><<<n, 32, 0, stream.s>>>(a);
    GICOMM_CUDA(cudaGetLastError());
    wait_stream(stream.s, 60.0 + 4.0 * run.options.timeout_ms / 1000.0, 50);
    ++launches;
    const std::string err = rig.session().take_error();
    if (!err.empty()) throw PointFailure("mini-gda: " + err);
    if (timed) add_launch(m, t0, t1, clock, double(s.msgs) * n, double(s.size));
  };
  for (int i = 0; i < warm_launches(run); ++i) launch(false);
  for (int i = 0; i < timed_launches(run); ++i) launch(true);
  rig.drain(stream.s, 60.0);
  const std::string err = rig.session().take_error();
  if (!err.empty()) throw PointFailure("mini-gda: " + err);
  const uint64_t expected = launches * uint64_t(s.msgs) * n;
  rig.verify(expected, expected * uint64_t(s.size));
  return m;
}

std::vector<Record> goodput(Run& run) {
  const bool on_proxy = *run.transport == Transport::mini_proxy;
  const uint32_t size = run.param<uint32_t>("size");
  const uint32_t ctas = run.param<uint32_t>("ctas");
  const uint32_t batch = run.param<uint32_t>("batch");
  const long long msgs_total =
      run.derived<long long>("msgs_total", std::clamp<long long>((64ll << 20) / std::max(1u, size), 1024, 262144));
  const uint32_t workers = run.derived<uint32_t>("workers", std::min(2u, ctas));
  auto bad = [](const std::string& m) { throw PointFailure("bad parameter: " + m); };
  // Between two ranks the writes must cross a NIC to the peer: mini-proxy's verbs backend does.
  if (run.nic() != NicBackend::verbs)
    refuse_two_ranks(run, std::string("goodput on nic_backend ") + name_of(run.nic()),
                     "an RDMA backend for the writes to the peer (transport mini-proxy with nic_backend verbs "
                     "has one; the software NIC's backends are one process's)");
  if (on_proxy) {
    if (run.nic() != NicBackend::softnic_cpu && run.nic() != NicBackend::verbs)
      bad(std::string("mini-proxy workers post to nic_backend softnic-cpu or verbs, got ") + name_of(run.nic()));
    if (ctas > proxy::kMaxRings) bad("mini-proxy: ctas must be <= 32 (one tuned ring per CTA)");
    if (batch > proxy::kMaxBatch) bad("mini-proxy: batch (worker chaining) must be <= 16");
    if (size % 8) bad("mini-proxy: size must be a multiple of 8");
    if (workers > ctas) bad("mini-proxy: workers must be in 1..min(8, ctas)");
  }
  if (msgs_total < ctas) bad("msgs_total must be in ctas..2^26");
  if (gpu_count() < 1) throw HardwareMissing("no CUDA device: gicomm-bench-goodput needs a GPU");
  Shape s;
  s.n = ctas;
  s.msgs = static_cast<uint32_t>(msgs_total / ctas);
  s.size = size;
  s.batch = batch;
  s.workers = workers;
  // Payload slots per CTA: at most 64 MiB of source (and destination) in all.
  s.slots = std::max<uint64_t>(1, std::min<uint64_t>(s.msgs, (64ull << 20) / (uint64_t(size) * s.n)));
  Measured m;
  if (on_proxy) {
    GICOMM_CUDA(cudaSetDevice(0));
    m = measure_proxy(run, s);
  } else {
    m = measure_gda(run, s);
  }
  if (m.mhz.empty()) m.mhz.push_back(measure_sm_clock_mhz(2000000));
  Params params = run.point.params;
  params.set("link_ref", run.nic() == NicBackend::verbs
                            ? std::string("the RDMA NIC's wire (verbs, ") + run.topology + ")"
                            : std::string("softnic engine ceiling (") + name_of(run.nic()) + "), not a wire");
  params.set("msgs_total", static_cast<long long>(s.msgs) * s.n);
  std::sort(m.mhz.begin(), m.mhz.end());
  std::vector<Record> out;
  out.push_back(Record::ok("goodput_gbps", "GB/s", compute_stats(m.gbps)));
  out.push_back(Record::ok("msg_rate", "Mmsg/s", compute_stats(m.rate)));
  for (Record& r : out) {
    r.sm_clock_mhz = m.mhz[m.mhz.size() / 2];
    r.params = params;
  }
  return out;
}

}  // namespace

GICOMM_EXPERIMENT(goodput, goodput);

}  // namespace gicomm::bench::goodput
