// The transport factory's mini-gda side: a gda::Session for a point's NIC backend, the memory its
// kernels write to and read from registered with it, and what every mini-gda experiment does
// around a kernel (check it, drain every QP, verify the engine executed exactly what was posted).
// The mini-proxy side is proxy_rig.h; the factory's seams for two ranks and an emulated rdma-core
// are topology.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gicomm/common/vocabulary.h"
#include "gicomm/gda/session.h"
#include "harness/cuda.h"
#include "harness/runner.h"

namespace gicomm::bench {

// Memory the point's engine reaches: pinned (mapped) host memory for softnic-cpu, whose host
// threads cannot touch GPU memory; GPU memory of `device` otherwise, in whole 2 MiB pages so the
// mlx5 placement can export it as a dmabuf. Zeroed.
struct NicBuffer {
  NicBuffer(NicBackend backend, int device, size_t bytes);
  ~NicBuffer();
  NicBuffer(const NicBuffer&) = delete;
  NicBuffer& operator=(const NicBuffer&) = delete;
  void copy_out(size_t offset, void* dst, size_t n) const;  // any placement
  void* p = nullptr;
  size_t bytes = 0;
  bool pinned = false;
};

// The session of a point: the engine of its NIC backend (softnic-gpu: a kernel on the peer GPU;
// softnic-gpu-same: a kernel on reserved SMs of the producer's GPU; softnic-cpu: host threads;
// mlx5: a ConnectX through DEVX), `qps` queues, --timeout-ms. Checks
// the host first and throws HardwareMissing naming what is missing (no GPU; one GPU where
// softnic-gpu runs its engine on the peer; no mlx5 device or a build without rdma-core).
gda::SessionConfig gda_config(Run& run, uint32_t qps);

// The registered memory a mini-gda kernel takes (by value).
struct GdaTarget {
  uint64_t dst;  // remote buffer (flags / slots)
  uint32_t rkey;
  uint64_t src;  // local source for pointer payloads (and the bytes of inline payloads > 8 B)
  uint32_t lkey;
};

struct GdaMemory {
  size_t dst_bytes = 0;
  int dst_device = 0;  // GPU of the destination (softnic-gpu: the producer's, or the engine's)
  uint32_t dst_access = softnic::kAccessRemoteWrite;
  size_t src_bytes = 0;  // 0: none
  int src_device = 0;
  uint32_t src_access = 0;
};

class GdaRig {
 public:
  // Creates the session, allocates and registers the memory, starts the engine; the producer's
  // GPU is current afterwards.
  GdaRig(const gda::SessionConfig& cfg, const GdaMemory& mem);
  ~GdaRig();
  // The rig of the previous point when this point asks for the same session and no more memory
  // (creating a session costs seconds), else a new one in its place.
  static GdaRig& reuse(const gda::SessionConfig& cfg, const GdaMemory& mem);

  gda::Session& session() { return *session_; }
  gda::Context context() const { return session_->context(); }
  const GdaTarget& target() const { return target_; }
  NicBuffer& dst() { return *dst_; }
  // This rank's own destination and its rkey: between two ranks target() is the peer's buffer, and
  // this one is where the peer's answers land (a round trip).
  uint32_t dst_rkey() const { return dst_rkey_; }
  NicBuffer& src() { return *src_; }

  // Synchronizes the device; a kernel error or a wait failure a kernel reported fails the point
  // (a QP in error state is not reused: the next point starts a new session).
  void check(const char* what);
  // Every QP that posted: its collapsed CQE is a completion naming its last WQE (whose first
  // WQEBB is `wqebbs_per_wqe` before the producer index); fails the point naming the QP.
  void check_last_cqes(const char* what, uint32_t wqebbs_per_wqe = 1);
  // Every QP's quiet reached its producer index.
  void check_heads_meet(const char* what);
  // Completes what is outstanding on every QP (one thread per QP) on `s`, bounded.
  void drain(cudaStream_t s, double limit_s);
  // Stops the engine and checks it executed `wqes` WQEs (and moved `bytes`) with no error CQE or
  // flush; `detail` is added to the failure message.
  void verify(uint64_t wqes, std::optional<uint64_t> bytes = std::nullopt, const std::string& detail = "");

 private:
  // The WQEs the session's QPs posted (their reserved WQEBBs), for the point's path proof; kept
  // when the rig goes before the point ends.
  struct Tally {
    const gda::Session* session = nullptr;
    uint64_t last = 0;
  };
  static uint64_t posted_wqes(const gda::Session& s);
  void attach_link(Run& run);
  std::shared_ptr<Tally> tally_ = std::make_shared<Tally>();
  gda::SessionConfig cfg_;
  GdaMemory mem_;
  std::unique_ptr<gda::Session> session_;
  std::unique_ptr<NicBuffer> dst_, src_;
  GdaTarget target_{};
  uint32_t dst_rkey_ = 0;
  bool broken_ = false;
  // The gpu engine on the producer's own GPU (softnic-gpu-same).
  bool same_gpu_ = cfg_.engine == "softnic-gpu" && cfg_.engine_device == cfg_.producer_device;
};

}  // namespace gicomm::bench
