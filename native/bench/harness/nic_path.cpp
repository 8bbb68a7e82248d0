// The NIC path of a point (two_rank.h): mini-proxy's verbs backend and mini-gda's DEVX QPs to the
// peer rank's QPs or looped back, the traffic they post, and the path proof and peer provenance
// added to the point's records.
#include <atomic>
#include <functional>
#include <map>

#include "harness/net_launcher.h"
#include "harness/record.h"
#include "harness/two_rank.h"

namespace gicomm::bench {

namespace {

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

std::map<std::string, ServeFn>& responders() {
  static std::map<std::string, ServeFn> r;
  return r;
}

// Rank 0's (or the one rank's) side of a point's NIC path.
class VerbsLink final : public PointLink {
 public:
  VerbsLink(NetLauncher* peer, std::string device, int port, int gid_index, std::shared_ptr<Traffic> t)
      : peer_(peer), device_(std::move(device)), port_(port), gid_index_(gid_index), traffic_(std::move(t)) {
    before_ = net::read_all_ports(sysfs_root(), gid_index_);
  }

  void finish(std::vector<Record>* records, const std::string& failure) override {
    const auto after = net::read_all_ports(sysfs_root(), gid_index_);
    if (traffic_->posted_wqes) {  // one packet at least per WQE (an RDMA write each)
      const uint64_t wqes = traffic_->posted_wqes() - traffic_->wqes_before + traffic_->wqes_carried;
      traffic_->messages = wqes;
      traffic_->packets = wqes;
    }
    const uint64_t n = traffic_->messages, packets = traffic_->packets, bytes = traffic_->bytes;
    net::TrafficClaim claim;
    claim.what = std::to_string(n) + " RDMA writes (" + std::to_string(bytes) + " B) " +
                 (peer_ ? "sent" : "sent and received on one port");
    claim.tx_packets = packets;
    claim.tx_bytes = bytes;
    if (!peer_) {  // loopback: the same port sends and receives
      claim.rx_packets = packets;
      claim.rx_bytes = bytes;
    }
    std::string verdict = "ok", reason, responder;
    bool responder_failed = false;
    std::string peer_tx = "null", peer_rx = "null", peer_json;
    if (peer_) {
      net::Message req = peer_->done_request(failure);
      req.set_u64("rx_packets", packets);
      req.set_u64("rx_bytes", bytes);
      req.set("claim", std::to_string(n) + " RDMA writes (" + std::to_string(bytes) + " B) received");
      const net::Message rep = peer_->request(req, peer_->timeout_ms());
      if (rep.get("status") != "ok") {
        verdict = "failed";
        reason = peer_->peer_name() + ": " + rep.get("status");
      } else {
        peer_tx = std::to_string(u64_of(rep, "tx_bytes", peer_->peer_name()));
        peer_rx = std::to_string(u64_of(rep, "rx_bytes", peer_->peer_name()));
        if (rep.get("path_ok") != "yes") {
          verdict = "failed";
          reason = peer_->peer_name() + ": " + rep.get("reason");
        }
        peer_json = net::peer_json(1 - peer_->rank(), peer_host_, rep.get("nic"), rep.get("path"));
        if (rep.has("responder")) {  // a round trip: the answers crossed back, received here
          const uint64_t answers = u64_of(rep, "responder_answers", peer_->peer_name());
          claim.rx_packets = u64_of(rep, "responder_tx_packets", peer_->peer_name());
          claim.rx_bytes = u64_of(rep, "responder_tx_bytes", peer_->peer_name());
          claim.what += ", " + std::to_string(answers) + " answers (" + std::to_string(claim.rx_bytes) +
                        " B) received from " + peer_->peer_name() + "'s responder";
          responder_failed = rep.get("responder") != "ok";
          responder = peer_->peer_name() + "'s responder " + rep.get("responder_state");
        }
      }
    }
    const net::PathVerdict mine = net::check_path(device_, port_, before_, after, claim);
    if (!mine.ok) {
      verdict = "failed";
      reason = mine.reason + (reason.empty() ? "" : "; " + reason);
    }
    net::PathCheckFields f;
    f.ok = verdict == "ok";
    f.reason = reason;
    f.peer_tx_bytes = peer_tx;
    f.peer_rx_bytes = peer_rx;
    f.nic_json = nic_json_;
    const std::string json = net::path_check_json(mine, f);
    for (Record& r : *records) {
      r.path_check = json;
      r.peer = peer_json;
      // A point whose traffic is not proven to have crossed the configured port is never ok; a
      // round trip whose responder failed neither, and a failed one says what the responder saw.
      if (responder_failed && r.status == "ok") {
        r.status = "failed";
        r.error = responder;
      } else if (!responder.empty() && r.status != "ok") {
        r.error += "; " + responder;
      }
      if (verdict != "ok" && r.status == "ok") {
        r.status = "failed";
        r.error = "path check: " + reason;
      }
    }
  }

  // A later mini-gda session of the same point (one_op: the one-op part, then the round trip):
  // one claim over both, against the counters read when the first began.
  void continue_from(const VerbsLink& prev) {
    before_ = prev.before_;
    const Traffic& p = *prev.traffic_;
    if (p.posted_wqes) traffic_->wqes_carried = p.posted_wqes() - p.wqes_before + p.wqes_carried;
  }

  std::string nic_json_ = "null", peer_host_;
  uint64_t offered_addr_ = 0;  // two ranks, verbs: this rank's buffer as offered to the peer
  uint32_t offered_rkey_ = 0;

 private:
  NetLauncher* peer_;
  std::string device_;
  int port_, gid_index_;
  std::shared_ptr<Traffic> traffic_;
  std::vector<net::PortTraffic> before_;
};

// The first device rdma-core lists (what a backend opens when no device is named).
std::string first_listed_device() {
  int ndev = 0;
  const std::string devices = verbs::describe_devices(&ndev);
  return devices.substr(0, devices.find_first_of(" ,:\n"));
}

}  // namespace

std::unique_ptr<proxy::Backend> metered(std::unique_ptr<proxy::Backend> inner, std::shared_ptr<Traffic> traffic) {
  return std::make_unique<MeteredBackend>(std::move(inner), std::move(traffic));
}

ServeRegistration::ServeRegistration(const char* name, ServeFn fn) { responders()[name] = std::move(fn); }

ServeFn find_responder(const std::string& experiment) {
  const auto it = responders().find(experiment);
  return it == responders().end() ? nullptr : it->second;
}

void start_peer_responder(Run& run, const net::Message& params) {
  NetLauncher* peer = net_launcher();
  if (!peer || !run.link) throw PointFailure("a peer responder needs two ranks and the point's QPs connected to them");
  net::Message req = params;
  req.set("what", "respond");
  const net::Message rep = peer->request(req, peer->timeout_ms());
  if (rep.get("status") != "ok") throw PointFailure(peer->peer_name() + ": " + rep.get("status"));
}

bool two_ranks() { return net_launcher() != nullptr; }

void refuse_two_ranks(const Run& run, const std::string& what, const std::string& missing) {
  if (!two_ranks()) return;
  throw PointFailure("bad parameter: " + what + " (experiment " + run.spec.name +
                     ") does not run between two ranks: it needs " + missing +
                     "; run it in one process");
}

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
    const std::string device = o.nic_device.empty() ? first_listed_device() : o.nic_device;
    auto link = std::make_unique<VerbsLink>(nullptr, device, o.nic_port, o.gid_index, traffic);
    link->nic_json_ = net::to_json(net::describe_nic(sysfs_root(), device, o.nic_port, o.gid_index));
    run.link = std::move(link);
    run.topology = "loopback";
    return metered(std::move(be), traffic);
  }
  // Rank 0's destination is offered to the peer too: a round trip's answers land there.
  vc.remote = remote;
  vc.remote_bytes = remote_bytes;
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
  link->offered_addr_ = ep->local().buffer_addr;
  link->offered_rkey_ = ep->local().rkey;
  auto be = ep->backend(&err);
  if (!be) throw PointFailure(err);
  run.link = std::move(link);
  run.topology = "two-rank";
  return metered(std::move(be), traffic);
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
  if (device.empty()) device = first_listed_device();  // no sysfs view of the devices
  NetLauncher* peer = net_launcher();
  auto link = std::make_unique<VerbsLink>(peer, device, o.nic_port, o.gid_index, traffic);
  link->nic_json_ = net::to_json(net::describe_nic(sysfs_root(), device, o.nic_port, o.gid_index));
  if (peer) link->peer_host_ = peer->peer_host();
  if (const auto* prev = dynamic_cast<const VerbsLink*>(run.link.get())) link->continue_from(*prev);
  run.link = std::move(link);
}

bool offered_buffer(const Run& run, uint64_t* addr, uint32_t* rkey) {
  const auto* link = dynamic_cast<const VerbsLink*>(run.link.get());
  if (!link || !link->offered_addr_) return false;
  *addr = link->offered_addr_;
  *rkey = link->offered_rkey_;
  return true;
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
