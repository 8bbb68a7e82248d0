// The transport factory's mini-proxy side: host rings in mapped pinned memory (device views for
// the producer kernels, host views for the workers, per-ring reservation counters in GPU memory),
// the backend of the point's NIC backend (softnic-cpu: the software NIC's cpu engine; none: the
// workers consume without posting; verbs: an RDMA NIC), and the worker pool that drains the rings
// into it. Stopped on every path: the pool, then the engine.
#pragma once

#include <cstdint>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gicomm/common/vocabulary.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/ring.h"
#include "gicomm/softnic/softnic.h"
#include "harness/cuda.h"

namespace gicomm::bench {

struct ProxyRigSpec {
  uint32_t rings = 1;
  uint32_t capacity = 1024;  // slots per ring
  uint32_t workers = 1;
  uint32_t batch = 1;        // descriptors a worker chains per post
  int numa_node = 0;         // pin the workers to this node's cores (-1: no pinning)
  bool unpinned_fallback = false;  // where the node is refused, run the workers unpinned
  uint32_t engine_threads = 1;     // softnic cpu engine threads
  proxy::CompletionPublisher* publisher = nullptr;  // nullptr: the host-resident counters
  uint64_t timeout_ns = 2000000000ull;
  // Two ranks (verbs): how much of the `remote` region, from its start, this rank's writes fill at
  // the peer (fetched back after the drain); the rest is what the peer's responder wrote here.
  size_t fetch_bytes = SIZE_MAX;

  // Workers on node 0's cores where the node exists (else unpinned), the softnic engine with as
  // many threads as workers.
  static ProxyRigSpec on_node0(uint32_t rings, uint32_t workers, uint32_t batch, uint64_t timeout_ns) {
    ProxyRigSpec s;
    s.rings = rings;
    s.workers = workers;
    s.batch = batch;
    s.unpinned_fallback = true;
    s.engine_threads = workers;
    s.timeout_ns = timeout_ns;
    return s;
  }
};

// A region the workers' requests touch: `remote` is where RDMA writes land, `local` the source of
// pointer requests (they may be the same memory).
struct HostRegion {
  void* p = nullptr;
  size_t bytes = 0;
};

class ProxyRig {
 public:
  explicit ProxyRig(const ProxyRigSpec& spec);
  ~ProxyRig();
  ProxyRig(const ProxyRig&) = delete;
  ProxyRig& operator=(const ProxyRig&) = delete;

  // The NIC side for `backend`, the pool, and (softnic) its engine; workers start parked (asleep
  // until unpark) or running. A missing RDMA device for verbs is HardwareMissing; a pool the
  // configuration refuses fails the point with the pool's reason.
  void start(NicBackend backend, HostRegion remote, HostRegion local, bool parked);
  // Stops the pool once every ring drained `expected` tickets (the engine keeps running); false
  // with the reason in `err`. The pool's stats stay readable. Between two ranks, the peer's
  // buffer is then copied into the `remote` region, so the data checks read what landed there.
  bool drain(const std::vector<uint64_t>& expected, std::string* err);
  // Stops the softnic engine (if any) and fails the point when it reported error CQEs.
  void stop_engine();
  // The engine's counters (zero without a softnic).
  softnic::Counters engine_counters() const;
  // A worker failure as a point failure (" ; worker: <reason>" when `suffix`).
  std::string worker_error() const { return pool ? pool->error() : std::string(); }
  bool worker_failed() const { return pool && pool->failed(); }

  MappedBuffer<proxy::Desc> slots;
  MappedBuffer<proxy::RingCounters> counters;
  DeviceBuffer<uint64_t> reserve;            // per ring: tickets reserved (multi-producer enqueue)
  DeviceBuffer<proxy::RingView> views;       // device views, one per ring (kernels index them)
  std::vector<proxy::RingView> device_views; // the same, host copy (kernels that take them by value)
  std::vector<proxy::RingView> host_views;   // the workers'
  const ProxyRigSpec spec;
  std::unique_ptr<softnic::SoftNic> nic;
  std::unique_ptr<proxy::Backend> backend;
  std::unique_ptr<proxy::WorkerPool> pool;
  std::unique_ptr<softnic::CpuEngine> engine;

 private:
  HostRegion remote_;  // verbs: where the writes land (between two ranks, a copy of the peer's)
};

// Refuses a NIC backend the mini-proxy workers cannot post to on this host, before any GPU work:
// verbs without an RDMA device (or a build without rdma-core) is HardwareMissing. Returns which
// rdma-core answers for verbs ("emulated" or "system rdma-core <version>"), else "".
std::string require_proxy_backend(NicBackend backend);

}  // namespace gicomm::bench
