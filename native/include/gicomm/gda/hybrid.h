// Hybrid mode's host side (the paper's P-H100 platform, where the UAR cannot be mapped into the
// GPU): the GPU writes WQEs and publishes the doorbell record; this host thread watches every QP's
// dbrec and rings the doorbell for the last WQEBB published. Host-only code (CI tests it against
// the cpu engine with host producers that write WQEs and dbrecs but never ring).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gicomm/mlx5/queue.h"

namespace gicomm::gda {

// Host thread that rings doorbells for GPU-built WQEs (hybrid mode): it watches each QP's dbrec
// and, when the producer index moves, stores the 8-byte doorbell for the last WQEBB.
class HybridRinger {
 public:
  explicit HybridRinger(std::vector<mlx5::SqDesc> sqs) : sqs_(std::move(sqs)) {}
  ~HybridRinger() { stop(); }
  void start();
  void stop();
  uint64_t rings() const { return rings_.load(); }

 private:
  std::vector<mlx5::SqDesc> sqs_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rings_{0};
  std::thread thread_;
};

}  // namespace gicomm::gda
