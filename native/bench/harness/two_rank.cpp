#include "harness/two_rank.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>

#include "gicomm/net/counters.h"
#include "gicomm/net/launcher.h"
#include "gicomm/net/oob.h"
#include "harness/errors.h"
#include "harness/options.h"
#include "harness/record.h"
#include "harness/topology.h"
#if defined(GICOMM_BENCH_WITH_VERBS)
#include "gicomm/verbs/verbs_backend.h"
#endif

namespace gicomm::bench {

namespace {

// How long rank 1 waits for rank 0's next request: rank 0's whole measurement of a point. A rank 0
// that dies closes the connection (rank 1 fails at once); one whose GPU stops answering ends
// itself (wait_stream), so this bound only catches a rank 0 that hangs with its socket open.
constexpr int kServeTimeoutMs = 3600 * 1000;
// Rank 0 asks for the peer's buffer in pieces that fit one message (hex doubles them).
constexpr size_t kFetchPiece = 256 * 1024;

[[noreturn]] void fail(const std::string& why) { throw std::runtime_error(why); }

// The sysfs root the port counters are read from: the emulated rdma-core's view when it writes one
// (GICOMM_EMU_SYSFS_DIR), else the kernel's.
std::string sysfs_root() {
  const char* emu = std::getenv("GICOMM_EMU_SYSFS_DIR");
  return emu && *emu ? emu : "/sys";
}

std::string hex_of(const void* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(2 * n, '0');
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[b[i] >> 4];
    out[2 * i + 1] = digits[b[i] & 15];
  }
  return out;
}

bool bytes_of(const std::string& hex, void* p, size_t n) {
  if (hex.size() != 2 * n) return false;
  auto v = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    const int hi = v(hex[2 * i]), lo = v(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    b[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

uint64_t u64_of(const net::Message& m, const std::string& key, const std::string& who) {
  uint64_t v = 0;
  std::string err;
  if (!m.get_u64(key, ~0ull, &v, &err)) fail(who + " sent a bad message: " + err);
  return v;
}

// The configured port's movement, for the record (0 when the counters could not be compared).
const net::PortDelta& configured_delta(const net::PathVerdict& v) {
  static const net::PortDelta none;
  return v.deltas.empty() ? none : v.deltas.front();
}

// The state of the current point on rank 1: the QPs and buffer rank 0 writes into.
struct PeerTarget {
#if defined(GICOMM_BENCH_WITH_VERBS)
  std::unique_ptr<verbs::VerbsEndpoint> endpoint;
#endif
  std::vector<uint64_t> buffer;
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
                                     const std::vector<std::string>& points) override {
    net::Identity id;
    id.experiment = experiment;
    id.point = "-";  // each point is checked as it starts (begin_point)
    id.run = run_index;
    std::string err;
    session_ = net::OobSession::establish(launch_, id, timeout_ms_, &err);
    if (!session_) fail(err);
    net::Message mine, theirs;
    mine.set_u64("points", points.size());
    if (rank() == 0)
      for (size_t i = 0; i < points.size(); ++i) mine.set("point." + std::to_string(i), points[i]);
    exchange("plan", mine, &theirs, timeout_ms_);
    std::vector<std::string> plan = points;
    std::string verdict = "ok";
    if (rank() != 0) {
      const std::set<std::string> known(points.begin(), points.end());
      plan.clear();
      const uint64_t n = u64_of(theirs, "points", peer_name());
      for (uint64_t i = 0; i < n; ++i) {
        plan.push_back(theirs.get("point." + std::to_string(i)));
        if (!known.count(plan.back()) && verdict == "ok")
          verdict = "point " + plan.back() + " is not in rank " + std::to_string(rank()) +
                    "'s points file (give both ranks the same --points)";
      }
    }
    net::Message check;
    check.set("status", verdict);
    exchange("plan-check", check, &theirs, timeout_ms_);
    if (verdict != "ok") fail(verdict);
    if (theirs.get("status") != "ok") fail(peer_name() + " refused the run: " + theirs.get("status"));
    return plan;
  }

  void begin_point(const std::string& point_id) override {
    net::Message mine, theirs;
    mine.set("point_id", point_id);
    exchange("point", mine, &theirs, timeout_ms_);
    if (theirs.get("point_id") != point_id)
      fail(peer_name() + " is at point " + theirs.get("point_id") + ", this rank at " + point_id);
  }

  void end_point(const std::string& failure) override { request(done_request(failure), timeout_ms_); }

  void stop_after_point() override { stopping_ = true; }

  // The "done" request that ends a point (with the stop flag when this is the last point).
  net::Message done_request(const std::string& failure) const {
    net::Message req;
    req.set("what", "done");
    req.set("status", failure.empty() ? "ok" : failure.substr(0, 4000));
    if (stopping_) req.set("stop", "1");
    return req;
  }

  // Rank 0: one request to rank 1 and its answer.
  net::Message request(const net::Message& req, int timeout_ms) {
    net::Message ignored, rep;
    exchange("req", req, &ignored, timeout_ms);
    exchange("rep", net::Message{}, &rep, timeout_ms);
    return rep;
  }

  std::string serve_point(const Options& o) override {
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

  int timeout_ms() const { return timeout_ms_; }
  std::string peer_host() const { return session_ ? session_->peer_host() : launch_.host_of(1 - launch_.rank); }

 private:
  void exchange(const std::string& phase, const net::Message& mine, net::Message* theirs, int timeout_ms) {
    std::string err;
    if (!session_) fail("no session with " + peer_name());
    if (!session_->exchange(phase, mine, theirs, timeout_ms, &err)) fail(err);
  }

  void serve_verbs(const Options& o, const net::Message& req, PeerTarget* t, net::Message* rep) {
#if defined(GICOMM_BENCH_WITH_VERBS)
    const uint64_t qps = u64_of(req, "qps", peer_name());
    const uint64_t bytes = u64_of(req, "bytes", peer_name());
    if (qps == 0 || qps > 256 || bytes > (uint64_t(1) << 32))
      fail("asked for " + std::to_string(qps) + " QPs and " + std::to_string(bytes) +
           " bytes: allowed 1..256 QPs, up to 4 GiB");
    net::Endpoint peer;
    std::string err;
    if (!net::get_endpoint(req, &peer, &err)) fail(peer_name() + " sent a bad " + err);
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
    t->port = o.nic_port;
    t->gid_index = o.gid_index;
    t->before = net::read_all_ports(sysfs_root(), o.gid_index);
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

  void serve_fetch(const net::Message& req, const PeerTarget& t, net::Message* rep) {
    const uint64_t offset = u64_of(req, "offset", peer_name());
    const uint64_t n = u64_of(req, "bytes", peer_name());
    if (n > kFetchPiece || offset > t.buffer.size() * 8 || n > t.buffer.size() * 8 - offset)
      fail("fetch of " + std::to_string(n) + " bytes at " + std::to_string(offset) + " is outside the " +
           std::to_string(t.buffer.size() * 8) + "-byte buffer");
    rep->set("data", hex_of(reinterpret_cast<const uint8_t*>(t.buffer.data()) + offset, n));
  }

  std::string serve_done(const net::Message& req, PeerTarget* t, net::Message* rep) {
    const std::string status = req.get("status");
    if (t->device.empty()) return "no NIC traffic; rank 0: " + status;
    net::TrafficClaim claim;
    claim.rx_packets = u64_of(req, "rx_packets", peer_name());
    claim.rx_bytes = u64_of(req, "rx_bytes", peer_name());
    claim.what = req.get("claim");
    const auto after = net::read_all_ports(sysfs_root(), t->gid_index);
    const net::PathVerdict v = net::check_path(t->device, t->port, t->before, after, claim);
    rep->set("path", net::to_json(v));
    rep->set("path_ok", v.ok ? "yes" : "no");
    rep->set("reason", v.reason);
    rep->set_u64("tx_bytes", configured_delta(v).tx_bytes);
    rep->set_u64("rx_bytes", configured_delta(v).rx_bytes);
    rep->set("nic", net::to_json(net::describe_nic(sysfs_root(), t->device, t->port, t->gid_index)));
#if defined(GICOMM_BENCH_WITH_VERBS)
    t->endpoint.reset();
#endif
    return std::string("path ") + (v.ok ? "ok" : v.reason) + "; rank 0: " + status;
  }

  net::Launch launch_;
  int timeout_ms_;
  bool stopping_ = false;
  std::unique_ptr<net::OobSession> session_;
};

std::unique_ptr<Launcher> make_net_launcher(const std::map<std::string, std::string>& flags, std::string* error) {
  net::LaunchFlags lf;
  int timeout_ms = 60000;
  for (const auto& [key, value] : flags) {
    if (key == "peer-timeout-ms") {
      char* end = nullptr;
      const long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end || v < 100 || v > 86400000) {
        *error = "--peer-timeout-ms " + value + ": allowed: an integer from 100 to 86400000";
        return nullptr;
      }
      timeout_ms = static_cast<int>(v);
      continue;
    }
    if (!net::parse_launch_flag(key, value, &lf, error)) *error = "--" + key + ": not a launch flag";
    if (!error->empty()) return nullptr;
  }
  // Nothing names a rank: one process (resolve_launch would ask for one).
  const net::Env env = net::process_env();
  if (flags.empty() && !env.count("SLURM_PROCID") && !env.count("OMPI_COMM_WORLD_RANK")) return nullptr;
  net::Launch launch;
  if (!net::resolve_launch(lf, env, &launch, error)) return nullptr;
  if (launch.world == 1) return nullptr;
  if (launch.world != 2) {
    *error = "world size " + std::to_string(launch.world) + " (from " + launch.source +
             "): the NIC experiments run on one rank or two";
    return nullptr;
  }
  return std::make_unique<NetLauncher>(launch, timeout_ms);
}

// Registered with the runner when this file is linked in (the transport factory references it).
const bool registered = [] {
  register_launcher_factory(make_net_launcher);
  return true;
}();

// What the workers posted through the path: one packet per MTU-sized piece of each RDMA write
// (one for an inline or zero-length write), and its payload bytes.
struct Traffic {
  std::atomic<uint64_t> messages{0}, packets{0}, bytes{0};
  uint32_t mtu = 1024;
  // mini-gda: the GPU posts; the WQEs its QPs posted since the point began (bytes not known here).
  std::function<uint64_t()> posted_wqes;
  uint64_t wqes_before = 0;
};

class MeteredChannel final : public proxy::Channel {
 public:
  MeteredChannel(std::unique_ptr<proxy::Channel> inner, Traffic* t) : inner_(std::move(inner)), t_(t) {}
  uint32_t room() const override { return inner_->room(); }
  bool post(const proxy::Desc* d, uint32_t n, std::string* error) override {
    if (!inner_->post(d, n, error)) return false;
    uint64_t packets = 0, bytes = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const proxy::Op op = proxy::info_op(d[i].info);
      const uint64_t len = op == proxy::Op::write_inline ? 8 : op == proxy::Op::write ? d[i].value >> 40 : 0;
      bytes += len;
      packets += len == 0 ? 1 : (len + t_->mtu - 1) / t_->mtu;
    }
    t_->messages.fetch_add(n, std::memory_order_relaxed);
    t_->packets.fetch_add(packets, std::memory_order_relaxed);
    t_->bytes.fetch_add(bytes, std::memory_order_relaxed);
    return true;
  }
  int64_t poll(std::string* error) override { return inner_->poll(error); }

 private:
  std::unique_ptr<proxy::Channel> inner_;
  Traffic* t_;
};

class MeteredBackend final : public proxy::Backend {
 public:
  MeteredBackend(std::unique_ptr<proxy::Backend> inner, std::shared_ptr<Traffic> t)
      : inner_(std::move(inner)), t_(std::move(t)) {}
  const char* name() const override { return inner_->name(); }
  std::unique_ptr<proxy::Channel> open(uint32_t worker, std::string* error) override {
    auto c = inner_->open(worker, error);
    return c ? std::make_unique<MeteredChannel>(std::move(c), t_.get()) : nullptr;
  }

 private:
  std::unique_ptr<proxy::Backend> inner_;
  std::shared_ptr<Traffic> t_;
};

// Rank 0's (or the one rank's) side of a point's NIC path.
class VerbsLink final : public PointLink {
 public:
  VerbsLink(NetLauncher* peer, std::string device, int port, int gid_index, std::shared_ptr<Traffic> t)
      : peer_(peer), device_(std::move(device)), port_(port), gid_index_(gid_index), traffic_(std::move(t)) {
    before_ = net::read_all_ports(sysfs_root(), gid_index_);
  }

  void finish(std::vector<Record>* records, const std::string& failure) override {
    const auto after = net::read_all_ports(sysfs_root(), gid_index_);
    net::TrafficClaim claim;
    if (traffic_->posted_wqes) {  // one packet at least per WQE (an RDMA write each)
      const uint64_t wqes = traffic_->posted_wqes() - traffic_->wqes_before;
      traffic_->messages = wqes;
      traffic_->packets = wqes;
    }
    const uint64_t n = traffic_->messages, packets = traffic_->packets, bytes = traffic_->bytes;
    claim.what = std::to_string(n) + " RDMA writes (" + std::to_string(bytes) + " B) " +
                 (peer_ ? "sent" : "sent and received on one port");
    claim.tx_packets = packets;
    claim.tx_bytes = bytes;
    if (!peer_) {  // loopback: the same port sends and receives
      claim.rx_packets = packets;
      claim.rx_bytes = bytes;
    }
    const net::PathVerdict mine = net::check_path(device_, port_, before_, after, claim);
    std::string verdict = mine.ok ? "ok" : "failed", reason = mine.reason;
    std::string peer_tx = "null", peer_rx = "null", peer_json;
    if (peer_) {
      net::Message req = peer_->done_request(failure);
      req.set_u64("rx_packets", packets);
      req.set_u64("rx_bytes", bytes);
      req.set("claim", std::to_string(n) + " RDMA writes (" + std::to_string(bytes) + " B) received");
      const net::Message rep = peer_->request(req, peer_->timeout_ms());
      if (rep.get("status") != "ok") {
        verdict = "failed";
        if (reason.empty()) reason = peer_->peer_name() + ": " + rep.get("status");
      } else {
        peer_tx = std::to_string(u64_of(rep, "tx_bytes", peer_->peer_name()));
        peer_rx = std::to_string(u64_of(rep, "rx_bytes", peer_->peer_name()));
        if (rep.get("path_ok") != "yes") {
          verdict = "failed";
          if (reason.empty()) reason = peer_->peer_name() + ": " + rep.get("reason");
        }
        peer_json = "{\"rank\":" + std::to_string(1 - peer_->rank()) + ",\"host\":" +
                    net::json_string(peer_host_) + ",\"nic\":" + (rep.get("nic").empty() ? "null" : rep.get("nic")) +
                    ",\"path\":" + rep.get("path") + "}";
      }
    }
    const net::PortDelta& d = configured_delta(mine);
    const std::string json = "{\"device\":" + net::json_string(device_) + ",\"port\":" + std::to_string(port_) +
                             ",\"verdict\":\"" + verdict + "\",\"expected_bytes\":" + std::to_string(bytes) +
                             ",\"expected_packets\":" + std::to_string(packets) +
                             ",\"tx_bytes\":" + std::to_string(d.tx_bytes) + ",\"rx_bytes\":" +
                             std::to_string(d.rx_bytes) + ",\"peer_tx_bytes\":" + peer_tx +
                             ",\"peer_rx_bytes\":" + peer_rx + ",\"reason\":" + net::json_string(reason) +
                             ",\"nic\":" + nic_json_ + ",\"local\":" + net::to_json(mine) + "}";
    for (Record& r : *records) {
      r.path_check = json;
      r.peer = peer_json;
      // A point whose traffic is not proven to have crossed the configured port is never ok.
      if (verdict != "ok" && r.status == "ok") {
        r.status = "failed";
        r.error = "path check: " + reason;
      }
    }
  }

  std::string nic_json_ = "null", peer_host_;

 private:
  NetLauncher* peer_;
  std::string device_;
  int port_, gid_index_;
  std::shared_ptr<Traffic> traffic_;
  std::vector<net::PortTraffic> before_;
};

NetLauncher* net_launcher() { return dynamic_cast<NetLauncher*>(launcher()); }

}  // namespace

bool two_ranks() { return registered && launcher() != nullptr; }

std::unique_ptr<proxy::Backend> open_verbs_path(Run& run, uint32_t qps, void* remote, size_t remote_bytes,
                                                void* local, size_t local_bytes) {
#if defined(GICOMM_BENCH_WITH_VERBS)
  const Options& o = run.options;
  NetLauncher* peer = net_launcher();
  if (!peer && o.topology != "loopback")
    throw HardwareMissing(
        "nic_backend verbs on one rank: launch two ranks (--rank R --world-size 2, srun -n2 or mpirun -np 2), or pass "
        "--topology loopback to connect each QP to a second one on the same device");
  verbs::VerbsConfig vc;
  vc.device = o.nic_device;
  // Tests only: the QPs on another device than the configured one, which the path proof must catch.
  if (const char* wrong = std::getenv("GICOMM_TEST_TRAFFIC_DEVICE"); wrong && *wrong) vc.device = wrong;
  vc.port = o.nic_port;
  vc.gid_index = o.gid_index;
  vc.local = local;
  vc.local_bytes = local_bytes;
  auto traffic = std::make_shared<Traffic>();
  std::string err;
  if (!peer) {
    vc.remote = remote;
    vc.remote_bytes = remote_bytes;
    auto be = verbs::make_verbs_backend(vc, &err);
    if (!be) throw HardwareMissing(err);
    int ndev = 0;
    const std::string devices = verbs::describe_devices(&ndev);
    std::string device = o.nic_device;
    if (device.empty()) device = devices.substr(0, devices.find_first_of(" ,:\n"));
    auto link = std::make_unique<VerbsLink>(nullptr, device, o.nic_port, o.gid_index, traffic);
    link->nic_json_ = net::to_json(net::describe_nic(sysfs_root(), device, o.nic_port, o.gid_index));
    run.link = std::move(link);
    run.topology = "loopback";
    return std::make_unique<MeteredBackend>(std::move(be), traffic);
  }
  // A device that cannot be opened ends the point here; the runner still ends the peer's side.
  auto ep = verbs::VerbsEndpoint::open(vc, qps, &err);
  net::Message req;
  req.set("what", "verbs");
  req.set_u64("qps", qps);
  req.set_u64("bytes", remote_bytes);
  if (!ep) throw HardwareMissing(err);
  net::put_endpoint(ep->local(), &req);
  const net::Message rep = peer->request(req, peer->timeout_ms());
  if (rep.get("status") != "ok") throw PointFailure(peer->peer_name() + ": " + rep.get("status"));
  net::Endpoint theirs;
  if (!net::get_endpoint(rep, &theirs, &err)) throw PointFailure(peer->peer_name() + " sent a bad " + err);
  if (!ep->connect(theirs, &err)) throw PointFailure(err);
  traffic->mtu = std::min(ep->local().mtu, theirs.mtu);
  const std::string device = o.nic_device.empty() ? ep->local().device : o.nic_device;
  auto link = std::make_unique<VerbsLink>(peer, device, o.nic_port, o.gid_index, traffic);
  link->nic_json_ = net::to_json(net::describe_nic(sysfs_root(), device, o.nic_port, o.gid_index));
  link->peer_host_ = peer->peer_host();
  auto be = ep->backend(&err);
  if (!be) throw PointFailure(err);
  run.link = std::move(link);
  run.topology = "two-rank";
  return std::make_unique<MeteredBackend>(std::move(be), traffic);
#else
  (void)run, (void)qps, (void)remote, (void)remote_bytes, (void)local, (void)local_bytes;
  throw HardwareMissing("verbs: this build has no rdma-core (libibverbs headers were not found at configure time)");
#endif
}

void require_gda_topology(Run& run) {
  if (two_ranks()) {
    run.topology = "two-rank";
  } else if (run.options.topology == "loopback") {
    run.topology = "loopback";
  } else {
    throw HardwareMissing(
        "nic_backend mlx5 on one rank: launch two ranks (--rank R --world-size 2, srun -n2 or mpirun -np 2), or pass "
        "--topology loopback to connect each QP to itself");
  }
}

GdaConnector gda_peer_connector(Run& run, size_t dst_bytes, std::shared_ptr<PeerBuffer> peer_buffer) {
  NetLauncher* peer = net_launcher();
  if (!peer) return nullptr;
  const Options* o = &run.options;
  return [peer, o, dst_bytes, peer_buffer](const std::vector<gda::PeerQp>& mine, std::vector<gda::PeerQp>* theirs,
                                           uint32_t* mtu, std::string* error) {
    net::Endpoint ep;
    ep.device = o->nic_device.empty() ? "mlx5" : o->nic_device;
    ep.port = o->nic_port;
    ep.gid_index = o->gid_index;
    ep.mtu = 4096;  // the peer connects at the smaller of its port's and this
    if (!mine.empty()) {
      ep.lid = mine[0].lid;
      std::copy(std::begin(mine[0].gid), std::end(mine[0].gid), ep.gid.begin());
      ep.roce = mine[0].roce;
    }
    for (const auto& q : mine) ep.qps.push_back({q.qpn, 0});  // DEVX QPs start at PSN 0
    net::Message req;
    req.set("what", "verbs");
    req.set_u64("qps", mine.size());
    req.set_u64("bytes", dst_bytes);
    req.set("zero_psn", "1");
    net::put_endpoint(ep, &req);
    net::Message rep;
    try {
      rep = peer->request(req, peer->timeout_ms());
    } catch (const std::exception& e) {
      *error = e.what();
      return false;
    }
    net::Endpoint other;
    if (rep.get("status") != "ok") {
      *error = peer->peer_name() + ": " + rep.get("status");
      return false;
    }
    if (!net::get_endpoint(rep, &other, error)) return false;
    theirs->clear();
    for (const auto& q : other.qps) {
      gda::PeerQp p;
      p.qpn = q.qpn;
      p.lid = other.lid;
      std::copy(other.gid.begin(), other.gid.end(), p.gid);
      p.roce = other.roce;
      theirs->push_back(p);
    }
    *mtu = other.mtu;
    peer_buffer->addr = other.buffer_addr;
    peer_buffer->rkey = other.rkey;
    return true;
  };
}

void attach_gda_link(Run& run, std::function<uint64_t()> posted_wqes) {
  auto traffic = std::make_shared<Traffic>();
  traffic->wqes_before = posted_wqes();
  traffic->posted_wqes = std::move(posted_wqes);
  const Options& o = run.options;
  // The configured device, else the first one (what DevxDevice::open("") takes).
  std::string device = o.nic_device;
  if (device.empty()) {
    const auto ports = net::read_all_ports(sysfs_root(), o.gid_index);
    if (!ports.empty()) device = ports.front().device;
  }
  NetLauncher* peer = net_launcher();
  auto link = std::make_unique<VerbsLink>(peer, device, o.nic_port, o.gid_index, traffic);
  link->nic_json_ = net::to_json(net::describe_nic(sysfs_root(), device, o.nic_port, o.gid_index));
  if (peer) link->peer_host_ = peer->peer_host();
  run.link = std::move(link);
}

void fetch_peer_buffer(Run& run, void* remote, size_t bytes) {
  NetLauncher* peer = net_launcher();
  if (!peer || !run.link) return;
  for (size_t off = 0; off < bytes; off += kFetchPiece) {
    const size_t n = std::min(kFetchPiece, bytes - off);
    net::Message req;
    req.set("what", "fetch");
    req.set_u64("offset", off);
    req.set_u64("bytes", n);
    const net::Message rep = peer->request(req, peer->timeout_ms());
    if (rep.get("status") != "ok") throw PointFailure(peer->peer_name() + ": " + rep.get("status"));
    if (!bytes_of(rep.get("data"), static_cast<uint8_t*>(remote) + off, n))
      throw PointFailure(peer->peer_name() + " sent a bad piece of its buffer at byte " + std::to_string(off));
  }
}

}  // namespace gicomm::bench
