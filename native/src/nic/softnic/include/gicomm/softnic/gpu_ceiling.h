// The gpu engine's ceiling for one WQE shape: how many WQEs per second the engine executes when
// nothing else limits it. Every WQE of a round is written to its QP's ring before the clock starts
// (by a kernel on the producer GPU, with the same encoders mini-gda uses: RC RDMA writes, inline
// payloads streamed into the ring, pointer payloads from registered GPU memory, every WQE signaled
// into a collapsed CQ); then one thread per QP rings once for its whole window and waits for the
// CQE naming its last WQE. A round's rate is WQEs / (last completion - first doorbell), on the
// producer GPU's %globaltimer. Softnic numbers: the model NIC's ceiling, not a NIC's.
//
// Placement as mini-gda's softnic-gpu: queues and payload buffers in the producer GPU's memory, the
// doorbell words in the engine GPU's; producer_device == engine_device is the one-GPU placement
// (the engine on engine_blocks SMs, the timing kernel on the others).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gicomm/softnic/core.h"
#include "gicomm/softnic/gpu_engine.h"

namespace gicomm::softnic {

struct CeilingShape {
  bool inline_payload = true;  // inline: 1..kMaxInlineRc (220) bytes; pointer: 1..kMaxCeilingPointerBytes
  uint32_t bytes = 8;
};
constexpr uint32_t kMaxCeilingPointerBytes = 1u << 20;

struct CeilingConfig {
  CeilingShape shape;
  uint32_t qps = 16;        // 1..4096
  uint32_t depth = 1024;    // WQEs per QP per round, one doorbell; depth x WQEBBs of the shape <= 32768
  int rounds = 5;           // timed rounds, after one untimed warm-up round
  int producer_device = 0;  // queues, payload buffers, the timing kernel
  int engine_device = 1;    // equal to producer_device: reserved SMs of one GPU
  int engine_blocks = 0;    // 0: every SM of the engine GPU (two GPUs only)
  int engine_warps_per_block = kDefaultWarpsPerBlock;
  uint32_t timeout_ms = 5000;          // bound of each round's wait, per QP
  size_t max_dst_bytes = size_t(256) << 20;  // destination space; slots wrap within a round
};

struct CeilingResult {
  std::vector<double> wqe_rate_mps;   // M WQE/s, one per timed round
  std::vector<double> goodput_gbps;   // payload GB/s (1e9 bytes), one per timed round
  double sm_clock_mhz = 0;            // producer GPU: clock64 over %globaltimer across the timed rounds
  uint32_t wqebbs_per_wqe = 1;
  Counters counters;                  // the engine's, over every round
};

// Checks the config (std::invalid_argument naming the key, its value and what is allowed), runs the
// rounds, checks that the engine executed exactly every WQE without an error and that each QP's
// last destination slot holds its payload; throws std::runtime_error (naming the QP and what was
// seen) on a CUDA failure, an error CQE, a wait past timeout_ms or a wrong payload.
CeilingResult measure_gpu_engine_ceiling(const CeilingConfig& cfg);

// "inline 64 B" / "pointer 4096 B", for logs and records.
std::string describe(const CeilingShape& shape);

}  // namespace gicomm::softnic
