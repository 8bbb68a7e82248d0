#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "gicomm/gda/session.h"
#include "gicomm/mlx5/doorbell.h"
#include "gicomm/softnic/gpu_engine.h"

namespace gicomm::gda {

namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("mini-gda: ") + what + ": " + cudaGetErrorString(e));
}
}  // namespace

void enable_peer_access(int a, int b) {
  if (a == b) return;
  int can_ab = 0, can_ba = 0;
  check(cudaDeviceCanAccessPeer(&can_ab, a, b), "cudaDeviceCanAccessPeer");
  check(cudaDeviceCanAccessPeer(&can_ba, b, a), "cudaDeviceCanAccessPeer");
  if (!can_ab || !can_ba)
    throw std::runtime_error("mini-gda: GPUs " + std::to_string(a) + " and " + std::to_string(b) +
                             " cannot access each other's memory (no P2P)");
  int saved = 0;
  check(cudaGetDevice(&saved), "cudaGetDevice");
  for (auto [from, to] : {std::pair<int, int>{a, b}, std::pair<int, int>{b, a}}) {
    check(cudaSetDevice(from), "cudaSetDevice");
    const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();
    } else {
      check(e, "cudaDeviceEnablePeerAccess");
    }
  }
  cudaSetDevice(saved);
}

Session::Session(const SessionConfig& cfg) : cfg_(cfg), nic_(std::make_unique<softnic::SoftNic>()) {
  const bool gpu_engine = cfg.engine == "softnic-gpu";
  if (!gpu_engine && cfg.engine != "softnic-cpu")
    throw std::invalid_argument("mini-gda: engine must be softnic-gpu or softnic-cpu, not " + cfg.engine);
  int ndev = 0;
  check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
  if (cfg.producer_device >= ndev || (gpu_engine && cfg.engine_device >= ndev))
    throw std::runtime_error("mini-gda: needs GPU " + std::to_string(std::max(cfg.producer_device, cfg.engine_device)) +
                             ", found " + std::to_string(ndev));
  if (gpu_engine) enable_peer_access(cfg.producer_device, cfg.engine_device);
  softnic::QueueConfig qc;
  qc.sq_wqebbs = cfg.sq_wqebbs;
  qc.cq_entries = 1;
  qc.collapsed_cq = true;
  if (gpu_engine) {
    qc.queues = softnic::MemoryPlace::gpu(cfg.producer_device);
    qc.doorbells = cfg.hybrid ? softnic::MemoryPlace::pinned() : softnic::MemoryPlace::gpu(cfg.engine_device);
  } else {
    qc.queues = softnic::MemoryPlace::pinned();
    qc.doorbells = softnic::MemoryPlace::pinned();
  }
  qc.dbrec_pinned = cfg.hybrid;
  sq_place_ = qc.queues;
  db_place_ = qc.doorbells;
  floor_sq_ = softnic::allocate(sq_place_, 64 * mlx5::kSendWqeBB);
  floor_db_ = softnic::allocate(db_place_, 64);
  softnic::fill_bytes(sq_place_, floor_sq_, 0, 64 * mlx5::kSendWqeBB);
  softnic::fill_bytes(db_place_, floor_db_, 0, 64);
  std::vector<DeviceQp> host(cfg.num_qps);
  std::vector<mlx5::SqDesc> sqs;
  for (uint32_t i = 0; i < cfg.num_qps; ++i) {
    const uint32_t qp = nic_->create_qp(qc);
    DeviceQp d{};
    d.sq = nic_->sq(qp);
    d.cqe = nic_->cq(qp).buf;
    d.index = qp;
    host[i] = d;
    sqs.push_back(d.sq);
  }
  int saved = 0;
  check(cudaGetDevice(&saved), "cudaGetDevice");
  check(cudaSetDevice(cfg.producer_device), "cudaSetDevice(producer)");
  check(cudaMalloc(&d_qps_, sizeof(DeviceQp) * host.size()), "cudaMalloc(qps)");
  check(cudaMemcpy(d_qps_, host.data(), sizeof(DeviceQp) * host.size(), cudaMemcpyHostToDevice), "copy qps");
  check(cudaMalloc(&d_err_, sizeof(ErrorReport)), "cudaMalloc(err)");
  check(cudaMemset(d_err_, 0, sizeof(ErrorReport)), "cudaMemset(err)");
  cudaSetDevice(saved);
  ctx_.qps = d_qps_;
  ctx_.num_qps = cfg.num_qps;
  ctx_.signal_every = cfg.signal_every;
  ctx_.timeout_ns = static_cast<unsigned long long>(cfg.timeout_ms) * 1000000ull;
  ctx_.err = d_err_;
  if (gpu_engine) {
    softnic::GpuEngineConfig ec;
    ec.device = cfg.engine_device;
    ec.blocks = cfg.engine_blocks;
    ec.warps_per_block = cfg.engine_warps_per_block;
    gpu_ = std::make_unique<softnic::GpuEngine>(*nic_, ec);
  } else {
    cpu_ = std::make_unique<softnic::CpuEngine>(*nic_, cfg.cpu_threads);
  }
  if (cfg.hybrid) ringer_ = std::make_unique<HybridRinger>(sqs);
}

Session::~Session() {
  try {
    stop_engine();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mini-gda: %s\n", e.what());
  }
  cudaFree(d_qps_);
  cudaFree(d_err_);
  softnic::release(sq_place_, floor_sq_);
  softnic::release(db_place_, floor_db_);
}

softnic::MemoryRegionHandle Session::register_mr(void* p, uint64_t bytes, uint32_t access) {
  return nic_->register_mr(p, bytes, access);
}

void Session::start_engine() {
  if (ringer_) ringer_->start();
  if (gpu_) gpu_->start();
  if (cpu_) cpu_->start();
}

void Session::stop_engine() {
  if (ringer_) ringer_->stop();
  if (cpu_) cpu_->stop();
  if (gpu_ && gpu_->running()) gpu_->stop(cfg_.timeout_ms + 3000);
}

softnic::Counters Session::engine_counters() const { return gpu_ ? gpu_->counters() : cpu_->counters(); }

std::string Session::take_error() {
  ErrorReport r{};
  check(cudaMemcpy(&r, d_err_, sizeof r, cudaMemcpyDeviceToHost), "read error report");
  if (r.code == 0) return "";
  check(cudaMemset(d_err_, 0, sizeof r), "clear error report");
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s on QP %u (qpn 0x%x): expected %llu, last seen %llu, syndrome 0x%x",
                wait_site_name(r.code), r.qp, r.qpn, r.expected, r.last_seen, r.syndrome);
  return buf;
}

std::vector<DeviceQp> Session::read_qps() const {
  std::vector<DeviceQp> v(cfg_.num_qps);
  check(cudaMemcpy(v.data(), d_qps_, sizeof(DeviceQp) * v.size(), cudaMemcpyDeviceToHost), "read qps");
  return v;
}

}  // namespace gicomm::gda
