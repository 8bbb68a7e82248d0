// What rank 1's two responders (harness/responder.h: the host thread of responder.cpp, the GPU
// thread of responder_gpu.cu) share, so they answer the same words, check the same request and
// say the same things: the words and values of each scheme (host and GPU alike), the request's
// parameters, the answers' ring drained by one mini-proxy worker, and the account of what the
// responder saw.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gicomm/common/hd.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/ring.h"
#include "harness/pingpong.h"
#include "harness/two_rank.h"

namespace gicomm::bench {

// The words and values of ping i and its answer (word indexes: 8-byte words of each buffer).
struct AnswerRule {
  bool flag = false;  // scheme flag (mini-gda's), else proxy-pingpong (mini-proxy's)
  uint32_t window = 1, ping = 0, pong = 0;
  GICOMM_HD uint32_t ping_word(uint64_t i) const { return flag ? ping : payload_slot(0, window, i); }
  GICOMM_HD uint32_t pong_word(uint64_t i) const { return flag ? pong : payload_slot(1, window, i); }
  GICOMM_HD uint64_t ping_value(uint64_t i) const { return flag ? i + 1 : payload_value(0, i); }
  GICOMM_HD uint64_t pong_value(uint64_t i) const { return flag ? i + 1 : payload_value(1, i); }
};

// A responder's request, checked (responder.h lists its keys).
struct PongRequest {
  AnswerRule rule;
  uint64_t wait_ns = 0;  // how long it waits for the next ping
  bool yield = false;
  // The GPU responder's enqueue (enqueue_as): `enqueue` tuned (default) or baseline, `store` the
  // tuned store's scope (sys by default), as the point's producers enqueue.
  bool tuned = true;
  uint32_t store_scope = 0;
};
// PointFailure naming the key, the value and what is allowed, for a bad request.
PongRequest parse_pong_request(const ResponderSetup& setup);

// Why a responder stopped by itself (PongOutcome::why).
inline constexpr uint32_t kPongStopped = 0;      // still running when stopped: no reason of its own
inline constexpr uint32_t kPongPingTimeout = 1;  // no ping `at` within the wait (`word` held `held`)
inline constexpr uint32_t kPongRingFull = 2;     // its answers' ring stayed full at the answer to ping `at`

// What a responder saw (written by the GPU thread into mapped memory, hence plain data).
struct PongOutcome {
  uint64_t seen, answered;
  uint32_t why, word;
  uint64_t at, held;
};

// Tests only: the responder sees the pings and never answers (rank 0 must time out, and its record
// must say that rank 1 saw the ping): GICOMM_TEST_RESPONDER_MUTE=1.
bool responder_muted();

// The single worker that drains the answers' ring (`ring`, the host's view) into the setup's
// backend (rank 1's QP 0), started. PointFailure when the pool cannot start.
std::unique_ptr<proxy::WorkerPool> start_answer_worker(const ResponderSetup& setup, const proxy::RingView& ring,
                                                       bool yield);

// Once the responder stopped: waits for its worker to complete every answer it enqueued, then
// says what it saw ("saw N pings, answered N, then ..."). True when it answered every ping it saw,
// stopped for no reason of its own and its worker completed the answers.
bool finish_answers(proxy::WorkerPool& worker, const PongOutcome& o, uint64_t wait_ns, uint64_t timeout_ns,
                    std::string* state);

}  // namespace gicomm::bench
