// gicomm-bench-gda: mini-gda on the softnic (native/bench/README.md contract).
//
// Experiments (--experiment) and their point params:
//   one_op        the pipeline's Table 3 experiment: transport (mini-gda), payload, size (8), optional
//                 variant -> everything gda_one_op records plus rtt_ns
//   gda_one_op    variant (Table 4 name), payload (inline|pointer)
//                 -> issue_cycles, issue_ns, completion_ns (put + completion, one 8-byte op, one
//                    thread, at most one outstanding), floor_issue_cycles, floor_issue_ns (the bare
//                    48-byte WQE store + the variant's fence + 8-byte doorbell store, same memory,
//                    same run), issue_over_floor (ratio of p50s)
//   gda_rtt       variant, payload -> rtt_ns (ping block -> engine -> pong block -> engine -> ping)
//   gda_msg_rate  mode (thread|lock|handoff|warp|hybrid), blocks, threads (per block), qps, batch,
//                 payload, completion (used|all), wqes (total) -> msg_rate (Mmsg/s)
//   inline_payload, completion_scope, sm_clock, connection_scaling   the paper's Fig. 3, 4, 5, 10
//                 (figures.cu)
// Engine: --nic-backend softnic-gpu (engine kernel on GPU 1, queues on GPU 0), softnic-cpu, or mlx5
// (a real ConnectX through DEVX, loopback QPs; never run here: no NIC on our machines).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/harness.h"
#include "driver.h"
#include "gicomm/common/clock.cuh"
#include "gicomm/gda/gda.cuh"
#include "gicomm/gda/session.h"
#include "gicomm/order.cuh"
#include "gicomm/softnic/gpu_engine.h"
#if defined(GICOMM_BENCH_GDA_WITH_MLX5)
#include "gicomm/mlx5dev/devx.h"
#endif

using namespace gicomm;
using namespace gicomm::gda;
using namespace gicomm::bench_gda;
using gicomm::bench::PointFailure;
using gicomm::bench::Record;

namespace {

__device__ __forceinline__ PutOp op_to(const Target& t, uint64_t raddr, uint64_t laddr, bool inl, uint64_t value) {
  PutOp op{};
  op.raddr = raddr;
  op.rkey = t.rkey;
  op.laddr = laddr;
  op.lkey = t.lkey;
  op.length = 8;
  op.inline_data = inl;
  op.value = value;
  return op;
}

// ---- one op: issue and put+completion, and the floor --------------------------------------------------------
struct OneOpOut {
  long long* issue;
  long long* complete;
  long long* floor;
  ClockSample start, end;
};

template <class Order, bool kInline>
__global__ void one_op_kernel(Context ctx, Target tg, int warmup, int iters, OneOpOut* out, uint8_t* floor_sq,
                              uint64_t* floor_db) {
  ThreadQp tq(&ctx.qps[0]);
  const ClockSample s0 = clock_sample();
  for (int i = -warmup; i < iters; ++i) {
    uint64_t* src = reinterpret_cast<uint64_t*>(tg.src) + (i & 255);
    if (!kInline) *src = 0x1000 + i;  // the pointer payload: written before the op, ordered by the policy
    const PutOp op = op_to(tg, tg.dst + 8 * (i & 255), reinterpret_cast<uint64_t>(src), kInline, 0x1000 + i);
    const long long t0 = clock64();
    if (!tq.put<Order>(ctx, op, true)) break;
    const long long t1 = clock64();
    if (!tq.quiet(ctx)) break;
    const long long t2 = clock64();
    if (i >= 0) {
      out->issue[i] = t1 - t0;
      out->complete[i] = t2 - t0;
    }
  }
  tq.flush();
  // The floor: the bare stores of the same sequence into the same kind of memory, same fence.
  for (int i = -warmup; i < iters; ++i) {
    spin_cycles(4000);  // let earlier stores drain, as the completion wait does above
    uint4* wqe = reinterpret_cast<uint4*>(floor_sq + 64 * (i & 63));
    const long long t0 = clock64();
    wqe[0] = make_uint4(i, 1, 2, 3);
    wqe[1] = make_uint4(4, 5, 6, 7);
    wqe[2] = make_uint4(8, 9, 10, 11);
    Order::before_doorbell();
    Order::store_doorbell(floor_db, static_cast<uint64_t>(i));
    const long long t1 = clock64();
    if (i >= 0) out->floor[i] = t1 - t0;
  }
  out->start = s0;
  out->end = clock_sample();
}

// ---- round trip -----------------------------------------------------------------------------------------------
template <class Order, bool kInline>
__global__ void rtt_kernel(Context ctx, Target tg, int warmup, int iters, long long* rtt_ns) {
  // Block 0 pings through QP 0 into flag B; block 1 answers through QP 1 into flag A.
  volatile uint64_t* flag_a = reinterpret_cast<volatile uint64_t*>(tg.dst);
  volatile uint64_t* flag_b = reinterpret_cast<volatile uint64_t*>(tg.dst + 64);
  const bool ping = blockIdx.x == 0;
  ThreadQp tq(&ctx.qps[ping ? 0 : 1]);
  uint64_t* src = reinterpret_cast<uint64_t*>(tg.src) + (ping ? 0 : 8);
  for (int i = -warmup; i < iters; ++i) {
    const uint64_t value = static_cast<uint64_t>(i + warmup + 1);
    const unsigned long long t0 = globaltimer();
    if (!ping) {
      for (uint32_t spin = 0; *flag_b != value; ++spin) {
        if ((spin & 1023) == 1023 && (failed(ctx) || globaltimer() - t0 > ctx.timeout_ns)) {
          report(ctx, WaitSite::peer, ctx.qps[0], value, *flag_b);
          return;
        }
      }
    }
    if (!kInline) *src = value;
    const PutOp op = op_to(tg, reinterpret_cast<uint64_t>(ping ? flag_b : flag_a), reinterpret_cast<uint64_t>(src),
                           kInline, value);
    if (!tq.put<Order>(ctx, op, true)) return;
    if (ping) {
      for (uint32_t spin = 0; *flag_a != value; ++spin) {
        if ((spin & 1023) == 1023 && (failed(ctx) || globaltimer() - t0 > ctx.timeout_ns)) {
          report(ctx, WaitSite::peer, ctx.qps[1], value, *flag_a);
          return;
        }
      }
      if (i >= 0) rtt_ns[i] = static_cast<long long>(globaltimer() - t0);
    }
  }
  tq.quiet(ctx);
  tq.flush();
}

// ---- message rate ------------------------------------------------------------------------------------------------
enum Mode { kThread, kLock, kHandoff, kWarp, kHybrid };

template <class Order, int M, bool kInline>
__global__ void rate_kernel(Context ctx, Target tg, uint32_t ops, uint32_t batch, bool all_qps, uint32_t slots) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t total = gridDim.x * blockDim.x;
  const uint64_t* src = reinterpret_cast<const uint64_t*>(tg.src);
  auto make = [&](uint32_t j) {
    const uint64_t slot = (uint64_t(t) * 7919u + j) % slots;
    return op_to(tg, tg.dst + 8 * slot, reinterpret_cast<uint64_t>(src + (slot & 4095)), kInline, slot);
  };
  if (M == kThread || M == kHybrid) {
    DeviceQp* qp = &ctx.qps[t];
    if (M == kThread) {
      ThreadQp tq(qp);
      for (uint32_t j = 0; j < ops; ++j)
        if (!tq.put<Order>(ctx, make(j), (j % batch) == batch - 1 || j + 1 == ops)) return;
      tq.flush();
    } else {
      HybridThreadQp hq(qp);
      for (uint32_t j = 0; j < ops; ++j)
        if (!hq.put(ctx, make(j), (j % batch) == batch - 1 || j + 1 == ops)) return;
      hq.t.flush();
    }
  } else {
    const uint32_t qpi = static_cast<uint32_t>((uint64_t(t) * ctx.num_qps) / total);
    DeviceQp* qp = &ctx.qps[qpi];
    if (M == kWarp) {
      for (uint32_t j = 0; j < ops; ++j)
        if (!put_warp<Order>(ctx, *qp, make(j))) return;
    } else {
      PutOp list[16];
      for (uint32_t j = 0; j < ops;) {
        const uint32_t n = min(batch, ops - j);
        for (uint32_t k = 0; k < n; ++k) list[k] = make(j + k);
        const bool ok = M == kLock ? put_locked<Order>(ctx, *qp, list, n) : put_handoff<Order>(ctx, *qp, list, n);
        if (!ok) return;
        j += n;
      }
    }
  }
  // Completion scope: the QP this thread used, or every QP of the context.
  if (all_qps) {
    quiet_all(ctx);
  } else {
    quiet_qp(ctx, (M == kThread || M == kHybrid) ? ctx.qps[t]
                                                 : ctx.qps[static_cast<uint32_t>((uint64_t(t) * ctx.num_qps) / total)]);
  }
}

}  // namespace

// ---- sessions and shared helpers (driver.h) ------------------------------------------------------------
namespace gicomm::bench_gda {

bool same_session(const SessionConfig& a, const SessionConfig& b) {
  return a.engine == b.engine && a.num_qps == b.num_qps && a.sq_wqebbs == b.sq_wqebbs && a.hybrid == b.hybrid &&
         a.timeout_ms == b.timeout_ms;
}

Env& env_for(const SessionConfig& cfg, size_t dst_bytes) {
  static Env env;
  if (env.session && same_session(env.cfg, cfg) && env.dst->bytes >= dst_bytes) return env;
  env.session.reset();
  env.dst.reset();
  env.src.reset();
  CUDA(cudaSetDevice(cfg.producer_device));
  const bool host = cfg.engine == "softnic-cpu";
  env.session = std::make_unique<Session>(cfg);
  env.dst = std::make_unique<Buffer>(host, dst_bytes);
  env.src = std::make_unique<Buffer>(host, kSrcBytes);
  env.tg.dst = reinterpret_cast<uint64_t>(env.dst->p);
  env.tg.rkey = env.session->register_mr(env.dst->p, dst_bytes, softnic::kAccessRemoteWrite).rkey;
  env.tg.src = reinterpret_cast<uint64_t>(env.src->p);
  env.tg.lkey = env.session->register_mr(env.src->p, env.src->bytes, 0).lkey;
  env.session->start_engine();
  env.cfg = cfg;
  return env;
}

void check_kernel(Env& env, const char* what) {
  const cudaError_t e = cudaDeviceSynchronize();
  const std::string err = env.session->take_error();
  if (e != cudaSuccess || !err.empty()) {
    env.session.reset();  // a failed QP is in error state: start over for the next point
    throw PointFailure(std::string(what) + ": " + (e != cudaSuccess ? cudaGetErrorString(e) : err));
  }
}

std::vector<double> to_ns(const std::vector<long long>& cycles, double mhz) {
  std::vector<double> v(cycles.size());
  for (size_t i = 0; i < cycles.size(); ++i) v[i] = static_cast<double>(cycles[i]) * 1e3 / mhz;
  return v;
}
std::vector<double> to_d(const std::vector<long long>& x) { return std::vector<double>(x.begin(), x.end()); }

SessionConfig base_config(const bench::Options& o, uint32_t qps) {
  SessionConfig c;
  c.engine = o.nic_backend.empty() ? "softnic-gpu" : o.nic_backend;
  c.num_qps = qps;
  c.timeout_ms = static_cast<uint32_t>(o.timeout_ms);
  if (c.engine == "mlx5") {
#if defined(GICOMM_BENCH_GDA_WITH_MLX5)
    // A real ConnectX (gda::Session's mlx5 placement: loopback RC QPs, queues in GPU memory).
    // Checked before any CUDA call, so a host without one exits 3 with one line.
    std::string reason;
    if (!gicomm::mlx5dev::DevxDevice::open("", &reason)) throw bench::HardwareMissing("nic backend mlx5: " + reason);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) throw bench::HardwareMissing("no CUDA GPU visible");
    return c;
#else
    throw bench::HardwareMissing("nic backend mlx5: this build has no rdma-core");
#endif
  }
  if (c.engine != "softnic-gpu" && c.engine != "softnic-cpu")
    throw PointFailure("gicomm-bench-gda runs on softnic-gpu, softnic-cpu or mlx5, not " + c.engine);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) throw bench::HardwareMissing("no CUDA GPU visible");
  // The benchmarks allocate and free per point, and cudaFree synchronizes the whole device: with
  // the persistent engine kernel on the producer's own GPU that would wait for the engine. The
  // same-GPU placement is checked by gicomm-gda-gpu-check; the benchmarks need the peer GPU.
  if (c.engine == "softnic-gpu" && ndev < 2)
    throw bench::HardwareMissing("nic backend softnic-gpu: the benchmarks run the engine on a peer GPU; " +
                                 std::to_string(ndev) + " GPU visible");
  return c;
}

order::Variant variant_of(const bench::Point& p) {
  order::Variant v;
  const std::string name = p.params.get_string("variant", "gpu_fence");
  if (!order::variant_from_name(name.c_str(), &v)) throw PointFailure("unknown ordering variant " + name);
  return v;
}

std::vector<Record> one_op(const bench::Point& p, const bench::Options& o) {
  const bool inl = p.params.get_string("payload", "inline") == "inline";
  Env& env = env_for(base_config(o, 2), 1 << 20);  // the same 2-QP session as gda_rtt
  const int iters = o.iters;
  long long *d_issue, *d_complete, *d_floor;
  OneOpOut* d_out;
  CUDA(cudaMalloc(&d_issue, sizeof(long long) * iters));
  CUDA(cudaMalloc(&d_complete, sizeof(long long) * iters));
  CUDA(cudaMalloc(&d_floor, sizeof(long long) * iters));
  CUDA(cudaMalloc(&d_out, sizeof(OneOpOut)));
  OneOpOut h{d_issue, d_complete, d_floor, {}, {}};
  CUDA(cudaMemcpy(d_out, &h, sizeof h, cudaMemcpyHostToDevice));
  const Context ctx = env.session->context();
  order::dispatch(variant_of(p), [&](auto policy) {
    using P = decltype(policy);
    if (inl) {
      one_op_kernel<P, true><<<1, 1>>>(ctx, env.tg, o.warmup, iters, d_out, env.session->floor_sq(),
                                       env.session->floor_doorbell());
    } else {
      one_op_kernel<P, false><<<1, 1>>>(ctx, env.tg, o.warmup, iters, d_out, env.session->floor_sq(),
                                        env.session->floor_doorbell());
    }
    return 0;
  });
  check_kernel(env, "one-op kernel");
  std::vector<long long> issue(iters), complete(iters), floor(iters);
  CUDA(cudaMemcpy(issue.data(), d_issue, sizeof(long long) * iters, cudaMemcpyDeviceToHost));
  CUDA(cudaMemcpy(complete.data(), d_complete, sizeof(long long) * iters, cudaMemcpyDeviceToHost));
  CUDA(cudaMemcpy(floor.data(), d_floor, sizeof(long long) * iters, cudaMemcpyDeviceToHost));
  CUDA(cudaMemcpy(&h, d_out, sizeof h, cudaMemcpyDeviceToHost));
  cudaFree(d_issue);
  cudaFree(d_complete);
  cudaFree(d_floor);
  cudaFree(d_out);
  const double mhz = sm_clock_mhz(h.start, h.end);
  if (!(mhz > 100)) throw PointFailure("implausible SM clock " + std::to_string(mhz) + " MHz");
  std::vector<Record> out;
  auto add = [&](const char* metric, const char* unit, const std::vector<double>& v) {
    Record r = Record::ok(metric, unit, bench::compute_stats(v));
    r.sm_clock_mhz = mhz;
    out.push_back(r);
  };
  add("issue_cycles", "cycles", to_d(issue));
  add("issue_ns", "ns", to_ns(issue, mhz));
  add("completion_ns", "ns", to_ns(complete, mhz));
  add("floor_issue_cycles", "cycles", to_d(floor));
  add("floor_issue_ns", "ns", to_ns(floor, mhz));
  const double ratio = out[0].stats->p50 / std::max(1.0, out[3].stats->p50);
  add("issue_over_floor", "ratio", {ratio});
  return out;
}

}  // namespace gicomm::bench_gda

namespace {

std::vector<Record> rtt(const bench::Point& p, const bench::Options& o) {
  const bool inl = p.params.get_string("payload", "inline") == "inline";
  Env& env = env_for(base_config(o, 2), 1 << 20);
  // Reset the flags (a previous point used the same values).
  if (env.dst->pinned) {
    std::memset(env.dst->p, 0, 128);
  } else {
    CUDA(cudaMemset(env.dst->p, 0, 128));
  }
  const int iters = o.iters;
  long long* d_rtt;
  CUDA(cudaMalloc(&d_rtt, sizeof(long long) * iters));
  const Context ctx = env.session->context();
  order::dispatch(variant_of(p), [&](auto policy) {
    using P = decltype(policy);
    if (inl) {
      rtt_kernel<P, true><<<2, 1>>>(ctx, env.tg, o.warmup, iters, d_rtt);
    } else {
      rtt_kernel<P, false><<<2, 1>>>(ctx, env.tg, o.warmup, iters, d_rtt);
    }
    return 0;
  });
  check_kernel(env, "rtt kernel");
  std::vector<long long> v(iters);
  CUDA(cudaMemcpy(v.data(), d_rtt, sizeof(long long) * iters, cudaMemcpyDeviceToHost));
  cudaFree(d_rtt);
  Record r = Record::ok("rtt_ns", "ns", bench::compute_stats(to_d(v)));
  r.sm_clock_mhz = probe_sm_clock_mhz();
  std::vector<Record> out{r};
  return out;
}

// The rate sweeps use the default ordering (GPU-scope fence); the variants' cost is what
// gda_one_op measures. Instantiating all seven here would multiply build time by seven.
template <int M>
void launch_rate(order::Variant v, bool inl, int blocks, int threads, const Context& ctx, const Target& tg,
                 uint32_t ops, uint32_t batch, bool all, uint32_t slots) {
  if (v != order::Variant::gpu_fence) throw PointFailure("gda_msg_rate is built for variant gpu_fence only");
  using P = order::GpuFence;
  if (inl) {
    rate_kernel<P, M, true><<<blocks, threads>>>(ctx, tg, ops, batch, all, slots);
  } else {
    rate_kernel<P, M, false><<<blocks, threads>>>(ctx, tg, ops, batch, all, slots);
  }
}

std::vector<Record> msg_rate(const bench::Point& p, const bench::Options& o) {
  const std::string mode = p.params.get_string("mode", "thread");
  const int blocks = static_cast<int>(p.params.get_int("blocks", 1));
  const int threads = static_cast<int>(p.params.get_int("threads", 1));
  const uint32_t qps = static_cast<uint32_t>(p.params.get_int("qps", 1));
  const uint32_t batch = static_cast<uint32_t>(p.params.get_int("batch", 1));
  const bool inl = p.params.get_string("payload", "inline") == "inline";
  const bool all = p.params.get_string("completion", "used") == "all";
  const uint64_t wqes = static_cast<uint64_t>(p.params.get_int("wqes", 2000000));
  const order::Variant v = variant_of(p);
  int m;
  if (mode == "thread") m = kThread;
  else if (mode == "lock") m = kLock;
  else if (mode == "handoff") m = kHandoff;
  else if (mode == "warp") m = kWarp;
  else if (mode == "hybrid") m = kHybrid;
  else throw PointFailure("unknown mode " + mode);
  const uint64_t total_threads = uint64_t(blocks) * threads;
  if ((m == kThread || m == kHybrid) && qps != total_threads)
    throw PointFailure("mode " + mode + " gives each thread its own QP: qps must equal blocks*threads");
  if (batch < 1 || batch > 256 || ((m == kLock || m == kHandoff) && batch > 16))
    throw PointFailure("batch must be 1..256 (1..16 for lock/handoff)");
  if (qps < 1 || qps > 528) throw PointFailure("qps must be 1..528");
  SessionConfig cfg = base_config(o, qps);
  cfg.hybrid = m == kHybrid;
  cfg.sq_wqebbs = 1024;
  Env& env = env_for(cfg, 8u << 20);
  const uint32_t slots = (8u << 20) / 8;
  const Context ctx = env.session->context();
  uint32_t ops = static_cast<uint32_t>(std::max<uint64_t>(1, wqes / total_threads));
  if (m == kWarp) ops = std::max<uint32_t>(1, ops);
  auto launch = [&](uint32_t n) {
    switch (m) {
      case kThread: launch_rate<kThread>(v, inl, blocks, threads, ctx, env.tg, n, batch, all, slots); break;
      case kLock: launch_rate<kLock>(v, inl, blocks, threads, ctx, env.tg, n, batch, all, slots); break;
      case kHandoff: launch_rate<kHandoff>(v, inl, blocks, threads, ctx, env.tg, n, batch, all, slots); break;
      case kWarp: launch_rate<kWarp>(v, inl, blocks, threads, ctx, env.tg, n, batch, all, slots); break;
      default: launch_rate<kHybrid>(v, inl, blocks, threads, ctx, env.tg, n, batch, all, slots); break;
    }
  };
  launch(std::max<uint32_t>(1, ops / 10));  // warm-up
  check_kernel(env, "rate warm-up");
  const std::vector<double> rates = timed_rates(env, std::max(1, std::min(o.iters, 5)), double(ops) * total_threads,
                                                "rate kernel", [&] { launch(ops); });
  // Protocol check of the run: every QP's collapsed CQE names its last WQE.
  const auto qps_now = env.session->read_qps();
  for (uint32_t i = 0; i < qps; ++i) {
    mlx5::Cqe64 cqe;
    CUDA(cudaMemcpy(&cqe, qps_now[i].cqe, sizeof cqe, cudaMemcpyDefault));
    const mlx5::CqeFields f = mlx5::decode_cqe(cqe);
    if (qps_now[i].resv_head && (f.opcode != mlx5::kCqeReq || f.wqe_counter != uint16_t(qps_now[i].resv_head - 1)))
      throw PointFailure("QP " + std::to_string(i) + ": last CQE counter " + std::to_string(f.wqe_counter) +
                         ", expected " + std::to_string(uint16_t(qps_now[i].resv_head - 1)));
  }
  Record r = Record::ok("msg_rate", "Mmsg/s", bench::compute_stats(rates));
  r.sm_clock_mhz = probe_sm_clock_mhz();
  return {r};
}

}  // namespace

// The pipeline's one_op experiment (config/experiments/one_op.yaml, Table 3): issue, put+completion
// and round trip of one 8-byte write, with the default ordering (GPU-scope fence) unless the point
// names a variant.
std::vector<Record> table3_one_op(const bench::Point& p, const bench::Options& o) {
  const std::string transport = p.params.get_string("transport", "mini-gda");
  if (transport != "mini-gda") throw PointFailure("gicomm-bench-gda measures mini-gda, not " + transport);
  if (p.params.get_int("size", 8) != 8) throw PointFailure("gicomm-bench-gda one_op measures 8-byte writes only");
  std::vector<Record> out = one_op(p, o);
  for (Record& r : rtt(p, o)) out.push_back(r);
  return out;
}

int main(int argc, char** argv) {
  bench::DriverInfo info{"gicomm-bench-gda", "mini-gda", "softnic-gpu"};
  return bench::run_driver(argc, argv, info, [](const bench::Point& p, const bench::Options& o) {
    if (o.experiment == "one_op") return table3_one_op(p, o);
    if (o.experiment == "gda_one_op") return one_op(p, o);
    if (o.experiment == "gda_rtt") return rtt(p, o);
    if (o.experiment == "gda_msg_rate") return msg_rate(p, o);
    if (o.experiment == "inline_payload") return inline_payload(p, o);
    if (o.experiment == "completion_scope") return completion_scope(p, o);
    if (o.experiment == "sm_clock") return sm_clock(p, o);
    if (o.experiment == "connection_scaling") return connection_scaling(p, o);
    throw PointFailure("gicomm-bench-gda does not know experiment " + o.experiment);
  });
}
