// Timeouts shared by every spin-wait (host and GPU). No wait in gicomm is unbounded.
#pragma once

#include <cstdint>

namespace gicomm {

// Default for --timeout-ms (native/bench/README.md).
constexpr uint32_t kDefaultTimeoutMs = 2000;

// Wait outcomes reported by bounded spin loops.
enum class WaitStatus : int { ok = 0, timeout = 1, error = 2 };

}  // namespace gicomm
