// The words of mini-proxy's ping-pong, host and GPU alike: request `index` of ring `ring` writes
// payload_value(ring, index) into word payload_slot(ring, window, index) of the destination.
// Ring 0 carries the pings, ring 1 the answers; the GPU producers (experiments/proxy), the CPU
// producers of the test driver and rank 1's responder (harness/responder.h) all use these, and the
// GPU ones the same enqueue (enqueue_as).
#pragma once

#include <cstdint>
#include <string>

#include "gicomm/common/hd.h"
#include "gicomm/proxy/ring.h"

namespace gicomm::bench {

GICOMM_HD uint64_t payload_value(uint32_t ring, uint64_t index) {
  return (static_cast<uint64_t>(ring + 1) << 48) ^ (index * 0x9E3779B97F4A7C15ull >> 16);
}
GICOMM_HD uint32_t payload_slot(uint32_t ring, uint32_t window, uint64_t index) {
  return ring * window + static_cast<uint32_t>(index & (window - 1));
}

// The store scope of the tuned enqueue's 16-byte store as a point names it (`store`): sys 0, gpu 1,
// weak 2 (proxy::StoreScope).
inline uint32_t store_scope_of(const std::string& store) { return store == "gpu" ? 1u : store == "weak" ? 2u : 0u; }

// The GPU producers' enqueue as the point asks for it: `tuned` (one producer per ring, its state in
// `tp`) with the 16-byte store at `store_scope`, else the baseline multi-producer enqueue. The
// ticket, or ~0 on timeout (`e` filled in). mini-proxy's GPU producers and rank 1's GPU responder
// both enqueue through it, so the two halves of a round trip hand over the same way.
GICOMM_HD uint64_t enqueue_as(const proxy::RingView& ring, proxy::TunedProducer& tp, uint64_t value, uint32_t info,
                              bool tuned, uint32_t store_scope, uint64_t timeout_ns, proxy::WaitError* e) {
  if (!tuned) return proxy::enqueue_baseline(ring, value, info, timeout_ns, e);
  switch (store_scope) {
    case 1:
      return proxy::enqueue_tuned<proxy::StoreScope::gpu>(ring, tp, value, info, timeout_ns, e);
    case 2:
      return proxy::enqueue_tuned<proxy::StoreScope::weak>(ring, tp, value, info, timeout_ns, e);
    default:
      return proxy::enqueue_tuned<proxy::StoreScope::sys>(ring, tp, value, info, timeout_ns, e);
  }
}

}  // namespace gicomm::bench
