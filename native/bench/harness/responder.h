// Rank 1's half of a ping-pong between two ranks (two_rank.h: GICOMM_EXPERIMENT_SERVE): a host
// thread polls the word where rank 0's ping `i` lands and answers it with a write of its own,
// enqueued on a ring that rank 1's own mini-proxy worker drains into its QP 0, so the answer
// crosses the NIC back through a worker -> verbs path. Which words, and which values, follow the
// request's `scheme`:
//   proxy-pingpong  mini-proxy's (harness/pingpong.h): ping i is payload_value(0, i) in word
//                   payload_slot(0, window, i), its answer payload_value(1, i) in word
//                   payload_slot(1, window, i); parameter `window` (words per ring, a power of two)
//   flag            mini-gda's round trip (gda_rtt.cu): ping i is the value i + 1 in word
//                   `ping_word`, its answer the value i + 1 in word `pong_word` of rank 0's buffer
// Both: `wait_ms` (how long it waits for the next ping before it stops and says so), `yield` ("1":
// yield the core while it waits; oversubscribed test machines). The answers go to the buffer rank 0
// offered when the QPs connected, or to `addr`/`rkey` when the request names them.
// Unlike a one-process ping-pong, whose answer comes from a second GPU thread, this answer is
// enqueued by a host thread: the round trip lacks the answering side's GPU poll and enqueue.
#pragma once

#include <memory>

#include "harness/two_rank.h"

namespace gicomm::bench {

std::unique_ptr<Responder> pong_responder(const ResponderSetup& setup);

// What the records of a round trip through it say answered (params key `responder`).
inline constexpr const char* kPongResponderKind = "rank 1 host thread via its mini-proxy worker (verbs)";

}  // namespace gicomm::bench
