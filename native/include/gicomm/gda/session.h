// mini-gda host setup: creates the QPs on a softnic (cpu or gpu engine), places the queues the way
// the chosen configuration needs, builds the device-side QP array and Context, runs the engine and
// the hybrid-mode host ringer, and turns a kernel's ErrorReport into a message.
//
// Placements:
//   softnic-gpu  SQ, dbrec and collapsed CQ in the producer GPU's memory (as NVSHMEM keeps them in
//                GPU memory); the doorbell word in the engine GPU's memory, so the producer's 8-byte
//                doorbell store crosses NVLink like an MMIO store crosses PCIe, and the engine reads
//                WQEs across NVLink like a NIC's DMA read.
//   softnic-cpu  everything in pinned host memory; host threads poll.
//   hybrid       as above, but the dbrec and doorbell in pinned host memory: the GPU publishes the
//                dbrec and a host thread rings.
//   mlx5         a ConnectX through DEVX (src/nic/mlx5), as NVSHMEM IBGDA sets it up: SQs,
//                collapsed CQs and doorbell records in one GPU buffer registered as a umem (dmabuf,
//                else by address), the UAR doorbell register mapped into the GPU (mlx5_doorbell:
//                IoMemory for a real UAR, pinned host memory for the emulated rdma-core's), every
//                RC QP connected to itself (loopback: each write is a send and a receive of the
//                same NIC), MRs over GPU memory (dmabuf, else by address). No engine of ours runs
//                (the NIC, or the emulated rdma-core's engine, executes); the benchmark floor's
//                doorbell is a GPU memory word (a store to the UAR would be a real doorbell).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gicomm/gda/gda.cuh"
#include "gicomm/gda/hybrid.h"
#include "gicomm/gda/peer_qp.h"
#include "gicomm/softnic/gpu_engine.h"
#include "gicomm/softnic/softnic.h"

namespace gicomm::softnic {
class GpuEngine;
class EngineDeadline;
}

namespace gicomm::gda {

struct Mlx5Queues;  // session.cu: the DEVX objects of the mlx5 placement

struct SessionConfig {
  std::string engine = "softnic-gpu";  // or softnic-cpu, mlx5
  std::string mlx5_device;             // mlx5: the RDMA device name ("": the first mlx5 device)
  std::string mlx5_doorbell = "auto";  // mlx5: uar-iomem, pinned-host, or auto (IoMemory, else pinned)
  uint8_t mlx5_gid_index = 0;          // mlx5: the source GID index (RoCE)
  // mlx5: connects the QPs to a peer's (two ranks) instead of each to itself (loopback). Called
  // once with this side's QPs (send PSN 0); fills the peer's, one per QP, and the path MTU in
  // bytes; false and a reason when the peer cannot take them.
  std::function<bool(const std::vector<PeerQp>& mine, std::vector<PeerQp>* peers, uint32_t* mtu, std::string* error)>
      connect_peer;
  uint32_t num_qps = 1;
  uint32_t sq_wqebbs = 1024;
  int producer_device = 0;
  int engine_device = 1;        // gpu engine; equal to producer_device: reserved SMs of one GPU
  int engine_blocks = 0;        // gpu engine blocks (0: all SMs of the engine GPU)
  int engine_warps_per_block = softnic::kDefaultWarpsPerBlock;
  int cpu_threads = 2;          // cpu engine threads
  bool hybrid = false;          // a host thread rings the doorbells
  uint32_t signal_every = 1;
  uint32_t timeout_ms = 2000;
};

class Session {
 public:
  explicit Session(const SessionConfig& cfg);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  softnic::SoftNic& nic() { return *nic_; }  // the softnic (unused with mlx5)
  const SessionConfig& config() const { return cfg_; }
  // Registers a buffer (device pointers are valid for the gpu engine through peer access).
  softnic::MemoryRegionHandle register_mr(void* p, uint64_t bytes, uint32_t access);
  void start_engine();
  void stop_engine();  // throws when the engine failed (watchdog, kernel error)
  // Bounds a launch and its wait beside a running gpu engine on the producer's GPU (include
  // gicomm/softnic/gpu_engine.h to use it): unless released within timeout_ms, the engine is stopped
  // so that a launch blocked behind it returns, and fired() says so. Null for any other engine.
  std::unique_ptr<softnic::EngineDeadline> engine_deadline(int timeout_ms);
  softnic::Counters engine_counters() const;  // zero with mlx5 (no engine)
  // Where the GPU's doorbell stores land, for the records: uar-iomem, pinned-host or gpu-memory.
  std::string doorbell_target() const;
  // The device context (pointers into producer GPU memory); pass by value to kernels.
  Context context() const { return ctx_; }
  // Clears the error report; returns the last one as a message ("" when none).
  std::string take_error();
  DeviceQp* device_qps() const { return d_qps_; }
  // Re-reads the device QP heads (used by tests).
  std::vector<DeviceQp> read_qps() const;
  // Scratch SQ ring (64 WQEBBs) and doorbell word in the same memory as the QPs' own, never
  // polled by the engine: the benchmark's "floor" stores there.
  uint8_t* floor_sq() const { return static_cast<uint8_t*>(floor_sq_); }
  uint64_t* floor_doorbell() const { return static_cast<uint64_t*>(floor_db_); }

 private:
  void init_mlx5();
  void upload_qps(const std::vector<DeviceQp>& host);
  SessionConfig cfg_;
  std::unique_ptr<softnic::SoftNic> nic_;
  std::unique_ptr<softnic::CpuEngine> cpu_;
  std::unique_ptr<softnic::GpuEngine> gpu_;
  std::unique_ptr<HybridRinger> ringer_;
  std::unique_ptr<Mlx5Queues> mlx5_;
  DeviceQp* d_qps_ = nullptr;
  ErrorReport* d_err_ = nullptr;
  softnic::MemoryPlace sq_place_{}, db_place_{};
  void* floor_sq_ = nullptr;
  void* floor_db_ = nullptr;
  Context ctx_{};
};

// Sets up peer access between two GPUs in both directions (no-op for one GPU).
void enable_peer_access(int a, int b);

}  // namespace gicomm::gda
