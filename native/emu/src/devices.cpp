// Emulated devices (GICOMM_EMU_DEVICES, GICOMM_EMU_NODE) and error reporting.
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "emu.h"
#include "wire.h"

namespace gicomm::emu {

namespace {

int log_level() {
  static const int level = [] {
    const char* v = std::getenv("GICOMM_EMU_LOG");
    if (v == nullptr || std::strcmp(v, "errors") == 0) return 1;
    if (std::strcmp(v, "quiet") == 0) return 0;
    if (std::strcmp(v, "verbose") == 0) return 2;
    std::fprintf(stderr, "gicomm-emu: GICOMM_EMU_LOG='%s' is not one of quiet, errors, verbose; using errors\n", v);
    return 1;
  }();
  return level;
}

std::string g_spec_error;

// GID helpers: link-local fe80::<GUID>, and the IPv4-mapped ::ffff:a.b.c.d of RoCE v2.
ibv_gid link_local(uint64_t guid) {
  ibv_gid g{};
  g.raw[0] = 0xfe;
  g.raw[1] = 0x80;
  for (int i = 0; i < 8; ++i) g.raw[8 + i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
  return g;
}
ibv_gid ipv4_mapped(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  ibv_gid g{};
  g.raw[10] = 0xff;
  g.raw[11] = 0xff;
  g.raw[12] = a;
  g.raw[13] = b;
  g.raw[14] = c;
  g.raw[15] = d;
  return g;
}

constexpr uint32_t kMaxDevices = 8;
constexpr uint32_t kMaxNode = 0x17fe;  // lid = node * 8 + index + 1 stays a unicast LID (< 0xc000)

// This process's emulated host: GICOMM_EMU_NODE, else one derived from the pid. The number is
// claimed by binding its wire endpoint (wire.h), so two processes never answer for the same
// addresses; a derived number that is taken moves on to a free one.
uint32_t node_id() {
  const char* v = std::getenv("GICOMM_EMU_NODE");
  uint32_t preferred = static_cast<uint32_t>(getpid()) % kMaxNode + 1;
  bool explicit_choice = false;
  if (v != nullptr && *v != '\0') {
    char* end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 0);
    if (*end == '\0' && n >= 1 && n <= kMaxNode) {
      preferred = static_cast<uint32_t>(n);
      explicit_choice = true;
    } else {
      g_spec_error += "GICOMM_EMU_NODE='" + std::string(v) + "' is not an integer in 1.." + std::to_string(kMaxNode) +
                      "; using one derived from the process id. ";
    }
  }
  std::string why;
  const uint32_t node = wire::claim_node(preferred, explicit_choice, kMaxNode, &why);
  if (!why.empty()) g_spec_error += why + ". ";
  return node;
}

uint32_t g_node = 0;

std::vector<DeviceSpec> parse_specs() {
  const char* env = std::getenv("GICOMM_EMU_DEVICES");
  const std::string list = env != nullptr ? env : "mlx5_0:ib,mlx5_1:roce";
  const uint32_t node = g_node = node_id();
  std::vector<DeviceSpec> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    const std::string name = item.substr(0, colon);
    const std::string link = colon == std::string::npos ? "ib" : item.substr(colon + 1);
    bool name_ok = !name.empty() && name.size() < 64;
    for (char ch : name) name_ok = name_ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
    if (!name_ok || (link != "ib" && link != "roce")) {
      g_spec_error += "GICOMM_EMU_DEVICES entry '" + item +
                      "' is not NAME:ib or NAME:roce (NAME: letters, digits, '_'; the list is comma separated). ";
      continue;
    }
    if (out.size() == kMaxDevices) {
      g_spec_error += "GICOMM_EMU_DEVICES lists more than " + std::to_string(kMaxDevices) + " devices; '" + item +
                      "' and later ones are left out. ";
      break;
    }
    DeviceSpec d;
    d.name = name;
    d.index = static_cast<uint32_t>(out.size());
    d.node = node;
    d.roce = link == "roce";
    d.guid = 0x0002c90300000000ull | (uint64_t(node) << 8) | d.index;
    d.lid = d.roce ? 0 : static_cast<uint16_t>(node * kMaxDevices + d.index + 1);
    const ibv_gid ll = link_local(d.guid);
    if (d.roce) {
      const ibv_gid v4 = ipv4_mapped(127, static_cast<uint8_t>(node >> 8), static_cast<uint8_t>(node),
                                     static_cast<uint8_t>(d.index + 1));
      d.gids = {{ll, IBV_GID_TYPE_ROCE_V1}, {ll, IBV_GID_TYPE_ROCE_V2}, {v4, IBV_GID_TYPE_ROCE_V1}, {v4, IBV_GID_TYPE_ROCE_V2}};
    } else {
      d.gids = {{ll, IBV_GID_TYPE_IB}};
    }
    out.push_back(d);
  }
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (out[i].name == out[j].name) g_spec_error += "GICOMM_EMU_DEVICES names " + out[i].name + " twice. ";
  if (!g_spec_error.empty()) std::fprintf(stderr, "gicomm-emu: %s\n", g_spec_error.c_str());
  return out;
}

}  // namespace

const std::vector<DeviceSpec>& device_specs() {
  static const std::vector<DeviceSpec> specs = parse_specs();
  return specs;
}

uint32_t this_node() {
  device_specs();
  return g_node;
}

bool node_of_address(bool is_global, const uint8_t* gid, uint16_t lid, uint32_t* node, uint32_t* index) {
  if (!is_global) {
    if (lid == 0 || lid >= 0xc000) return false;
    *node = (lid - 1u) / kMaxDevices;
    *index = (lid - 1u) % kMaxDevices;
    return *node >= 1 && *node <= kMaxNode;
  }
  static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(gid, v4_prefix, 12) == 0) {  // ::ffff:127.<node>.<index + 1>
    if (gid[12] != 127 || gid[15] == 0) return false;
    *node = (uint32_t(gid[13]) << 8) | gid[14];
    *index = gid[15] - 1u;
  } else {  // fe80::<GUID>, GUID 0x0002c903 <node:24> <index:8>
    static const uint8_t ll_prefix[12] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x02, 0xc9, 0x03};
    if (std::memcmp(gid, ll_prefix, 12) != 0) return false;
    *node = (uint32_t(gid[12]) << 16) | (uint32_t(gid[13]) << 8) | gid[14];
    *index = gid[15];
  }
  return *node >= 1 && *node <= kMaxNode && *index < kMaxDevices;
}

bool spec_matches(const DeviceSpec& s, bool is_global, const uint8_t* gid, uint16_t lid) {
  if (!is_global) return !s.roce && s.lid == lid;
  for (const GidEntry& g : s.gids)
    if (std::memcmp(g.gid.raw, gid, 16) == 0) return true;
  return false;
}

const std::string& device_spec_error() {
  device_specs();
  return g_spec_error;
}

int fail(int err, const char* call, const std::string& object, const std::string& reason) {
  if (log_level() >= 1)
    std::fprintf(stderr, "gicomm-emu: %s: %s: %s (%s)\n", call, object.c_str(), reason.c_str(), std::strerror(err));
  errno = err;
  return err;
}

void warn(const std::string& line) {
  if (log_level() >= 1) std::fprintf(stderr, "gicomm-emu[%u]: %s\n", this_node(), line.c_str());
}

void note(const std::string& line) {
  if (log_level() >= 2) std::fprintf(stderr, "gicomm-emu: %s\n", line.c_str());
}

namespace {
// GICOMM_EMU_TRACE=N: the first N data-path events are printed (0, the default: none).
long trace_budget() {
  static const long n = [] {
    const char* v = std::getenv("GICOMM_EMU_TRACE");
    if (v == nullptr || *v == '\0') return 0L;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*end != '\0' || x < 0) {
      std::fprintf(stderr, "gicomm-emu: GICOMM_EMU_TRACE='%s' is not a count of events; tracing nothing\n", v);
      return 0L;
    }
    return x;
  }();
  return n;
}
std::atomic<long> g_traced{0};
}  // namespace

bool tracing() { return g_traced.load(std::memory_order_relaxed) < trace_budget(); }

void trace(const std::string& line) {
  const long i = g_traced.fetch_add(1, std::memory_order_relaxed);
  if (i >= trace_budget()) return;
  std::fprintf(stderr, "gicomm-emu[%u] trace %ld: %s%s\n", this_node(), i + 1, line.c_str(),
               i + 1 == trace_budget() ? " (trace budget spent: GICOMM_EMU_TRACE)" : "");
}

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace gicomm::emu
