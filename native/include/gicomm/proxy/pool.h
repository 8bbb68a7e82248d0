// mini-proxy worker pool: 1..8 CPU workers, each pinned to a core of one NUMA node, polling R rings
// (ring r belongs to worker r % W), chaining up to B descriptors per post into its own NIC channel
// and publishing per-ring completion counters. Host only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gicomm/proxy/backend.h"
#include "gicomm/proxy/ring.h"

namespace gicomm {
namespace proxy {

// Where completions go. The default writes the host-resident counter RingView::done with a
// release store (baseline completion). The bench supplies one that updates a GPU-resident counter.
class CompletionPublisher {
 public:
  virtual ~CompletionPublisher() = default;
  // Ring `ring` now has `done` completed tickets. Called by the ring's worker only, with increasing
  // values. Returns false (error set) when the update could not be made.
  virtual bool publish(uint32_t ring, uint64_t done, std::string* error) = 0;
};

struct PoolConfig {
  uint32_t workers = 1;             // 1..kMaxWorkers
  uint32_t batch = 1;               // 1..kMaxBatch descriptors chained per post
  int numa_node = 0;                // pin to this node's cores; -1: no pinning
  uint32_t first_cpu = 0;           // index into the node's cpu list of worker 0's core
  bool yield_when_idle = false;     // sched_yield on an empty pass (oversubscribed CI machines)
  uint64_t stall_timeout_ns = 2000000000ull;  // outstanding work with no completion for this long
};

// Where worker `w` of a pool configured by `cfg` runs: its node's cpu (first_cpu + w) mod the
// node's cpus; -1 when the pool is unpinned or the node is unknown.
int worker_cpu(const PoolConfig& cfg, uint32_t w);
// Where the softnic cpu engine's `threads` threads run beside such a pool (cpu_engine_cpus of its
// node, topology.h): the engine ceiling's measurement and every mini-proxy run place it so. Empty
// when the pool is unpinned (the engine is too).
std::vector<int> engine_cpus_beside(const PoolConfig& cfg, unsigned threads);

struct WorkerStats {
  int cpu = -1;                // core the worker was pinned to (-1: not pinned)
  uint64_t posts = 0;          // chained submissions
  uint64_t descriptors = 0;    // descriptors consumed
  uint64_t completed = 0;      // descriptors retired
};

class WorkerPool {
 public:
  // Validates the configuration (workers, batch, rings >= workers, NUMA node) and opens one channel
  // per worker. Returns nullptr with a one-line reason on error.
  static std::unique_ptr<WorkerPool> create(const PoolConfig& cfg, const std::vector<RingView>& rings,
                                            Backend& backend, CompletionPublisher* publisher,
                                            std::string* error);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Start the workers (pinned). With start_parked they block until unpark(): the cold state.
  bool start(bool start_parked, std::string* error);
  // Cold/warm control: parked workers sleep on a condition variable (their cores go idle).
  void park();
  void unpark();

  // Drain and join. With `expected` (one ticket count per ring) the pool waits until every ring
  // has consumed and completed that many; without it, until a pass finds nothing new and nothing
  // is outstanding. False with a message naming the ring and its counters on timeout or error.
  bool stop(const std::vector<uint64_t>* expected, uint64_t timeout_ns, std::string* error);

  // First error a worker hit (empty if none). Workers stop on error.
  std::string error() const;
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::vector<WorkerStats> stats() const;
  std::vector<int> worker_cpus() const;
  const PoolConfig& config() const { return cfg_; }

 private:
  WorkerPool() = default;
  void run(uint32_t w);
  void fail(const std::string& msg);

  struct Worker;
  PoolConfig cfg_;
  std::vector<RingView> rings_;
  CompletionPublisher* publisher_ = nullptr;
  std::unique_ptr<CompletionPublisher> default_publisher_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<int> cpus_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> parked_{false};
  std::atomic<bool> failed_{false};
  std::vector<uint64_t> expected_;  // drain targets, written by stop() before stopping_
  std::unique_ptr<std::atomic<uint64_t>[]> ring_done_;  // last published count, for messages
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string error_;
};

}  // namespace proxy
}  // namespace gicomm
