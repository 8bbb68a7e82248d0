// Port counters, path proof and NIC provenance from sysfs (see gicomm/net/counters.h).
#include "gicomm/net/counters.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gicomm/net/launcher.h"

namespace gicomm::net {
namespace {

std::string ib_dir(const std::string& sysfs) { return sysfs + "/class/infiniband"; }

bool read_text(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::getline(f, *out);
  while (!out->empty() && (out->back() == '\n' || out->back() == ' ' || out->back() == '\r')) out->pop_back();
  return true;
}

std::string text_or_empty(const std::string& path) {
  std::string s;
  return read_text(path, &s) ? s : "";
}

bool read_u64(const std::string& path, uint64_t* out, std::string* error) {
  std::string s;
  if (!read_text(path, &s)) {
    *error = "cannot read " + path;
    return false;
  }
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || errno || *end != '\0') {
    *error = path + " holds '" + s + "', not a counter";
    return false;
  }
  *out = v;
  return true;
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(path.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string port_label(const std::string& dev, int port) { return dev + " port " + std::to_string(port); }

std::string num(uint64_t v) { return std::to_string(v); }

// "1000 tx packets, 8000 tx bytes"
std::string moved_text(const PortDelta& d, bool tx) {
  std::string s = num(tx ? d.tx_packets : d.rx_packets) + (tx ? " tx" : " rx") + " packets";
  if (d.has_bytes) s += " and " + num(tx ? d.tx_bytes : d.rx_bytes) + (tx ? " tx" : " rx") + " bytes";
  return s;
}

// Empty when `d` carries the claim; else what falls short.
std::string shortfall(const PortDelta& d, const TrafficClaim& c) {
  std::string s;
  auto add = [&](const char* what, uint64_t moved, uint64_t need) {
    if (moved < need) s += (s.empty() ? "" : ", ") + num(moved) + " " + what + " (claimed at least " + num(need) + ")";
  };
  add("tx packets", d.tx_packets, c.tx_packets);
  add("rx packets", d.rx_packets, c.rx_packets);
  if (d.has_bytes) {
    add("tx bytes", d.tx_bytes, c.tx_bytes);
    add("rx bytes", d.rx_bytes, c.rx_bytes);
  }
  return s;
}

}  // namespace

PortTraffic read_port(const std::string& sysfs, const std::string& device, int port, int gid_index) {
  PortTraffic t;
  t.device = device;
  t.port = port;
  const std::string dir = ib_dir(sysfs) + "/" + device + "/ports/" + std::to_string(port);
  std::string error;
  uint64_t words_tx = 0, words_rx = 0;
  if (read_u64(dir + "/counters/port_xmit_packets", &t.tx_packets, &error)) {
    if (!read_u64(dir + "/counters/port_rcv_packets", &t.rx_packets, &error)) {
      t.error = error;
      return t;
    }
    t.source = "counters/port_{xmit,rcv}_{packets,data}";
    t.has_bytes = read_u64(dir + "/counters/port_xmit_data", &words_tx, &error) &&
                  read_u64(dir + "/counters/port_rcv_data", &words_rx, &error);
    t.tx_bytes = words_tx * 4;  // the data counters count 4-byte words
    t.rx_bytes = words_rx * 4;
    t.readable = true;
    return t;
  }
  if (read_u64(dir + "/hw_counters/sent_pkts", &t.tx_packets, &error) &&
      read_u64(dir + "/hw_counters/rcvd_pkts", &t.rx_packets, &error)) {
    t.source = "hw_counters/{sent,rcvd}_pkts";
    const std::string netdev = text_or_empty(dir + "/gid_attrs/ndevs/" + std::to_string(gid_index));
    if (!netdev.empty()) {
      const std::string stats = sysfs + "/class/net/" + netdev + "/statistics/";
      t.has_bytes = read_u64(stats + "tx_bytes", &t.tx_bytes, &error) && read_u64(stats + "rx_bytes", &t.rx_bytes, &error);
      if (t.has_bytes) t.source += " + net/" + netdev + "/statistics/{tx,rx}_bytes";
    }
    t.readable = true;
    return t;
  }
  t.error = list_dir(dir).empty() ? "no such port: " + dir
                                  : "no packet counters under " + dir + " (neither counters/port_xmit_packets nor "
                                                                        "hw_counters/sent_pkts)";
  return t;
}

std::vector<PortTraffic> read_all_ports(const std::string& sysfs, int gid_index) {
  std::vector<PortTraffic> all;
  for (const auto& dev : list_dir(ib_dir(sysfs)))
    for (const auto& p : list_dir(ib_dir(sysfs) + "/" + dev + "/ports")) {
      char* end = nullptr;
      const long n = std::strtol(p.c_str(), &end, 10);
      if (*end == '\0' && n > 0) all.push_back(read_port(sysfs, dev, static_cast<int>(n), gid_index));
    }
  std::sort(all.begin(), all.end(), [](const PortTraffic& a, const PortTraffic& b) {
    return a.device != b.device ? a.device < b.device : a.port < b.port;
  });
  return all;
}

TrafficClaim rdma_write_claim(bool sender, uint64_t messages, uint64_t bytes, uint32_t mtu) {
  TrafficClaim c;
  const uint64_t per = mtu ? std::max<uint64_t>(1, (bytes + mtu - 1) / mtu) : 1;
  (sender ? c.tx_packets : c.rx_packets) = messages * per;
  (sender ? c.tx_bytes : c.rx_bytes) = messages * bytes;
  c.what = num(messages) + " RDMA writes of " + num(bytes) + " B " + (sender ? "sent" : "received");
  return c;
}

PathVerdict check_path(const std::string& device, int port, const std::vector<PortTraffic>& before,
                       const std::vector<PortTraffic>& after, const TrafficClaim& claim) {
  PathVerdict v;
  v.device = device;
  v.port = port;
  v.claim = claim;
  auto find = [](const std::vector<PortTraffic>& list, const std::string& d, int p) -> const PortTraffic* {
    for (const auto& t : list)
      if (t.device == d && t.port == p) return &t;
    return nullptr;
  };
  auto delta = [&](const PortTraffic& a) {
    PortDelta d;
    d.device = a.device;
    d.port = a.port;
    const PortTraffic* b = find(before, a.device, a.port);
    if (!b || !b->readable || !a.readable) {
      d.error = !b ? "not read before the point" : !b->readable ? b->error : a.error;
      return d;
    }
    if (a.tx_packets < b->tx_packets || a.rx_packets < b->rx_packets ||
        (a.has_bytes && b->has_bytes && (a.tx_bytes < b->tx_bytes || a.rx_bytes < b->rx_bytes))) {
      d.error = "counters went backwards (reset or wrapped) during the point";
      return d;
    }
    d.valid = true;
    d.tx_packets = a.tx_packets - b->tx_packets;
    d.rx_packets = a.rx_packets - b->rx_packets;
    d.has_bytes = a.has_bytes && b->has_bytes;
    if (d.has_bytes) {
      d.tx_bytes = a.tx_bytes - b->tx_bytes;
      d.rx_bytes = a.rx_bytes - b->rx_bytes;
    }
    return d;
  };
  const PortTraffic* mine = find(after, device, port);
  PortDelta configured;
  if (mine) {
    configured = delta(*mine);
  } else {
    configured.device = device;
    configured.port = port;
    configured.error = "not read after the point (no such device or port?)";
  }
  v.deltas.push_back(configured);
  for (const auto& a : after)
    if (!(a.device == device && a.port == port)) v.deltas.push_back(delta(a));

  const std::string where = port_label(device, port);
  if (!configured.valid) {
    v.reason = "path unproven: the counters of the configured " + where + " cannot be compared: " + configured.error;
    return v;
  }
  const std::string short_of = shortfall(configured, claim);
  if (short_of.empty()) {
    v.ok = true;
    return v;
  }
  const bool tx = claim.tx_packets > 0 || claim.tx_bytes > 0;
  std::string elsewhere;
  for (size_t i = 1; i < v.deltas.size(); ++i)
    if (v.deltas[i].valid && shortfall(v.deltas[i], claim).empty())
      elsewhere += (elsewhere.empty() ? "" : ", ") + port_label(v.deltas[i].device, v.deltas[i].port) + " moved " +
                   moved_text(v.deltas[i], tx);
  v.reason = "path check failed: the point claims " + claim.what + " on the configured " + where + ", whose counters moved " +
             short_of + "; " +
             (elsewhere.empty() ? "no other port carried it either (looped back inside the host, or never sent)"
                                : "the traffic went over another device: " + elsewhere);
  return v;
}

NicInfo describe_nic(const std::string& sysfs, const std::string& device, int port, int gid_index) {
  NicInfo n;
  n.host = this_host();
  n.device = device;
  n.port = port;
  n.gid_index = gid_index;
  const std::string d = ib_dir(sysfs) + "/" + device;
  const std::string p = d + "/ports/" + std::to_string(port);
  const std::string g = std::to_string(gid_index);
  n.fw_ver = text_or_empty(d + "/fw_ver");
  n.node_guid = text_or_empty(d + "/node_guid");
  n.sys_image_guid = text_or_empty(d + "/sys_image_guid");
  n.board_id = text_or_empty(d + "/board_id");
  n.hca_type = text_or_empty(d + "/hca_type");
  n.hw_rev = text_or_empty(d + "/hw_rev");
  n.link_layer = text_or_empty(p + "/link_layer");
  n.state = text_or_empty(p + "/state");
  n.rate = text_or_empty(p + "/rate");
  n.lid = text_or_empty(p + "/lid");
  n.gid = text_or_empty(p + "/gids/" + g);
  n.gid_type = text_or_empty(p + "/gid_attrs/types/" + g);
  n.netdev = text_or_empty(p + "/gid_attrs/ndevs/" + g);
  return n;
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

std::string to_json(const NicInfo& n) {
  std::ostringstream o;
  o << "{\"host\":" << json_string(n.host) << ",\"device\":" << json_string(n.device) << ",\"port\":" << n.port;
  const std::pair<const char*, const std::string*> fields[] = {
      {"fw_ver", &n.fw_ver},       {"node_guid", &n.node_guid}, {"sys_image_guid", &n.sys_image_guid},
      {"board_id", &n.board_id},   {"hca_type", &n.hca_type},   {"hw_rev", &n.hw_rev},
      {"link_layer", &n.link_layer}, {"state", &n.state},       {"rate", &n.rate},
      {"lid", &n.lid},             {"gid", &n.gid},             {"gid_type", &n.gid_type},
      {"netdev", &n.netdev}};
  for (const auto& f : fields)
    if (!f.second->empty()) o << ",\"" << f.first << "\":" << json_string(*f.second);
  o << ",\"gid_index\":" << n.gid_index << "}";
  return o.str();
}

std::string to_json(const PathVerdict& v) {
  std::ostringstream o;
  o << "{\"ok\":" << (v.ok ? "true" : "false") << ",\"device\":" << json_string(v.device) << ",\"port\":" << v.port
    << ",\"claim\":{\"what\":" << json_string(v.claim.what) << ",\"tx_packets\":" << v.claim.tx_packets
    << ",\"rx_packets\":" << v.claim.rx_packets << ",\"tx_bytes\":" << v.claim.tx_bytes
    << ",\"rx_bytes\":" << v.claim.rx_bytes << "}";
  if (!v.ok) o << ",\"reason\":" << json_string(v.reason);
  o << ",\"moved\":[";
  for (size_t i = 0; i < v.deltas.size(); ++i) {
    const PortDelta& d = v.deltas[i];
    o << (i ? "," : "") << "{\"device\":" << json_string(d.device) << ",\"port\":" << d.port;
    if (!d.valid) {
      o << ",\"error\":" << json_string(d.error) << "}";
      continue;
    }
    o << ",\"tx_packets\":" << d.tx_packets << ",\"rx_packets\":" << d.rx_packets;
    if (d.has_bytes) o << ",\"tx_bytes\":" << d.tx_bytes << ",\"rx_bytes\":" << d.rx_bytes;
    o << "}";
  }
  o << "]}";
  return o.str();
}

const PortDelta& configured_delta(const PathVerdict& v) {
  static const PortDelta none;
  return v.deltas.empty() ? none : v.deltas.front();
}

std::string path_check_json(const PathVerdict& mine, const PathCheckFields& f) {
  const PortDelta& d = configured_delta(mine);
  std::ostringstream o;
  o << "{\"device\":" << json_string(mine.device) << ",\"port\":" << mine.port << ",\"verdict\":\""
    << (f.ok ? "ok" : "failed") << "\",\"expected_bytes\":" << mine.claim.tx_bytes
    << ",\"expected_packets\":" << mine.claim.tx_packets << ",\"tx_bytes\":" << d.tx_bytes
    << ",\"rx_bytes\":" << d.rx_bytes << ",\"peer_tx_bytes\":" << f.peer_tx_bytes
    << ",\"peer_rx_bytes\":" << f.peer_rx_bytes << ",\"reason\":" << json_string(f.reason);
  if (!f.device_choice.empty()) o << ",\"device_choice\":" << json_string(f.device_choice);
  o << ",\"nic\":" << (f.nic_json.empty() ? "null" : f.nic_json) << ",\"local\":" << to_json(mine) << "}";
  return o.str();
}

std::string peer_json(int rank, const std::string& host, const std::string& nic_json, const std::string& path_json) {
  return "{\"rank\":" + std::to_string(rank) + ",\"host\":" + json_string(host) +
         ",\"nic\":" + (nic_json.empty() ? "null" : nic_json) + ",\"path\":" + path_json + "}";
}

}  // namespace gicomm::net
