#include "harness/gda_rig.h"

#include <cstdio>
#include <sstream>

#include "gicomm/gda/gda.cuh"
#include "gicomm/mlx5/cqe.h"
#include "harness/engine_shape.h"
#include "harness/two_rank.h"
#if defined(GICOMM_BENCH_WITH_MLX5)
#include "gicomm/mlx5dev/devx.h"
#endif

namespace gicomm::bench {

namespace {

constexpr size_t kPage = size_t(2) << 20;

// Completes everything a QP has outstanding: one thread per QP.
__global__ void drain_kernel(gda::Context ctx) {
  const uint32_t q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q < ctx.num_qps) gda::quiet_qp(ctx, ctx.qps[q]);
}

bool same_session(const gda::SessionConfig& a, const gda::SessionConfig& b) {
  return a.engine == b.engine && a.num_qps == b.num_qps && a.sq_wqebbs == b.sq_wqebbs && a.hybrid == b.hybrid &&
         a.timeout_ms == b.timeout_ms;
}

}  // namespace

NicBuffer::NicBuffer(NicBackend backend, int device, size_t n) : bytes(n), pinned(backend == NicBackend::softnic_cpu) {
  int saved = 0;
  GICOMM_CUDA(cudaGetDevice(&saved));
  GICOMM_CUDA(cudaSetDevice(device));
  const cudaError_t e = pinned ? cudaHostAlloc(&p, n, cudaHostAllocMapped | cudaHostAllocPortable)
                               : cudaMalloc(&p, (n + kPage - 1) / kPage * kPage);
  if (e == cudaSuccess && !pinned) cudaMemset(p, 0, n);
  cudaSetDevice(saved);
  if (e != cudaSuccess) throw PointFailure(std::string("allocation: ") + cudaGetErrorString(e));
  if (pinned) std::memset(p, 0, n);
}

NicBuffer::~NicBuffer() {
  if (pinned) {
    cudaFreeHost(p);
  } else {
    cudaFree(p);
  }
}

void NicBuffer::copy_out(size_t offset, void* out, size_t n) const {
  GICOMM_CUDA(cudaMemcpy(out, static_cast<const uint8_t*>(p) + offset, n, cudaMemcpyDefault));
}

gda::SessionConfig gda_config(Run& run, uint32_t qps) {
  gda::SessionConfig c;
  const NicBackend backend = run.nic();
  c.engine = name_of(backend);
  c.num_qps = qps;
  c.timeout_ms = static_cast<uint32_t>(run.options.timeout_ms);
  if (backend == NicBackend::mlx5) {
#if defined(GICOMM_BENCH_WITH_MLX5)
    // A real ConnectX (gda::Session's mlx5 placement: loopback RC QPs, queues in GPU memory).
    // Checked before any CUDA call, so a host without one exits 3 with one line.
    std::string reason;
    if (!gicomm::mlx5dev::DevxDevice::open("", &reason)) throw HardwareMissing("nic backend mlx5: " + reason);
    if (gpu_count() == 0) throw HardwareMissing("no CUDA GPU visible");
    run.rdma_provider = gicomm::mlx5dev::rdma_provider();  // "emulated" under native/emu
    require_gda_topology(run);  // to the peer rank's QPs, or each QP to itself (--topology loopback)
    c.mlx5_device = run.options.nic_device;
    c.mlx5_gid_index = static_cast<uint8_t>(run.options.gid_index);
    return c;
#else
    throw HardwareMissing("nic backend mlx5: this build has no rdma-core");
#endif
  }
  if (backend != NicBackend::softnic_gpu && backend != NicBackend::softnic_cpu &&
      backend != NicBackend::softnic_gpu_same)
    throw PointFailure(std::string("mini-gda runs on softnic-gpu, softnic-gpu-same, softnic-cpu or mlx5, not ") +
                       name_of(backend));
  const int ndev = gpu_count();
  if (ndev == 0) throw HardwareMissing("no CUDA GPU visible");
  if (backend == NicBackend::softnic_gpu && ndev < 2)
    throw HardwareMissing("nic backend softnic-gpu: the engine runs on a peer GPU; " + std::to_string(ndev) +
                          " GPU visible (softnic-gpu-same runs it on the producer's own)");
  c.cpu_threads = kGdaCpuEngineThreads;
  if (backend == NicBackend::softnic_gpu_same) {
    // The engine on reserved SMs of the producer's own GPU, as the engine ceiling measures it. A
    // persistent kernel shares the GPU: GdaRig waits on streams, never on the device.
    c.engine = name_of(NicBackend::softnic_gpu);
    c.engine_device = c.producer_device;
    c.engine_blocks = kSameGpuEngineBlocks;
  }
  // The doorbell word the producer stores to: in the engine GPU's memory (across NVLink, as an
  // MMIO store crosses PCIe), or in pinned host memory for host threads.
  run.doorbell_target = backend == NicBackend::softnic_cpu ? "pinned-host" : "gpu-memory";
  return c;
}

GdaRig::GdaRig(const gda::SessionConfig& cfg, const GdaMemory& mem) : cfg_(cfg), mem_(mem) {
  const NicBackend backend = *nic_backend_named(cfg.engine);
  Run* run = current_run();
  // Two ranks: the QPs connect to the peer's, and the writes land in the peer's buffer.
  std::shared_ptr<PeerBuffer> peer_dst;
  if (backend == NicBackend::mlx5 && two_ranks() && run) {
    peer_dst = std::make_shared<PeerBuffer>();
    cfg_.connect_peer = gda_peer_connector(*run, mem.dst_bytes, peer_dst);
  }
  GICOMM_CUDA(cudaSetDevice(cfg.producer_device));
  session_ = std::make_unique<gda::Session>(cfg_);
  dst_ = std::make_unique<NicBuffer>(backend, mem.dst_device, mem.dst_bytes);
  if (mem.src_bytes) src_ = std::make_unique<NicBuffer>(backend, mem.src_device, mem.src_bytes);
  target_.dst = reinterpret_cast<uint64_t>(dst_->p);
  dst_rkey_ = session_->register_mr(dst_->p, mem.dst_bytes, mem.dst_access).rkey;
  target_.rkey = dst_rkey_;
  if (peer_dst) {
    target_.dst = peer_dst->addr;
    target_.rkey = peer_dst->rkey;
  }
  tally_->session = session_.get();
  if (backend == NicBackend::mlx5 && run) {
    run->doorbell_target = session_->doorbell_target();  // uar-iomem, or pinned-host where IoMemory is refused
    attach_link(*run);
  }
  if (src_) {
    target_.src = reinterpret_cast<uint64_t>(src_->p);
    target_.lkey = session_->register_mr(src_->p, mem.src_bytes, mem.src_access).lkey;
  }
  session_->start_engine();
  if (same_gpu_) defer_device_frees(true);
  GICOMM_CUDA(cudaSetDevice(cfg.producer_device));
}

GdaRig::~GdaRig() {
  // The point's link may count the WQEs after the rig is gone (a rig local to an experiment);
  // only the mlx5 placement has one (a copy here would wait for a same-GPU engine kernel).
  if (cfg_.engine == "mlx5") {
    try {
      tally_->last = posted_wqes(*session_);
    } catch (const std::exception&) {
    }
  }
  tally_->session = nullptr;
  if (!same_gpu_) return;
  // The engine shares the GPU: stop it before anything is freed (a free would wait for it).
  try {
    session_->stop_engine();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mini-gda: %s\n", e.what());
  }
  defer_device_frees(false);
  release_deferred_frees();
}

uint64_t GdaRig::posted_wqes(const gda::Session& s) {
  uint64_t n = 0;
  for (const auto& q : s.read_qps()) n += q.resv_head;  // WQEBBs: one per write WQE of mini-gda
  return n;
}

void GdaRig::attach_link(Run& run) {
  auto tally = tally_;
  attach_gda_link(run, [tally] { return tally->session ? posted_wqes(*tally->session) : tally->last; });
}

GdaRig& GdaRig::reuse(const gda::SessionConfig& cfg, const GdaMemory& mem) {
  static std::unique_ptr<GdaRig> rig;
  // Between two ranks the peer's QPs live for one point: a new session each point.
  if (rig && !rig->broken_ && same_session(rig->cfg_, cfg) && rig->mem_.dst_bytes >= mem.dst_bytes &&
      rig->mem_.src_bytes >= mem.src_bytes && !(cfg.engine == "mlx5" && two_ranks())) {
    if (cfg.engine == "mlx5" && current_run()) {
      current_run()->doorbell_target = rig->session().doorbell_target();
      rig->attach_link(*current_run());
    }
    return *rig;
  }
  rig.reset();
  rig = std::make_unique<GdaRig>(cfg, mem);
  return *rig;
}

void GdaRig::check(const char* what) {
  // With the engine on this GPU the producers' stream (the legacy default stream, which does not
  // wait for the engine's non-blocking one), else the device.
  const cudaError_t e = same_gpu_ ? cudaStreamSynchronize(cudaStreamLegacy) : cudaDeviceSynchronize();
  const std::string err = session_->take_error();
  if (e != cudaSuccess || !err.empty()) {
    broken_ = true;  // a failed QP is in error state: start over for the next point
    throw PointFailure(std::string(what) + ": " + (e != cudaSuccess ? cudaGetErrorString(e) : err));
  }
}

void GdaRig::check_last_cqes(const char* what, uint32_t wqebbs_per_wqe) {
  const auto qps = session_->read_qps();
  for (uint32_t i = 0; i < qps.size(); ++i) {
    if (qps[i].resv_head == 0) continue;
    mlx5::Cqe64 cqe;
    GICOMM_CUDA(cudaMemcpy(&cqe, qps[i].cqe, sizeof cqe, cudaMemcpyDefault));
    const mlx5::CqeFields f = mlx5::decode_cqe(cqe);
    const uint16_t want = static_cast<uint16_t>(qps[i].resv_head - wqebbs_per_wqe);
    if (f.opcode != mlx5::kCqeReq || f.wqe_counter != want)
      throw PointFailure(std::string(what) + ": QP " + std::to_string(i) + " last CQE counter " +
                         std::to_string(f.wqe_counter) + ", expected " + std::to_string(want));
  }
}

void GdaRig::check_heads_meet(const char* what) {
  const auto qps = session_->read_qps();
  for (uint32_t i = 0; i < qps.size(); ++i)
    if (qps[i].cons_head != qps[i].resv_head)
      throw PointFailure(std::string(what) + ": QP " + std::to_string(i) + " complete to WQEBB " +
                         std::to_string(qps[i].cons_head) + ", posted " + std::to_string(qps[i].resv_head));
}

void GdaRig::drain(cudaStream_t s, double limit_s) {
  const gda::Context ctx = session_->context();
  drain_kernel<<<(ctx.num_qps + 127) / 128, 128, 0, s>>>(ctx);
  GICOMM_CUDA(cudaGetLastError());
  wait_stream(s, limit_s, 50);
}

void GdaRig::verify(uint64_t wqes, std::optional<uint64_t> bytes, const std::string& detail) {
  session_->stop_engine();
  const softnic::Counters k = session_->engine_counters();
  if (k.wqes != wqes || k.errors || k.flushes || (bytes && k.bytes != *bytes)) {
    std::ostringstream m;
    m << "mini-gda: engine executed " << k.wqes << " WQEs";
    if (bytes) m << ", " << k.bytes << " bytes";
    m << " (" << k.errors << " errors, " << k.flushes << " flushed), expected " << wqes << " WQEs";
    if (bytes) m << ", " << *bytes << " bytes";
    m << detail;
    throw PointFailure(m.str());
  }
}

}  // namespace gicomm::bench
