// The launcher of two-rank runs as the harness uses it (internal to harness/two_rank*.cpp): the
// out-of-band session of a run, rank 0's requests to rank 1, and rank 1's service of them (the QPs
// and buffer rank 0 writes into, its port counters); two_rank.h says what each request does.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "gicomm/net/counters.h"
#include "gicomm/net/launcher.h"
#include "gicomm/net/oob.h"
#include "harness/errors.h"
#include "harness/options.h"
#include "harness/topology.h"
#include "harness/two_rank.h"
#if defined(GICOMM_BENCH_WITH_VERBS)
#include "gicomm/verbs/verbs_backend.h"
#endif

namespace gicomm::bench {

// How long rank 1 waits for rank 0's next request: rank 0's whole measurement of a point. A rank 0
// that dies closes the connection (rank 1 fails at once); one whose GPU stops answering ends
// itself (wait_stream), so this bound only catches a rank 0 that hangs with its socket open.
inline constexpr int kServeTimeoutMs = 3600 * 1000;
// Rank 0 asks for the peer's buffer in pieces that fit one message (hex doubles them).
inline constexpr size_t kFetchPiece = 256 * 1024;

[[noreturn]] inline void fail(const std::string& why) { throw std::runtime_error(why); }

using net::bytes_of;
using net::hex_of;
using net::sysfs_root;

inline uint64_t u64_of(const net::Message& m, const std::string& key, const std::string& who) {
  uint64_t v = 0;
  std::string err;
  if (!m.get_u64(key, ~0ull, &v, &err)) fail(who + " sent a bad message: " + err);
  return v;
}

using net::configured_delta;

// What a point's workers posted through its path: one packet per MTU-sized piece of each RDMA
// write (one for an inline or zero-length write), and its payload bytes.
struct Traffic {
  std::atomic<uint64_t> messages{0}, packets{0}, bytes{0};
  uint32_t mtu = 1024;
  // mini-gda: the GPU posts; the WQEs its QPs posted since the point began (bytes not known here).
  std::function<uint64_t()> posted_wqes;
  uint64_t wqes_before = 0;
  uint64_t wqes_carried = 0;  // posted by an earlier session of the same point
};

// `inner`, counting what its channels post into `traffic`.
std::unique_ptr<proxy::Backend> metered(std::unique_ptr<proxy::Backend> inner, std::shared_ptr<Traffic> traffic);

// Rank 1's side of a point. Destroyed in reverse order: the responder (which polls the buffer)
// before the backend it posts through, the backend before the QPs, the QPs before the buffer.
struct PeerTarget {
  std::vector<uint64_t> buffer;
#if defined(GICOMM_BENCH_WITH_VERBS)
  std::unique_ptr<verbs::VerbsEndpoint> endpoint;
#endif
  std::shared_ptr<Traffic> sent;             // what the responder posted
  std::unique_ptr<proxy::Backend> backend;   // the responder's, through the endpoint's QPs
  std::unique_ptr<Responder> responder;
  uint32_t qps = 0;
  std::string device;
  int port = 1, gid_index = 0;
  std::vector<net::PortTraffic> before;
};

class NetLauncher final : public Launcher {
 public:
  NetLauncher(const net::Launch& l, int timeout_ms) : launch_(l), timeout_ms_(timeout_ms) {}

  int rank() const override { return launch_.rank; }
  int world() const override { return launch_.world; }
  std::string peer_name() const override {
    return session_ ? session_->peer_name() : launch_.name_rank(1 - launch_.rank);
  }

  std::vector<std::string> begin_run(const std::string& experiment, int run_index,
                                     const std::vector<std::string>& points) override;
  void begin_point(const std::string& point_id) override;
  void end_point(const std::string& failure) override { request(done_request(failure), timeout_ms_); }

  void stop_after_point() override { stopping_ = true; }
  std::string serve_point(const Options& o) override;

  // The "done" request that ends a point (with the stop flag when this is the last point).
  net::Message done_request(const std::string& failure) const;

  // Rank 0: one request to rank 1 and its answer.
  net::Message request(const net::Message& req, int timeout_ms);
  int timeout_ms() const { return timeout_ms_; }
  std::string peer_host() const { return session_ ? session_->peer_host() : launch_.host_of(1 - launch_.rank); }

 private:
  void exchange(const std::string& phase, const net::Message& mine, net::Message* theirs, int timeout_ms) {
    std::string err;
    if (!session_) fail("no session with " + peer_name());
    if (!session_->exchange(phase, mine, theirs, timeout_ms, &err)) fail(err);
  }

  // Rank 1's answers to rank 0's requests (two_rank.h).
  void serve_verbs(const Options& o, const net::Message& req, PeerTarget* t, net::Message* rep);
  void serve_fetch(const net::Message& req, const PeerTarget& t, net::Message* rep);
  void serve_respond(const Options& o, const net::Message& req, PeerTarget* t, net::Message* rep);
  std::string serve_done(const net::Message& req, PeerTarget* t, net::Message* rep);

  net::Launch launch_;
  std::string experiment_;  // of the run (begin_run): whose responder rank 1 runs
  int timeout_ms_;
  bool stopping_ = false;
  std::unique_ptr<net::OobSession> session_;
};

// The installed launcher when it is this one (nullptr: one process).
NetLauncher* net_launcher();

}  // namespace gicomm::bench
