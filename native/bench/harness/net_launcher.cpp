// The launcher of src/net registered with the runner (harness/topology.h): made from the launch
// flags and the environment when they name two ranks.
#include "harness/net_launcher.h"

#include <map>

namespace gicomm::bench {

namespace {

std::unique_ptr<Launcher> make_net_launcher(const std::map<std::string, std::string>& flags, std::string* error) {
  const auto named = net::launch_of(flags, net::process_env(), 2, "the NIC experiments run on one rank or two", error);
  if (!named) return nullptr;
  return std::make_unique<NetLauncher>(named->launch, named->peer_timeout_ms);
}

// Registered with the runner when this file is linked in (the transport factory references it).
const bool registered = [] {
  register_launcher_factory(make_net_launcher);
  return true;
}();

}  // namespace


std::vector<std::string> NetLauncher::begin_run(const std::string& experiment, int run_index,
                                                const std::vector<std::string>& points) {
  experiment_ = experiment;
  net::Identity id;
  id.experiment = experiment;
  id.point = "-";  // each point is checked as it starts (begin_point)
  id.run = run_index;
  std::string err;
  session_ = net::OobSession::establish(launch_, id, timeout_ms_, &err);
  if (!session_) fail(err);
  const auto plan = net::agree_on_plan(*session_, points, "in rank " + std::to_string(rank()) + "'s points file",
                                       timeout_ms_, &err);
  if (!plan) fail(err);
  return *plan;
}

void NetLauncher::begin_point(const std::string& point_id) {
  net::Message mine, theirs;
  mine.set("point_id", point_id);
  exchange("point", mine, &theirs, timeout_ms_);
  if (theirs.get("point_id") != point_id)
    fail(peer_name() + " is at point " + theirs.get("point_id") + ", this rank at " + point_id);
}

net::Message NetLauncher::done_request(const std::string& failure) const {
  net::Message req;
  req.set("what", "done");
  req.set("status", failure.empty() ? "ok" : failure.substr(0, 4000));
  if (stopping_) req.set("stop", "1");
  return req;
}

net::Message NetLauncher::request(const net::Message& req, int timeout_ms) {
  net::Message ignored, rep;
  exchange("req", req, &ignored, timeout_ms);
  exchange("rep", net::Message{}, &rep, timeout_ms);
  return rep;
}

std::string NetLauncher::serve_point(const Options& o) {
  PeerTarget target;
  for (;;) {
    net::Message req, ignored;
    exchange("req", net::Message{}, &req, kServeTimeoutMs);
    const std::string what = req.get("what");
    net::Message rep;
    std::string line;
    try {
      if (what == "verbs") {
        serve_verbs(o, req, &target, &rep);
      } else if (what == "fetch") {
        serve_fetch(req, target, &rep);
      } else if (what == "respond") {
        serve_respond(o, req, &target, &rep);
      } else if (what == "done") {
        line = serve_done(req, &target, &rep);
      } else {
        rep.set("status", "rank " + std::to_string(rank()) + " does not serve '" + what + "'");
      }
    } catch (const std::exception& e) {
      rep.set("status", std::string("rank ") + std::to_string(rank()) + ": " + e.what());
    }
    if (!rep.has("status")) rep.set("status", "ok");
    exchange("rep", rep, &ignored, timeout_ms_);
    if (what == "done" && req.get("stop") == "1") throw PeerStopped(peer_name() + " stopped: " + req.get("status"));
    if (what == "done") return line;
  }
}

void NetLauncher::serve_verbs(const Options& o, const net::Message& req, PeerTarget* t, net::Message* rep) {
#if defined(GICOMM_BENCH_WITH_VERBS)
  const uint64_t qps = u64_of(req, "qps", peer_name());
  const uint64_t bytes = u64_of(req, "bytes", peer_name());
  if (qps == 0 || qps > verbs::kMaxEndpointQps || bytes > (uint64_t(1) << 32))
    fail("asked for " + std::to_string(qps) + " QPs and " + std::to_string(bytes) + " bytes: allowed 1.." +
         std::to_string(verbs::kMaxEndpointQps) + " QPs, up to 4 GiB");
  net::Endpoint peer;
  std::string err;
  if (!net::get_endpoint(req, &peer, &err)) fail(peer_name() + " sent a bad " + err);
  // A second set of QPs within the point (one_op: the one-op session, then the round trip's)
  // replaces the first; the counters stay those of the point's start, so the check covers both.
  const bool first = !t->endpoint;
  if (t->responder) fail("the point's responder still answers through its QPs: new QPs are refused");
  t->endpoint.reset();  // its memory region covers the buffer, reallocated here
  t->buffer.assign((bytes + 7) / 8, 0);
  verbs::VerbsConfig vc;
  vc.device = o.nic_device;
  vc.port = o.nic_port;
  vc.gid_index = o.gid_index;
  vc.remote = t->buffer.data();
  vc.remote_bytes = t->buffer.size() * 8;
  vc.zero_psn = req.get("zero_psn") == "1";
  t->endpoint = verbs::VerbsEndpoint::open(vc, static_cast<uint32_t>(qps), &err);
  if (!t->endpoint) fail(err);
  // Connected (RTR) before rank 0 learns our QPs, so its first write finds them ready.
  if (!t->endpoint->connect(peer, &err)) fail(err);
  t->device = t->endpoint->local().device;
  t->qps = static_cast<uint32_t>(qps);
  t->port = o.nic_port;
  t->gid_index = o.gid_index;
  if (first) t->before = net::read_all_ports(sysfs_root(), o.gid_index);
  net::put_endpoint(t->endpoint->local(), rep);
  rep->set("nic", net::to_json(net::describe_nic(sysfs_root(), t->device, t->port, t->gid_index)));
#else
  (void)o;
  (void)req;
  (void)t;
  (void)rep;
  fail("this build has no rdma-core (libibverbs headers were not found at configure time)");
#endif
}

void NetLauncher::serve_fetch(const net::Message& req, const PeerTarget& t, net::Message* rep) {
  const uint64_t offset = u64_of(req, "offset", peer_name());
  const uint64_t n = u64_of(req, "bytes", peer_name());
  if (n > kFetchPiece || offset > t.buffer.size() * 8 || n > t.buffer.size() * 8 - offset)
    fail("fetch of " + std::to_string(n) + " bytes at " + std::to_string(offset) + " is outside the " +
         std::to_string(t.buffer.size() * 8) + "-byte buffer");
  rep->set("data", hex_of(reinterpret_cast<const uint8_t*>(t.buffer.data()) + offset, n));
}

void NetLauncher::serve_respond(const Options& o, const net::Message& req, PeerTarget* t, net::Message* rep) {
#if defined(GICOMM_BENCH_WITH_VERBS)
  const ServeFn serve = find_responder(experiment_);
  if (!serve) fail("experiment " + experiment_ + " has no responder in this driver (nothing answers rank 0's writes)");
  if (!t->endpoint) fail("asked for a responder before the point's QPs (a 'verbs' request)");
  if (t->responder) fail("the point's responder is already running");
  std::string err;
  // The answers go where rank 0 says (mini-gda: memory registered after its QPs connected), else to
  // the buffer it offered when they connected.
  std::unique_ptr<proxy::Backend> be;
  if (req.has("addr")) {
    be = t->endpoint->backend_to(u64_of(req, "addr", peer_name()),
                                 static_cast<uint32_t>(u64_of(req, "rkey", peer_name())), &err);
  } else {
    be = t->endpoint->backend(&err);
  }
  if (!be) fail(err);
  t->sent = std::make_shared<Traffic>();
  t->sent->mtu = t->endpoint->local().mtu;
  t->backend = metered(std::move(be), t->sent);
  const ResponderSetup setup{req, t->buffer.data(), t->buffer.size() * 8, *t->backend, t->qps,
                             uint64_t(o.timeout_ms) * 1000000ull};
  t->responder = serve(setup);
  rep->set("responder", "started");
#else
  (void)o, (void)req, (void)t, (void)rep;
  fail("this build has no rdma-core (libibverbs headers were not found at configure time)");
#endif
}

std::string NetLauncher::serve_done(const net::Message& req, PeerTarget* t, net::Message* rep) {
  const std::string status = req.get("status");
  if (t->device.empty()) return "no NIC traffic; rank 0: " + status;
  // The responder first: what it sent is part of the traffic checked below.
  std::string answered;
  if (t->responder) {
    uint64_t answers = 0;
    std::string state;
    const bool ok = t->responder->stop(&answers, &state);
    rep->set("responder", ok ? "ok" : "failed");
    rep->set("responder_state", state);
    rep->set_u64("responder_answers", answers);
    rep->set_u64("responder_tx_packets", t->sent->packets);
    rep->set_u64("responder_tx_bytes", t->sent->bytes);
    answered = "; responder " + std::string(ok ? "ok" : "FAILED") + ": " + state;
  }
  net::TrafficClaim claim;
  claim.rx_packets = u64_of(req, "rx_packets", peer_name());
  claim.rx_bytes = u64_of(req, "rx_bytes", peer_name());
  claim.what = req.get("claim");
  if (t->sent) {
    claim.tx_packets = t->sent->packets;
    claim.tx_bytes = t->sent->bytes;
    claim.what += ", " + std::to_string(t->sent->messages) + " RDMA writes (" + std::to_string(t->sent->bytes) +
                  " B) sent by its responder";
  }
  const auto after = net::read_all_ports(sysfs_root(), t->gid_index);
  const net::PathVerdict v = net::check_path(t->device, t->port, t->before, after, claim);
  rep->set("path", net::to_json(v));
  rep->set("path_ok", v.ok ? "yes" : "no");
  rep->set("reason", v.reason);
  rep->set_u64("tx_bytes", configured_delta(v).tx_bytes);
  rep->set_u64("rx_bytes", configured_delta(v).rx_bytes);
  rep->set("nic", net::to_json(net::describe_nic(sysfs_root(), t->device, t->port, t->gid_index)));
  t->responder.reset();
  t->backend.reset();
#if defined(GICOMM_BENCH_WITH_VERBS)
  t->endpoint.reset();
#endif
  return std::string("path ") + (v.ok ? "ok" : v.reason) + answered + "; rank 0: " + status;
}

NetLauncher* net_launcher() { return registered ? dynamic_cast<NetLauncher*>(launcher()) : nullptr; }

}  // namespace gicomm::bench
