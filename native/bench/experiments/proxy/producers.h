// GPU producers of the mini-proxy benchmark: kernels that enqueue 8-byte inline RDMA-write requests
// into host-memory rings with the shared ring protocol (gicomm/proxy/ring.h) and wait for their
// completion. Host-callable launchers; the kernels live in gpu_producer.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gicomm/proxy/ring.h"
#include "harness/pingpong.h"

namespace gicomm {
namespace proxy_bench {

// First GPU-side failure, written by the failing thread into mapped host memory.
struct DeviceError {
  uint32_t flag;      // 1 once written
  uint32_t ring;
  uint32_t what;      // proxy::kWaitRingFull, proxy::kWaitCompletion or kWaitPayload
  uint32_t op;        // index of the operation within the launch
  uint64_t expected;
  uint64_t seen;
};

constexpr uint32_t kWaitPayload = 3;  // pingpong: waiting for a destination word to change

struct ProducerArgs {
  proxy::RingView rings[proxy::kMaxRings];  // GPU views: slots/head in mapped host memory,
                                            // done host- or GPU-resident, reserve in GPU memory
  proxy::TunedProducer* tuned;   // per ring, GPU memory: producer state carried across launches
  uint32_t nrings;
  uint32_t tuned_mode;           // 1: tuned enqueue, 0: baseline
  uint32_t store_scope;          // tuned: proxy::StoreScope of the 16-byte store (sys by default)
  uint64_t msgs;                 // operations per ring in this launch (issue mode: measured ops)
  uint64_t warmup;               // issue mode: unrecorded ops before them
  uint64_t base;                 // tickets each ring had before this launch
  uint32_t window;               // destination words per ring (a power of two)
  uint64_t timeout_ns;           // bound of every GPU wait
  uint64_t* t_start;             // per ring: %globaltimer at start / end
  uint64_t* t_end;
  long long* c_start;            // per ring: clock64 at start / end
  long long* c_end;
  uint32_t* issue_cycles;        // issue mode: per measured op, enqueue cost in SM cycles
  uint32_t* rtt_cycles;          // issue mode: enqueue -> completion seen, SM cycles
  uint32_t* store_cycles;        // issue mode, tuned: `msgs` more ops, the 16-byte store alone
                                 // timed (the floor-comparable issue); nullptr: not measured
  const uint64_t* remote;        // pingpong: the destination words (mapped host memory)
  DeviceError* err;
};

// The 8 bytes request `index` of `ring` writes, and where (harness/pingpong.h); the host checks
// the destination against them.
using bench::payload_slot;
using bench::payload_value;

// One thread, ring 0, at most one request outstanding: issue cost and round trip per operation;
// with store_cycles (tuned enqueue), then `msgs` more operations timing the store alone.
cudaError_t launch_issue(const ProducerArgs& a, cudaStream_t s);
// Two threads (blocks) on rings 0 and 1: ping writes word i of ring 0's window through the proxy;
// pong polls that word in host memory, then answers through ring 1; ping polls the answer.
// rtt_cycles gets the full ping -> pong -> ping time, issue_cycles ping's enqueue cost. With
// `ping_only` (two ranks) only the ping runs: the answer comes from the peer rank's responder.
cudaError_t launch_pingpong(const ProducerArgs& a, cudaStream_t s, bool ping_only = false);
// One producer thread per ring (one block each), `msgs` requests each, then wait for completion.
cudaError_t launch_rate(const ProducerArgs& a, cudaStream_t s);

}  // namespace proxy_bench
}  // namespace gicomm
