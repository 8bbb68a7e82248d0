// The NIC floor a GPU thread sees (floors.h): one thread's 8-byte inline RDMA writes through
// mini-gda's mlx5 placement (a ConnectX, or the emulated rdma-core): issue, put+completion and the
// back-to-back message rate. Each QP connects to itself (--topology loopback) or to the peer rank's
// QPs (two ranks); every QP's last CQE and head are checked, and the point's path proof (the port
// counters of both ends, harness/nic_path.cpp) is on each record.
#include <string>
#include <vector>

#include "floors_gpu.cuh"

namespace gicomm::bench::floors {
namespace {

struct NicOut {
  long long* issue;
  long long* complete;
  long long rate_cycles;
  Window w;
};

template <class Order>
__global__ void nic_loopback_kernel(gda::Context ctx, GdaTarget tg, int warmup, int iters, NicOut* out) {
  gda::ThreadQp tq(&ctx.qps[0]);
  out->w.start = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    const gda::PutOp op = put_op(tg, tg.dst + 8 * (i & 255), tg.src, 8, true, 0x1000 + i);
    long long issue = 0, complete = 0;
    if (!timed_put_quiet<Order>(tq, ctx, op, &issue, &complete)) break;
    if (i >= 0) {
      out->issue[i] = issue;
      out->complete[i] = complete;
    }
  }
  // Message rate: `iters` writes back to back, one doorbell each, then one quiet.
  const long long r0 = clock64();
  for (int i = 0; i < iters; ++i) {
    if (!tq.put<Order>(ctx, put_op(tg, tg.dst + 8 * (i & 255), tg.src, 8, true, i), true)) break;
  }
  tq.quiet(ctx);
  out->rate_cycles = clock64() - r0;
  tq.flush();
  out->w.end = clock_sample();
}

}  // namespace

std::vector<Record> nic_loopback(Run& run) {
  const std::vector<std::string> metrics = {"floor_nic_issue_ns", "floor_nic_write_ns", "floor_nic_msg_rate"};
  if (run.nic() != NicBackend::mlx5)
    return skip_all(metrics, "no NIC asked (nic_backend none): give nic_backend mlx5 on a host with a ConnectX, or "
                    "run under the emulated rdma-core (gicomm-emu-run)");
  gda::SessionConfig cfg;
  try {
    cfg = gda_config(run, 1);
  } catch (const HardwareMissing& e) {
    return skip_all(metrics, e.what());
  }
  GdaMemory mem;
  mem.dst_bytes = 1 << 20;
  mem.src_bytes = 4096;
  GdaRig& rig = GdaRig::reuse(cfg, mem);
  const int iters = run.iters();
  DeviceBuffer<long long> issue(iters), complete(iters);
  DeviceBuffer<NicOut> d_out(1);
  NicOut h{issue.p, complete.p, 0, {}};
  GICOMM_CUDA(cudaMemcpy(d_out.p, &h, sizeof h, cudaMemcpyHostToDevice));
  order::dispatch(variant_of(run), [&](auto policy) {
    nic_loopback_kernel<decltype(policy)><<<1, 1>>>(rig.context(), rig.target(), run.warmup(), iters, d_out.p);
    return 0;
  });
  rig.check("nic loopback kernel");
  rig.check_last_cqes("nic loopback");
  rig.check_heads_meet("nic loopback");
  GICOMM_CUDA(cudaMemcpy(&h, d_out.p, sizeof h, cudaMemcpyDeviceToHost));
  const double mhz = mhz_of(h.w);
  // Every write completed (the CQE checks above); the rig's path proof (the port counters against
  // the WQEs posted) goes on each record.
  return {
      timed_record(metrics[0].c_str(), "ns", to_ns(issue.read(), mhz), mhz),
      timed_record(metrics[1].c_str(), "ns", to_ns(complete.read(), mhz), mhz),
      timed_record(metrics[2].c_str(), "Mmsg/s", {iters * mhz / static_cast<double>(h.rate_cycles)}, mhz)};
}

}  // namespace gicomm::bench::floors
