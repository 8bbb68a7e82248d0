// The words of mini-proxy's ping-pong, host and GPU alike: request `index` of ring `ring` writes
// payload_value(ring, index) into word payload_slot(ring, window, index) of the destination.
// Ring 0 carries the pings, ring 1 the answers; the GPU producers (experiments/proxy), the CPU
// producers of the test driver and rank 1's responder (harness/responder.h) all use these.
#pragma once

#include <cstdint>

#include "gicomm/common/hd.h"

namespace gicomm::bench {

GICOMM_HD uint64_t payload_value(uint32_t ring, uint64_t index) {
  return (static_cast<uint64_t>(ring + 1) << 48) ^ (index * 0x9E3779B97F4A7C15ull >> 16);
}
GICOMM_HD uint32_t payload_slot(uint32_t ring, uint32_t window, uint64_t index) {
  return ring * window + static_cast<uint32_t>(index & (window - 1));
}

}  // namespace gicomm::bench
