// See path_proof.h.
#include "support/path_proof.h"

#include <cstdlib>
#include <cstring>

namespace gicomm::baselines {

namespace {

std::string env_of(const std::map<std::string, std::string>& env, const std::string& key) {
  const auto it = env.find(key);
  return it == env.end() ? "" : it->second;
}

bool begins_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

std::string num(uint64_t v) { return std::to_string(v); }

std::string number_or_null(const net::PortDelta& d, uint64_t v) { return d.valid ? num(v) : "null"; }

}  // namespace

HcaChoice choose_nvshmem_hca(const std::vector<std::string>& listed, const std::map<std::string, std::string>& env) {
  HcaChoice c;
  const std::string list = env_of(env, "NVSHMEM_HCA_LIST");
  const std::string prefix_set = env_of(env, "NVSHMEM_HCA_PREFIX");
  const std::string prefix = prefix_set.empty() ? "mlx5" : prefix_set;
  const std::string prefix_text =
      "NVSHMEM_HCA_PREFIX " + prefix + (prefix_set.empty() ? " (NVSHMEM's default)" : "");
  if (listed.empty()) {
    c.error = "rdma-core lists no RDMA device";
    return c;
  }
  if (list.empty()) {
    for (const std::string& dev : listed) {
      if (!begins_with(dev, prefix)) continue;
      c.device = dev;
      c.pin = dev + ":1";
      c.why = "the first device rdma-core lists whose name begins with " + prefix_text +
              ", port 1; NVSHMEM_HCA_LIST=" + c.pin + " set so that NVSHMEM uses it";
      return c;
    }
    c.error = "no device rdma-core lists (" + joined(listed) + ") begins with " + prefix_text;
    return c;
  }
  std::string body = list;
  const bool exclude = body[0] == '^';
  if (exclude) body.erase(0, 1);
  const bool exact = !body.empty() && body[0] == '=';
  if (exact) body.erase(0, 1);
  struct Entry {
    std::string name;
    int port;
  };
  std::vector<Entry> entries;
  for (size_t start = 0; start <= body.size();) {
    const size_t comma = std::min(body.find(',', start), body.size());
    const std::string item = body.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    Entry e{item.substr(0, colon), 1};
    if (colon != std::string::npos) {
      const std::string p = item.substr(colon + 1);
      char* end = nullptr;
      const long v = std::strtol(p.c_str(), &end, 10);
      if (p.empty() || *end != '\0' || v < 1 || v > 255) {
        c.error = "NVSHMEM_HCA_LIST " + list + ": entry '" + item + "' has port '" + p +
                  "' (allowed: NAME or NAME:PORT with PORT from 1 to 255)";
        return c;
      }
      e.port = static_cast<int>(v);
    }
    entries.push_back(e);
  }
  auto matches = [exact](const std::string& dev, const std::string& name) {
    return exact ? dev == name : begins_with(dev, name);
  };
  if (!exclude) {
    for (const Entry& e : entries)
      for (const std::string& dev : listed)
        if (matches(dev, e.name)) {
          c.device = dev;
          c.port = e.port;
          c.why = "NVSHMEM_HCA_LIST " + list + ": its first entry that names a device rdma-core lists";
          return c;
        }
    c.error = "NVSHMEM_HCA_LIST " + list + " names no device rdma-core lists (" + joined(listed) + ")";
    return c;
  }
  for (const std::string& dev : listed) {
    if (!begins_with(dev, prefix)) continue;
    bool excluded = false;
    for (const Entry& e : entries) excluded = excluded || matches(dev, e.name);
    if (excluded) continue;
    c.device = dev;
    c.why = "the first device rdma-core lists whose name begins with " + prefix_text + " and that NVSHMEM_HCA_LIST " +
            list + " does not exclude, port 1";
    return c;
  }
  c.error = "NVSHMEM_HCA_LIST " + list + " excludes every device rdma-core lists that begins with " + prefix_text +
            " (" + joined(listed) + ")";
  return c;
}

PointTraffic dissect_traffic(const DissectOps& o) {
  PointTraffic t;
  const uint64_t trips = o.warmup + o.iters;
  const std::string size = num(o.bytes) + " B";
  if (o.local_ran) {
    const uint64_t issue = trips, rate = (o.reps + 1) * o.batch;
    t.initiator_ops = issue + rate + o.caller_sends;
    t.initiator_bytes = (issue + rate) * o.bytes + o.caller_sends * 8;
    t.initiator_what = num(issue) + " issue + " + num(rate) + " rate ops of " + size + ", " + num(o.caller_sends) +
                       " caller puts of 8 B";
  }
  if (o.rtt_ran) {
    t.initiator_ops += trips;
    t.initiator_bytes += trips * o.bytes;
    t.initiator_what += (t.initiator_what.empty() ? "" : ", ") + num(trips) + " pings of " + size;
    t.responder_ops = trips;
    t.responder_bytes = trips * o.bytes;
    t.responder_what = num(trips) + " echoes of " + size;
  }
  return t;
}

net::TrafficClaim claim_of(const PointTraffic& t, int rank) {
  net::TrafficClaim c;
  const bool initiator = rank == 0;
  c.tx_packets = initiator ? t.initiator_ops : t.responder_ops;
  c.tx_bytes = initiator ? t.initiator_bytes : t.responder_bytes;
  c.rx_packets = initiator ? t.responder_ops : t.initiator_ops;
  c.rx_bytes = initiator ? t.responder_bytes : t.initiator_bytes;
  const std::string& sent = initiator ? t.initiator_what : t.responder_what;
  const std::string& got = initiator ? t.responder_what : t.initiator_what;
  c.what = (sent.empty() ? "nothing" : sent) + " sent (" + num(c.tx_bytes) + " B), " + (got.empty() ? "nothing" : got) +
           " received (" + num(c.rx_bytes) + " B)";
  return c;
}

void PortWatch::begin() { before_ = net::read_all_ports(root_); }

net::PathVerdict PortWatch::end(const net::TrafficClaim& claim) const {
  return net::check_path(device_, port_, before_, net::read_all_ports(root_), claim);
}

net::Message movement_message(const net::PathVerdict& v, const std::string& host, const std::string& nic_json) {
  net::Message m;
  m.set("device", v.device);
  m.set_u64("port", static_cast<uint64_t>(v.port));
  m.set("host", host);
  m.set("nic", nic_json);
  m.set_u64("ports", v.deltas.size());
  for (size_t i = 0; i < v.deltas.size(); ++i) {
    const net::PortDelta& d = v.deltas[i];
    const std::string k = "p" + std::to_string(i) + ".";
    m.set(k + "device", d.device);
    m.set_u64(k + "port", static_cast<uint64_t>(d.port));
    m.set(k + "valid", d.valid ? "1" : "0");
    m.set(k + "error", d.error);
    m.set(k + "has_bytes", d.has_bytes ? "1" : "0");
    m.set_u64(k + "tx_packets", d.tx_packets);
    m.set_u64(k + "rx_packets", d.rx_packets);
    m.set_u64(k + "tx_bytes", d.tx_bytes);
    m.set_u64(k + "rx_bytes", d.rx_bytes);
  }
  return m;
}

bool read_movement(const net::Message& m, PeerMovement* out, std::string* error) {
  *out = PeerMovement{};
  uint64_t ports = 0, port = 0;
  if (!m.get_u64("port", 255, &port, error) || !m.get_u64("ports", 4096, &ports, error)) return false;
  out->device = m.get("device");
  out->port = static_cast<int>(port);
  out->host = m.get("host");
  out->nic_json = m.get("nic");
  if (out->device.empty()) {
    *error = "no device in the counter movement";
    return false;
  }
  for (uint64_t i = 0; i < ports; ++i) {
    const std::string k = "p" + std::to_string(i) + ".";
    net::PortTraffic before, after;
    uint64_t p = 0;
    if (!m.get_u64(k + "port", 255, &p, error)) return false;
    before.device = after.device = m.get(k + "device");
    before.port = after.port = static_cast<int>(p);
    before.readable = after.readable = m.get(k + "valid") == "1";
    before.error = after.error = m.get(k + "error");
    before.has_bytes = after.has_bytes = m.get(k + "has_bytes") == "1";
    for (auto [key, field] : {std::pair{"tx_packets", &after.tx_packets}, std::pair{"rx_packets", &after.rx_packets},
                              std::pair{"tx_bytes", &after.tx_bytes}, std::pair{"rx_bytes", &after.rx_bytes}})
      if (!m.get_u64(k + key, ~0ull, field, error)) return false;
    out->before.push_back(before);
    out->after.push_back(after);
  }
  return true;
}

PathFields path_fields(const net::PathVerdict& mine, const std::string& nic_json, const std::string& choice_why,
                       const PeerMovement* peer, const net::TrafficClaim& peer_claim, const std::string& peer_error) {
  PathFields f;
  f.ok = mine.ok;
  f.reason = mine.reason;
  std::string peer_tx = "null", peer_rx = "null", peer_path;
  if (peer && peer_error.empty()) {
    const net::PathVerdict theirs = net::check_path(peer->device, peer->port, peer->before, peer->after, peer_claim);
    const net::PortDelta& d = theirs.deltas.front();
    peer_tx = number_or_null(d, d.tx_bytes);
    peer_rx = number_or_null(d, d.rx_bytes);
    peer_path = net::to_json(theirs);
    if (!theirs.ok) {
      f.ok = false;
      f.reason += (f.reason.empty() ? "" : "; ") + std::string("rank 1: ") + theirs.reason;
    }
  } else {
    f.ok = false;
    const std::string why = peer_error.empty() ? "rank 1 sent no counter movement" : peer_error;
    f.reason += (f.reason.empty() ? "" : "; ") + std::string("rank 1: ") + why;
    peer_path = "{\"ok\":false,\"reason\":" + net::json_string(why) + "}";
  }
  net::PathCheckFields json;
  json.ok = f.ok;
  json.reason = f.reason;
  json.peer_tx_bytes = peer_tx;
  json.peer_rx_bytes = peer_rx;
  json.nic_json = nic_json;
  json.device_choice = choice_why;
  f.path_check = net::path_check_json(mine, json);
  f.peer = net::peer_json(1, peer ? peer->host : "", peer ? peer->nic_json : "", peer_path);
  return f;
}

void apply_path_fields(const PathFields& f, std::vector<gicomm::bench::Record>* records) {
  for (gicomm::bench::Record& r : *records) {
    r.path_check = f.path_check;
    r.peer = f.peer;
    if (!f.ok && r.status == "ok") {
      r.status = "failed";
      r.error = "path check: " + f.reason;
    }
  }
}

RankPathProof::RankPathProof(const RankContext& ctx, const std::string& root, const HcaChoice& nic, int gid_index)
    : ctx_(ctx), watch_(root, nic.device, nic.port), why_(nic.why) {
  nic_json_ = net::to_json(net::describe_nic(root, nic.device, nic.port, gid_index));
}

void RankPathProof::begin(const gicomm::bench::Point&) { watch_.begin(); }

void RankPathProof::end(const gicomm::bench::Point&, const DissectOps& ops, std::vector<gicomm::bench::Record>* records) {
  const std::string blob = "path1." + std::to_string(points_++);
  std::vector<char> text(16384, '\0');
  if (ctx_.rank != 0) {
    const net::PathVerdict v = watch_.end(net::TrafficClaim{});
    const std::string m = movement_message(v, net::this_host(), nic_json_).encode("path");
    std::strncpy(text.data(), m.c_str(), text.size() - 1);
    publish_blob(ctx_, blob, text.data(), text.size());
    return;
  }
  const PointTraffic t = dissect_traffic(ops);
  const net::PathVerdict mine = watch_.end(claim_of(t, 0));
  PeerMovement peer;
  std::string peer_error;
  try {
    fetch_blob(ctx_, blob, text.data(), text.size(), kPeerWaitMs);
    net::Message m;
    std::string phase;
    int version = 0;
    if (!net::Message::decode(std::string(text.data()), &m, &phase, &version, &peer_error) ||
        !read_movement(m, &peer, &peer_error))
      peer_error = "its counter movement is unreadable: " + peer_error;
  } catch (const std::exception& e) {
    peer_error = e.what();
  }
  apply_path_fields(path_fields(mine, nic_json_, why_, peer_error.empty() ? &peer : nullptr, claim_of(t, 1), peer_error),
                    records);
}

}  // namespace gicomm::baselines
