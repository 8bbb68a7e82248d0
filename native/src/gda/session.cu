#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "gicomm/gda/session.h"
#include "gicomm/mlx5/doorbell.h"
#include "gicomm/softnic/gpu_engine.h"
#if defined(GICOMM_GDA_WITH_MLX5)
#include "gicomm/mlx5dev/devx.h"
#endif

namespace gicomm::gda {

namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("mini-gda: ") + what + ": " + cudaGetErrorString(e));
}
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

#if defined(GICOMM_GDA_WITH_MLX5)
// The DEVX objects of the mlx5 placement. Per QP, in one GPU buffer (a dmabuf umem): the send queue
// (sq_wqebbs x 64 B, page-aligned), then a 4 KiB control page with the collapsed CQ's one CQE at
// 0, the CQ doorbell record at 2048 and the QP doorbell record at 2112.
struct Mlx5Queues {
  static constexpr size_t kCtrlPage = 4096, kCqDbr = 2048, kQpDbr = 2112;
  std::unique_ptr<mlx5dev::DevxDevice> dev;
  uint8_t* buf = nullptr;
  mlx5dev::Umem umem;
  std::vector<mlx5dev::Cq> cqs;
  std::vector<mlx5dev::Qp> qps;
  ~Mlx5Queues() {
    for (auto& q : qps) mlx5dev::DevxDevice::destroy(&q);  // QPs before their CQs, both before the umem
    for (auto& c : cqs) mlx5dev::DevxDevice::destroy(&c);
    mlx5dev::DevxDevice::release(&umem);
    if (buf) cudaFree(buf);
  }
};
#else
struct Mlx5Queues {};
#endif

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
  if (cfg.engine == "mlx5") {
    init_mlx5();
    return;
  }
  const bool gpu_engine = cfg.engine == "softnic-gpu";
  if (!gpu_engine && cfg.engine != "softnic-cpu")
    throw std::invalid_argument("mini-gda: engine must be softnic-gpu, softnic-cpu or mlx5, not " + cfg.engine);
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
  upload_qps(host);
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

// The device-side QP array and the Context (both placements).
void Session::upload_qps(const std::vector<DeviceQp>& host) {
  int saved = 0;
  check(cudaGetDevice(&saved), "cudaGetDevice");
  check(cudaSetDevice(cfg_.producer_device), "cudaSetDevice(producer)");
  check(cudaMalloc(&d_qps_, sizeof(DeviceQp) * host.size()), "cudaMalloc(qps)");
  check(cudaMemcpy(d_qps_, host.data(), sizeof(DeviceQp) * host.size(), cudaMemcpyHostToDevice), "copy qps");
  check(cudaMalloc(&d_err_, sizeof(ErrorReport)), "cudaMalloc(err)");
  check(cudaMemset(d_err_, 0, sizeof(ErrorReport)), "cudaMemset(err)");
  cudaSetDevice(saved);
  ctx_.qps = d_qps_;
  ctx_.num_qps = cfg_.num_qps;
  ctx_.signal_every = cfg_.signal_every;
  ctx_.timeout_ns = static_cast<unsigned long long>(cfg_.timeout_ms) * 1000000ull;
  ctx_.err = d_err_;
}

void Session::init_mlx5() {
#if defined(GICOMM_GDA_WITH_MLX5)
  auto fail = [](const std::string& why) { throw std::runtime_error("mini-gda mlx5: " + why); };
  const uint32_t n = cfg_.num_qps;
  if (cfg_.hybrid) fail("hybrid mode needs the doorbell record in host memory; the mlx5 placement keeps it in GPU memory");
  if (cfg_.sq_wqebbs < 64 || (cfg_.sq_wqebbs & (cfg_.sq_wqebbs - 1)) != 0)
    fail("sq_wqebbs must be a power of two of at least 64 (a 4 KiB send queue), not " + std::to_string(cfg_.sq_wqebbs));
  if (n == 0) fail("num_qps must be at least 1");
  int ndev = 0;
  check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
  if (cfg_.producer_device >= ndev)
    fail("needs GPU " + std::to_string(cfg_.producer_device) + ", found " + std::to_string(ndev));
  auto q = std::make_unique<Mlx5Queues>();
  std::string reason;
  q->dev = mlx5dev::DevxDevice::open(cfg_.mlx5_device, &reason);
  if (!q->dev) fail(reason);
  uint64_t* gpu_doorbell = nullptr;
  mlx5dev::DoorbellTarget target{};
  if (!mlx5dev::parse_doorbell_target(cfg_.mlx5_doorbell, &target))
    fail("mlx5_doorbell must be auto, uar-iomem or pinned-host, not " + cfg_.mlx5_doorbell);
  if (!q->dev->alloc_uar(&reason) || !q->dev->map_uar_to_gpu(cfg_.producer_device, target, &gpu_doorbell, &reason))
    fail(reason);
  const size_t sq_bytes = size_t(cfg_.sq_wqebbs) * mlx5::kSendWqeBB;
  const size_t per_qp = sq_bytes + Mlx5Queues::kCtrlPage;
  const size_t bytes = round_up(per_qp * n, size_t(2) << 20);
  check(cudaSetDevice(cfg_.producer_device), "cudaSetDevice(producer)");
  check(cudaMalloc(&q->buf, bytes), "cudaMalloc(mlx5 queues)");
  check(cudaMemset(q->buf, 0, bytes), "cudaMemset(mlx5 queues)");
  mlx5::Cqe64 fresh;
  mlx5::init_cqe(fresh);  // owner/opcode "invalid" until the NIC writes it
  for (uint32_t i = 0; i < n; ++i)
    check(cudaMemcpy(q->buf + size_t(i) * per_qp + sq_bytes, &fresh, sizeof fresh, cudaMemcpyHostToDevice), "init CQE");
  if (!q->dev->register_umem(q->buf, bytes, &q->umem, &reason)) fail(reason);
  uint32_t log_sq = 0;
  while ((1u << log_sq) < cfg_.sq_wqebbs) ++log_sq;
  mlx5dev::ConnectParams params;
  params.gid_index = cfg_.mlx5_gid_index;
  std::vector<DeviceQp> host(n);
  std::vector<PeerQp> mine(n);
  q->cqs.reserve(n);
  q->qps.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    const size_t sq_off = size_t(i) * per_qp, ctrl = sq_off + sq_bytes;
    const std::string which = "QP " + std::to_string(i) + " of " + std::to_string(n) + ": ";
    mlx5dev::Cq cq;
    if (!q->dev->create_cq(q->umem, ctrl, ctrl + Mlx5Queues::kCqDbr, &cq, &reason)) fail(which + reason);
    q->cqs.push_back(cq);
    mlx5dev::Qp qp;
    if (!q->dev->create_rc_qp(q->umem, sq_off, log_sq, q->umem, ctrl + Mlx5Queues::kQpDbr, cq.cqn, &qp, &reason))
      fail(which + reason);
    q->qps.push_back(qp);
    mlx5dev::QpAddress self;
    if (!q->dev->local_address(qp, params, &self, &reason)) fail(which + reason);
    mine[i].qpn = self.qpn;
    mine[i].lid = self.lid;
    std::copy(std::begin(self.gid), std::end(self.gid), mine[i].gid);
    mine[i].roce = self.roce;
    if (!cfg_.connect_peer && !q->dev->connect_rc_qp(qp, self, params, &reason)) fail(which + reason);  // loopback
    DeviceQp d{};
    d.sq.buf = q->buf + sq_off;
    d.sq.wqe_cnt = cfg_.sq_wqebbs;
    d.sq.qpn = qp.qpn;
    d.sq.dbrec = reinterpret_cast<uint32_t*>(q->buf + ctrl + Mlx5Queues::kQpDbr);
    d.sq.doorbell = gpu_doorbell;
    d.cqe = reinterpret_cast<mlx5::Cqe64*>(q->buf + ctrl);
    d.index = i;
    host[i] = d;
  }
  if (cfg_.connect_peer) {  // two ranks: each QP to the peer's QP of the same index
    std::vector<PeerQp> peers;
    uint32_t mtu = 4096;
    if (!cfg_.connect_peer(mine, &peers, &mtu, &reason)) fail("connecting to the peer: " + reason);
    if (peers.size() < n) fail("the peer offers " + std::to_string(peers.size()) + " QPs, " + std::to_string(n) + " needed");
    params.mtu = 1;  // PRM encoding: 256 B << (code - 1)
    while (params.mtu < 5 && (256u << params.mtu) <= mtu) ++params.mtu;
    for (uint32_t i = 0; i < n; ++i) {
      mlx5dev::QpAddress remote;
      remote.qpn = peers[i].qpn;
      remote.lid = peers[i].lid;
      std::copy(std::begin(peers[i].gid), std::end(peers[i].gid), remote.gid);
      remote.roce = peers[i].roce;
      if (!q->dev->connect_rc_qp(q->qps[i], remote, params, &reason))
        fail("QP " + std::to_string(i) + " to the peer's QP " + std::to_string(remote.qpn) + ": " + reason);
    }
  }
  // The benchmark floor stores to GPU memory: a store to the UAR would ring a real doorbell.
  sq_place_ = db_place_ = softnic::MemoryPlace::gpu(cfg_.producer_device);
  floor_sq_ = softnic::allocate(sq_place_, 64 * mlx5::kSendWqeBB);
  floor_db_ = softnic::allocate(db_place_, 64);
  softnic::fill_bytes(sq_place_, floor_sq_, 0, 64 * mlx5::kSendWqeBB);
  softnic::fill_bytes(db_place_, floor_db_, 0, 64);
  mlx5_ = std::move(q);
  upload_qps(host);
#else
  throw std::runtime_error("mini-gda: engine mlx5: this build has no rdma-core (mlx5dv.h), so no DEVX backend");
#endif
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
  mlx5_.reset();  // QPs, CQs and the umem before the device (MRs, UAR, PD) closes
}

softnic::MemoryRegionHandle Session::register_mr(void* p, uint64_t bytes, uint32_t access) {
#if defined(GICOMM_GDA_WITH_MLX5)
  if (mlx5_) {
    // GPU memory through dmabuf (whole pages: the caller allocates them), else by address.
    std::string reason;
    uint32_t lkey = 0, rkey = 0;
    if (!mlx5_->dev->register_mr(p, bytes, &lkey, &rkey, &reason))
      throw std::runtime_error("mini-gda mlx5: " + reason);
    (void)access;  // registered with local/remote read/write/atomic access
    return softnic::MemoryRegionHandle{lkey, rkey, reinterpret_cast<uint64_t>(p), bytes};
  }
#endif
  return nic_->register_mr(p, bytes, access);
}

void Session::start_engine() {
  if (ringer_) ringer_->start();
  if (gpu_) {
    // The engine judges "on the producer's GPU" by the device current at start().
    check(cudaSetDevice(cfg_.producer_device), "cudaSetDevice(producer)");
    gpu_->start();
  }
  if (cpu_) cpu_->start();
}

void Session::stop_engine() {
  if (ringer_) ringer_->stop();
  if (cpu_) cpu_->stop();
  if (gpu_ && gpu_->running()) gpu_->stop(cfg_.timeout_ms + 3000);
}

std::unique_ptr<softnic::EngineDeadline> Session::engine_deadline(int timeout_ms) {
  if (!gpu_ || !gpu_->running() || !gpu_->same_gpu()) return nullptr;
  return std::make_unique<softnic::EngineDeadline>(*gpu_, timeout_ms);
}

std::string Session::doorbell_target() const {
#if defined(GICOMM_GDA_WITH_MLX5)
  if (mlx5_) return mlx5_->dev->doorbell_target();
#endif
  return db_place_.kind == softnic::MemoryPlace::Kind::device ? "gpu-memory" : "pinned-host";
}

softnic::Counters Session::engine_counters() const {
  return gpu_ ? gpu_->counters() : cpu_ ? cpu_->counters() : softnic::Counters{};
}

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
