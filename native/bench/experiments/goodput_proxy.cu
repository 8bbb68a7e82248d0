// goodput on mini-proxy: CTA c is the only producer of ring c (tuned enqueue: one 16-byte store
// per request), each request an Op::write of `size` bytes from a pinned source buffer (value =
// source offset | size << 40); a worker pool (`workers`, chaining `batch` <= 16) posts them as
// pointer RDMA writes to the softnic cpu engine, which copies into a pinned destination, or (verbs)
// to an RDMA NIC, into the peer rank's buffer or looped back; the producer then waits for the
// ring's completion counter (goodput.cu describes the experiment).
#include <sstream>

#include "goodput.cuh"
#include "harness/proxy_rig.h"

namespace gicomm::bench::goodput {
namespace {

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


}  // namespace

Measured measure_proxy(Run& run, const Shape& s) {
  const uint32_t n = s.n;
  const size_t bytes = size_t(s.slots) * s.size * n;
  MappedBuffer<uint8_t> src(bytes), dst(bytes);
  MappedBuffer<ProxyFail> fail(1);
  DeviceBuffer<proxy::TunedProducer> tuned(n);
  ProxyRigSpec spec = ProxyRigSpec::on_node0(n, s.workers, s.batch, run.timeout_ns());  // ring c = CTA c
  spec.fetch_bytes = 0;  // nothing checks the bytes that landed at a peer (the path proof counts them)
  run.rdma_provider = require_proxy_backend(run.nic());
  ProxyRig rig(spec);
  rig.start(run.nic(), {dst.p, bytes}, {src.p, bytes}, false);
  GICOMM_CUDA(cudaSetDevice(0));

  DeviceBuffer<unsigned long long> t0(n), t1(n);
  DeviceBuffer<ClockStamp> clock(1);
  ProxyGoodputArgs a{};
  a.rings = rig.views.p;
  a.tuned = tuned.p;
  a.size = s.size;
  a.msgs = s.msgs;
  a.slots = s.slots;
  a.timeout_ns = spec.timeout_ns;
  a.t0 = t0.p;
  a.t1 = t1.p;
  a.clock = clock.p;
  a.fail = fail.d;
  const Stream stream;
  Measured m;
  uint64_t launches = 0;
  auto launch = [&](bool timed) {
    proxy_producer_kernel<<<n, 32, 0, stream.s>>>(a);
    GICOMM_CUDA(cudaGetLastError());
    wait_stream(stream.s, 60.0 + 4.0 * run.options.timeout_ms / 1000.0, 50);
    ++launches;
    if (fail.p->flag) {
      std::ostringstream msg;
      msg << "mini-proxy: ring " << fail.p->ring
          << (fail.p->what == proxy::kWaitRingFull ? " full: consumer head " : " completion wait timed out: done ")
          << fail.p->seen << ", expected " << fail.p->expected;
      if (rig.worker_failed()) msg << "; worker: " << rig.worker_error();
      throw PointFailure(msg.str());
    }
    if (rig.worker_failed()) throw PointFailure("mini-proxy worker: " + rig.worker_error());
    if (timed) add_launch(m, t0, t1, clock, double(s.msgs) * n, double(s.size));
  };
  for (int i = 0; i < warm_launches(run); ++i) launch(false);
  for (int i = 0; i < timed_launches(run); ++i) launch(true);
  const std::vector<uint64_t> expected(n, launches * uint64_t(s.msgs));
  std::string err;
  const bool drained = rig.drain(expected, &err);
  if (rig.engine) rig.engine->stop();
  if (!drained) throw PointFailure("mini-proxy drain: " + err);
  if (!rig.engine) return m;  // verbs: every write completed (the drain); the path proof counts the bytes
  const softnic::Counters k = rig.engine->counters();
  const uint64_t total = launches * uint64_t(s.msgs) * n;
  if (k.errors || k.flushes || k.bytes != total * uint64_t(s.size)) {
    std::ostringstream msg;
    msg << "mini-proxy: softnic moved " << k.bytes << " bytes in " << k.wqes << " WQEs (" << k.errors << " errors, "
        << k.flushes << " flushed), expected " << total * uint64_t(s.size) << " bytes";
    throw PointFailure(msg.str());
  }
  return m;
}

}  // namespace gicomm::bench::goodput
