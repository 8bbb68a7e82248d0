// Rank 1's half of mini-proxy's ping-pong between two ranks (two_rank.h: GICOMM_EXPERIMENT_SERVE):
// a host thread polls the ping words where rank 0's writes land (ring 0's window of its buffer) and
// answers each ping with the pong of the same index (harness/pingpong.h), enqueued on a ring that
// rank 1's own mini-proxy worker drains into its QP 0, so the answer crosses the NIC back through
// the same worker -> verbs path as the ping. Request parameters: `window` (words per ring, a power
// of two), `wait_ms` (how long it waits for the next ping before it stops and says so), `yield`
// ("1": yield the core while it waits; oversubscribed test machines).
#pragma once

#include <memory>

#include "harness/two_rank.h"

namespace gicomm::bench {

std::unique_ptr<Responder> proxy_pong_responder(const ResponderSetup& setup);

}  // namespace gicomm::bench
