// A sysfs-like view of this process's emulated devices (GICOMM_EMU_SYSFS_DIR=DIR): the files a
// tool reads under /sys/class/infiniband/<dev> (identity, port state, GIDs and their types, and the
// port counters), written under DIR/class/infiniband/<dev>, so a program that takes a sysfs root
// (gicomm-pair-check --sysfs DIR) reads the emulated NIC's counters as it reads a ConnectX's. Each
// process is its own emulated host: give each its own DIR. The engine rewrites the counter files
// (write, then rename, so a reader never sees half a number) once per pass that moved traffic, and
// before it writes the completions of that traffic.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "emu.h"

namespace gicomm::emu {

namespace {

const std::string& root() {
  static const std::string r = [] {
    const char* v = std::getenv("GICOMM_EMU_SYSFS_DIR");
    return std::string(v ? v : "");
  }();
  return r;
}

bool mkdirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      const std::string part = path.substr(0, i);
      if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  }
  return true;
}

// Writes `text` + newline to dir/name through a temporary file and a rename.
void put(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name, tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    fail(errno, "GICOMM_EMU_SYSFS_DIR", tmp, "cannot write the sysfs view");
    return;
  }
  std::fprintf(f, "%s\n", text.c_str());
  std::fclose(f);
  std::rename(tmp.c_str(), path.c_str());
}

std::string dev_dir(const DeviceSpec& s) { return root() + "/class/infiniband/" + s.name; }

std::string guid_text(uint64_t g) {
  char b[32];
  std::snprintf(b, sizeof b, "%04x:%04x:%04x:%04x", unsigned(g >> 48) & 0xffff, unsigned(g >> 32) & 0xffff,
                unsigned(g >> 16) & 0xffff, unsigned(g) & 0xffff);
  return b;
}

std::string gid_text(const ibv_gid& g) {
  std::string s;
  char b[8];
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(b, sizeof b, "%02x%02x", g.raw[i], g.raw[i + 1]);
    s += (i ? ":" : "") + std::string(b);
  }
  return s;
}

}  // namespace

void sysfs_view_open(const DeviceSpec& s) {
  if (root().empty()) return;
  const std::string d = dev_dir(s), p = d + "/ports/1";
  if (!mkdirs(p + "/counters") || !mkdirs(p + "/gids") || !mkdirs(p + "/gid_attrs/types")) {
    fail(errno, "GICOMM_EMU_SYSFS_DIR", p, "cannot create the sysfs view");
    return;
  }
  put(d, "fw_ver", "gicomm-emu 1.0");
  put(d, "node_guid", guid_text(s.guid));
  put(d, "sys_image_guid", guid_text(s.guid));
  put(d, "hca_type", "MT4129");
  put(d, "board_id", "GICOMM_EMULATED");
  put(d, "hw_rev", "0x0");
  put(p, "state", "4: ACTIVE");
  put(p, "phys_state", "5: LinkUp");
  put(p, "link_layer", s.roce ? "Ethernet" : "InfiniBand");
  put(p, "rate", "200 Gb/sec (4X HDR)");
  char lid[16];
  std::snprintf(lid, sizeof lid, "0x%x", s.lid);
  put(p, "lid", lid);
  for (size_t i = 0; i < s.gids.size(); ++i) {
    put(p + "/gids", std::to_string(i), gid_text(s.gids[i].gid));
    put(p + "/gid_attrs/types", std::to_string(i), s.gids[i].type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1");
  }
  for (const char* c : {"port_xmit_packets", "port_rcv_packets", "port_xmit_data", "port_rcv_data"}) put(p + "/counters", c, "0");
}

void sysfs_view_counters(Nic& nic) {
  if (root().empty()) return;
  const std::string c = dev_dir(nic.spec()) + "/ports/1/counters";
  PortCounters& k = nic.counters();
  put(c, "port_xmit_packets", std::to_string(k.xmit_packets.load()));
  put(c, "port_rcv_packets", std::to_string(k.rcv_packets.load()));
  put(c, "port_xmit_data", std::to_string(k.xmit_words.load()));
  put(c, "port_rcv_data", std::to_string(k.rcv_words.load()));
}

}  // namespace gicomm::emu
