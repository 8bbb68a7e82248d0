// softnic gpu engine: a persistent kernel on one GPU (the peer GPU of the producer, or the same GPU
// with the engine's blocks occupying some SMs) that polls every QP's doorbell, reads the WQEs
// wherever the queues live (peer GPU memory over NVLink, or pinned host memory), executes them with
// the same checks as the cpu engine (gicomm/softnic/core.h) and writes the CQEs back.
//
// One warp serves a QP at a time, in passes over up to 32 WQEBBs of its doorbell window
// (gicomm/softnic/warp_plan.h): the warp reads the window into shared memory with wide loads, finds
// the WQE starts by their ds (1..4 WQEBBs: inline payloads up to 220 bytes, DC address vectors),
// checks every WQE in parallel with the cpu engine's execute_wqe, and runs the WQEs before the first
// one that fails: their payloads moved by the whole warp in 16-byte blocks (any size, any
// alignment, a 4 KiB payload in one round trip), each atomic after the writes before it and in
// order, then the CQEs (bodies, the warp barrier, each tail with a release); the next window of
// the same doorbell is loaded while those CQEs wait for their round trip. A stale, malformed or
// failing WQE at the head goes through the serial path shared with the cpu engine (retries, error
// CQE, then flushes). When a block's warp 0 serves its one QP, the block's other warps help it: with
// the copies of a pass (while warp 0 goes on to the next), or, when more than 32 WQEBBs were rung,
// with the pass itself (a block pass: each warp checks and runs the WQEs of its own 32 WQEBBs, so a
// QP's pass covers up to 8 windows).
// Payload writes of one pass may land in any order (as packets of a real NIC may); completions are
// in order.
//
// Stoppable: stop() raises a flag in pinned memory; the kernel also ends by itself at a watchdog
// deadline (max_runtime_ms) and reports that it did.
//
// On the producer's GPU (the device current when start() is called is the engine's) the engine
// shares the producer's context, where a launch that makes the driver commit a context-wide resource
// (a module, the printf FIFO, the device heap, more local memory) waits for the context to be idle,
// i.e. for the engine to end. The first such engine of the process on a GPU therefore commits them
// first (eager module loading, a 4 KiB stack reservation, one launch of a kernel that calls printf
// and malloc), then checks that a kernel first launched beside it runs (else it stops and start()
// throws, saying so). Nothing may wait for the whole device while it runs (cudaDeviceSynchronize,
// cudaFree of device memory): wait on streams, free after stop(). EngineDeadline bounds a producer's
// launch and wait beside it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "gicomm/softnic/softnic.h"

namespace gicomm::softnic {

// Warps per engine block unless configured. A block whose warp 0 is the only one with a QP has its
// other warps help with that QP's copies and passes (gpu_engine.cu): on the H200, 8 warps against 4
// moved the same-GPU engine's ceilings (16 QPs on 16 SMs) from 84 to 90 MWQE/s at 4 KiB, 7.2 to 10.5
// at 64 KiB, and 8-byte WQEs at 528 QPs from 763 to 1255 (more warps, fewer QPs each). At 250-255
// registers a thread, 8 warps is the most one SM holds.
inline constexpr int kDefaultWarpsPerBlock = 8;

struct GpuEngineConfig {
  int device = 1;            // the GPU the engine kernel runs on
  int blocks = 0;            // 0: one per SM
  int warps_per_block = kDefaultWarpsPerBlock;
  int max_runtime_ms = 300000;  // watchdog: the kernel ends itself after this long
};

class GpuEngine {
 public:
  GpuEngine(SoftNic& nic, const GpuEngineConfig& cfg);
  ~GpuEngine();
  GpuEngine(const GpuEngine&) = delete;
  GpuEngine& operator=(const GpuEngine&) = delete;

  // Snapshots the key tables and every QP's engine state to the engine GPU and launches the
  // kernel. QPs and memory regions created later are not seen until the next start().
  void start();
  // Raises the stop flag and waits up to timeout_ms; copies QP states back to the SoftNic so the
  // next engine continues where this one stopped. Throws when the kernel does not end in time or
  // reported a failure (watchdog).
  void stop(int timeout_ms = 5000);
  // Raises the stop flag and returns (a host store, safe from any thread while the engine runs);
  // stop() still collects the kernel.
  void request_stop();
  bool running() const { return running_; }
  bool same_gpu() const { return same_gpu_; }  // valid after start()
  Counters counters() const { return last_counters_; }  // valid after stop()
  int warps() const { return total_warps_; }

 private:
  void probe_beside();
  SoftNic& nic_;
  GpuEngineConfig cfg_;
  bool running_ = false;
  bool same_gpu_ = false;
  int total_warps_ = 0;
  uint32_t num_qps_ = 0;
  void* d_qps_ = nullptr;
  void* d_mrs_ = nullptr;
  void* d_dcts_ = nullptr;
  void* d_counters_ = nullptr;
  void* d_grid_ = nullptr;  // one GridQueue per block (gpu_engine.cu)
  int* h_flags_ = nullptr;  // pinned: [0] stop, [1] watchdog fired
  void* stream_ = nullptr;
  Counters last_counters_{};
};

// Bounds what a producer does beside a running engine (a launch, a wait on its stream): unless
// destroyed within timeout_ms, it stops the engine, so that a launch or wait blocked behind it
// returns, and fired() says so (the engine's work is then over; stop() collects it). A helper thread
// waits; it makes no CUDA call.
class EngineDeadline {
 public:
  EngineDeadline(GpuEngine& engine, int timeout_ms);
  ~EngineDeadline();
  EngineDeadline(const EngineDeadline&) = delete;
  EngineDeadline& operator=(const EngineDeadline&) = delete;
  bool fired() const { return fired_.load(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::atomic<bool> fired_{false};
  std::thread watcher_;
};

}  // namespace gicomm::softnic
