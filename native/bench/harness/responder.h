// Rank 1's half of a ping-pong between two ranks (two_rank.h: GICOMM_EXPERIMENT_SERVE): it polls
// the word where rank 0's ping `i` lands in rank 1's buffer and answers it with a write of its
// own, enqueued on a ring that rank 1's own mini-proxy worker drains into its QP 0, so the answer
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
// Who polls and enqueues follows the request's `responder` (the point's parameter of that name):
//   host (the default)  a host thread (pong_responder): the round trip lacks the answering side's
//                       GPU poll and GPU enqueue that a one-process ping-pong has
//   gpu                 one GPU thread on rank 1's GPU (responder_gpu.cu, linked into the drivers
//                       built with CUDA): it polls rank 1's buffer, registered as mapped pinned
//                       host memory, and enqueues with the GPU producers' enqueue (enqueue_as:
//                       `enqueue` tuned or baseline, `store` the tuned store's scope), as the
//                       one-process pong does. Every wait of it is bounded (wait_ms, --timeout-ms)
#pragma once

#include <memory>
#include <string>

#include "harness/two_rank.h"

namespace gicomm::bench {

// What experiments register as rank 1's half of their round trip: the responder the request's
// `responder` names (absent: host). PointFailure naming the key and value for one this rank cannot
// run (an unknown name; gpu in a driver without the GPU responder or on a host without a GPU).
std::unique_ptr<Responder> round_trip_responder(const ResponderSetup& setup);

// The host-thread responder.
std::unique_ptr<Responder> pong_responder(const ResponderSetup& setup);

// What the records of a round trip through each say answered (params key `responder`).
inline constexpr const char* kPongResponderKind = "rank 1 host thread via its mini-proxy worker (verbs)";
inline constexpr const char* kGpuPongResponderKind = "rank 1 GPU thread via its mini-proxy worker (verbs)";

// Rank 0: puts the point's `responder` parameter (default host) into the request `ask` for rank
// 1's responder and returns what the records say answered. `peer_pong` false (the answer does not
// come from rank 1: one process, or no round trip in this form): "" and nothing asked, and a point
// that names `responder` is refused (a bad parameter), since nothing would honour it.
std::string ask_responder(const Run& run, bool peer_pong, net::Message* ask);

// The GPU responder, registered by responder_gpu.cu where a driver links it.
struct GpuResponderRegistration {
  explicit GpuResponderRegistration(ServeFn fn);
};

}  // namespace gicomm::bench
