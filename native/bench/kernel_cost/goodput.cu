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
// The "link" here is the softnic engine, not a wire: the report's 90%-of-link size is relative to
// this engine's own ceiling (the largest goodput of the sweep), which every record says in its
// params (link_ref).
//
// Point parameters (defaults in brackets):
//   size 8..65536 bytes [8]  ctas 1..64 [16]  batch 1..64 [16]  msgs_total [clamp(64 MiB / size, 1024, 262144)]
//   nic_backend softnic-gpu|softnic-cpu [softnic-gpu]  transport mini-gda  sq_wqebbs [1024]
// --iters timed launches (capped at 50), --warmup untimed ones (capped at 5).
// Metrics: goodput_gbps (GB/s, 1e9 bytes), msg_rate (Mmsg/s).
#include <cuda_runtime.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "gicomm/gda/gda.cuh"
#include "gicomm/gda/session.h"
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

__global__ void drain_kernel(gda::Context ctx) {
  const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q < ctx.num_qps) gda::quiet_qp(ctx, ctx.qps[q]);
}

std::vector<Record> run_point(const Point& p, const Options& o) {
  const auto& q = p.params;
  const std::string transport = q.get_string("transport", "mini-gda");
  const std::string nic = nic_backend_of(p, o, "softnic-gpu");
  const long long size = q.get_int("size", 8);
  const long long ctas = q.get_int("ctas", 16);
  const long long batch = q.get_int("batch", 16);
  const long long sq_wqebbs = q.get_int("sq_wqebbs", 1024);
  const long long msgs_total = q.get_int("msgs_total", std::clamp<long long>((64ll << 20) / std::max(1ll, size), 1024, 262144));
  auto bad = [](const std::string& m) { throw PointFailure("bad parameter: " + m); };
  if (transport != "mini-gda") bad("transport must be mini-gda (mini-proxy is not implemented in this driver), got " + transport);
  if (nic != "softnic-gpu" && nic != "softnic-cpu") bad("nic_backend must be softnic-gpu or softnic-cpu, got " + nic);
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

  cudaStream_t stream;
  KC_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct Guard {
    cudaStream_t s;
    ~Guard() { cudaStreamDestroy(s); }
  } g{stream};
  uint64_t launches = 0;
  std::vector<double> gbps, rate, mhz;
  auto launch = [&](bool timed) {
    if (nic == "softnic-gpu")
      producer_kernel<order::GpuFence><<<n, 32, 0, stream>>>(a);
    else
      producer_kernel<order::SysFence><<<n, 32, 0, stream>>>(a);
    KC_CUDA(cudaGetLastError());
    wait_stream(stream, 60.0 + 4.0 * o.timeout_ms / 1000.0, kProgram);
    ++launches;
    const std::string err = s.take_error();
    if (!err.empty()) throw PointFailure("mini-gda: " + err);
    if (!timed) return;
    const auto s0 = t0.read(), s1 = t1.read();
    const double ns = double(*std::max_element(s1.begin(), s1.end()) - *std::min_element(s0.begin(), s0.end()));
    if (ns <= 0) throw PointFailure("zero elapsed globaltimer");
    const double total_msgs = double(msgs) * n;
    gbps.push_back(total_msgs * double(size) / ns);  // bytes/ns = GB/s
    rate.push_back(total_msgs * 1000.0 / ns);
    ClockStamp c{};
    KC_CUDA(cudaMemcpy(&c, clock.p, sizeof c, cudaMemcpyDeviceToHost));
    if (mhz_of(c) > 0) mhz.push_back(mhz_of(c));
  };
  const int warm = std::min(std::max(o.warmup, 0), 5), reps = std::max(1, std::min(o.iters, 50));
  for (int i = 0; i < warm; ++i) launch(false);
  for (int i = 0; i < reps; ++i) launch(true);
  drain_kernel<<<(n + 127) / 128, 128, 0, stream>>>(s.context());
  KC_CUDA(cudaGetLastError());
  wait_stream(stream, 60.0, kProgram);
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
  if (mhz.empty()) mhz.push_back(measure_sm_mhz());
  bench::Params params = p.params;
  params.set("link_ref", std::string("softnic engine ceiling (") + nic + "), not a wire");
  params.set("msgs_total", static_cast<long long>(msgs) * n);
  std::vector<Record> out;
  out.push_back(Record::ok("goodput_gbps", "GB/s", bench::compute_stats(gbps)));
  out.push_back(Record::ok("msg_rate", "Mmsg/s", bench::compute_stats(rate)));
  for (Record& r : out) {
    r.sm_clock_mhz = median(mhz);
    r.params = params;
  }
  return out;
}

}  // namespace
}  // namespace gicomm::kc

int main(int argc, char** argv) {
  gicomm::bench::DriverInfo info{"gicomm-bench-goodput", "mini-gda", "softnic-gpu"};
  return gicomm::bench::run_driver(argc, argv, info, gicomm::kc::run_point);
}
