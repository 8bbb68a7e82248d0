// Descriptor rings in host memory for the proxy tests whose producers are CPU threads: `n` rings
// of `cap` slots, zeroed, with a RingView each for the worker pool and the enqueue calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gicomm/proxy/ring.h"

namespace gicomm::test {

struct HostRings {
  HostRings(uint32_t n, uint32_t cap) : counters(n), slots(size_t(n) * cap) {
    std::memset(static_cast<void*>(slots.data()), 0, slots.size() * sizeof(proxy::Desc));
    std::memset(static_cast<void*>(counters.data()), 0, n * sizeof(proxy::RingCounters));
    for (uint32_t r = 0; r < n; ++r) {
      proxy::RingView v{};
      v.slots = slots.data() + size_t(r) * cap;
      v.head = &counters[r].head;
      v.done = &counters[r].done;
      v.reserve = &counters[r].tail;
      v.capacity = cap;
      v.id = r;
      views.push_back(v);
    }
  }
  std::vector<proxy::RingCounters> counters;
  std::vector<proxy::Desc> slots;
  std::vector<proxy::RingView> views;
};

}  // namespace gicomm::test
