// What an experiment throws. PointFailure: the point is recorded as failed with this message (name
// what failed: the queue, the expected and last-seen counters) and the driver goes on.
// HardwareMissing: the hardware the point needs is absent: one line on stderr, exit 3.
#pragma once

#include <stdexcept>

namespace gicomm::bench {

struct PointFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct HardwareMissing : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace gicomm::bench
