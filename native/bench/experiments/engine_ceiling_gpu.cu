// engine_ceiling on the gpu engine: producer GPU 0 pre-writes every QP's window, then one thread
// per QP rings once and waits for its last CQE; rate = WQEs / (last completion - first doorbell).
// --warmup untimed rounds, then --iters timed ones.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "gicomm/common/clock.cuh"
#include "gicomm/gda/gda.cuh"
#include "gicomm/gda/session.h"
#include "gicomm/order.cuh"
#include "harness/cuda.h"
#include "harness/harness.h"

using namespace gicomm;
using namespace gicomm::gda;

namespace {

__global__ void prefill_kernel(Context ctx, uint32_t depth, uint64_t dst, uint32_t rkey, uint64_t src, uint32_t lkey,
                               bool inl) {
  DeviceQp& qp = ctx.qps[blockIdx.x];
  const unsigned long long base = qp.resv_head;
  for (uint32_t i = threadIdx.x; i < depth; i += blockDim.x) {
    mlx5::WqeHeader h;
    h.pi = static_cast<uint16_t>(base + i);
    h.qpn = qp.sq.qpn;
    h.signaled = true;
    mlx5::WqeImage img;
    const uint64_t raddr = dst + 8 * (uint64_t(blockIdx.x) * depth + i);
    const uint32_t ds = inl ? mlx5::build_rdma_write_inline_u64(img, h, raddr, rkey, i)
                            : mlx5::build_rdma_write(img, h, raddr, rkey, src + 8 * i, lkey, 8);
    mlx5::store_wqe(qp.sq.buf, qp.sq.wqe_cnt, static_cast<uint32_t>(base + i), img, ds);
  }
  __threadfence_system();
}

__global__ void ring_wait_kernel(Context ctx, uint32_t depth, unsigned long long* t) {
  DeviceQp& qp = ctx.qps[blockIdx.x];
  const unsigned long long base = qp.resv_head;
  const uint64_t db = mlx5::doorbell_value(static_cast<uint16_t>(base + depth - 1), qp.sq.qpn, mlx5::kOpcodeRdmaWrite, 3);
  t[2 * blockIdx.x] = globaltimer();
  ring<order::GpuFence>(qp, base + depth, db);
  unsigned long long cons = base;
  wait_complete<false>(ctx, qp, &cons, base + depth, WaitSite::cq);
  t[2 * blockIdx.x + 1] = globaltimer();
  qp.resv_head = base + depth;
  qp.cons_head = cons;
}

}  // namespace

namespace gicomm::bench {

std::vector<Record> gpu_engine_ceiling(Run& run) {
  const int ndev = gpu_count();
  if (ndev < 1) throw HardwareMissing("no CUDA GPU visible");
  const uint32_t qps = run.derived<uint32_t>("qps", 16);
  const uint32_t depth = run.derived<uint32_t>("depth", 4096);
  const bool inl = run.param<std::string>("payload") == "inline";
  const int warmup = run.warmup(), rounds = run.warmup() + run.iters();
  const int engine_warps = run.param<int>("engine_warps_per_block");
  if (qps > 528) throw PointFailure("bad parameter: the gpu engine serves at most 528 QPs, not " + std::to_string(qps));
  uint32_t ring_size = 1;
  while (ring_size < depth) ring_size <<= 1;
  SessionConfig cfg;
  cfg.engine = "softnic-gpu";
  cfg.num_qps = qps;
  cfg.sq_wqebbs = ring_size;
  cfg.timeout_ms = static_cast<uint32_t>(run.options.timeout_ms);
  cfg.engine_warps_per_block = engine_warps;
  if (ndev < 2) {
    cfg.engine_device = 0;
    cfg.engine_blocks = 32;
  }
  cudaSetDevice(0);
  Session s(cfg);
  DeviceBuffer<uint64_t> dst(size_t(qps) * depth), src(depth);
  DeviceBuffer<unsigned long long> d_t(2 * size_t(qps));
  GICOMM_CUDA(cudaMemset(src.p, 0x5a, size_t(depth) * 8));
  const auto dmr = s.register_mr(dst.p, size_t(qps) * depth * 8, softnic::kAccessRemoteWrite);
  const auto smr = s.register_mr(src.p, size_t(depth) * 8, 0);
  s.start_engine();
  std::vector<double> rates;
  std::vector<unsigned long long> t(2 * qps);
  std::string error;
  for (int r = 0; r < rounds && error.empty(); ++r) {
    prefill_kernel<<<qps, 256>>>(s.context(), depth, dmr.addr, dmr.rkey, smr.addr, smr.lkey, inl);
    if (cudaDeviceSynchronize() != cudaSuccess) error = "prefill kernel failed";
    ring_wait_kernel<<<qps, 1>>>(s.context(), depth, d_t.p);
    if (cudaDeviceSynchronize() != cudaSuccess) error = "ring kernel failed";
    const std::string e = s.take_error();
    if (!e.empty()) error = e;
    cudaMemcpy(t.data(), d_t.p, sizeof(unsigned long long) * 2 * qps, cudaMemcpyDeviceToHost);
    unsigned long long first = ~0ull, last = 0;
    for (uint32_t q = 0; q < qps; ++q) {
      first = std::min(first, t[2 * q]);
      last = std::max(last, t[2 * q + 1]);
    }
    if (r >= warmup && last > first) rates.push_back(double(qps) * depth / (double(last - first) * 1e-9) / 1e6);
  }
  const double mhz = measure_sm_clock_mhz(200000);
  s.stop_engine();
  const softnic::Counters c = s.engine_counters();
  if (!error.empty()) throw PointFailure(error);
  if (c.errors || c.wqes != uint64_t(qps) * depth * rounds)
    throw PointFailure("gpu engine executed " + std::to_string(c.wqes) + " WQEs with " + std::to_string(c.errors) +
                       " errors, expected " + std::to_string(uint64_t(qps) * depth * rounds));
  Record rec = Record::ok("engine_wqe_rate", "Mmsg/s", compute_stats(rates));
  rec.nic_backend = "softnic-gpu";
  rec.sm_clock_mhz = mhz;
  return {rec};
}

}  // namespace gicomm::bench
