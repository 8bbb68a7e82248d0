// Path proof: the NIC's own port counters, read from sysfs before and after a point, must have
// moved at least as much as the traffic the point claims, on the device it was configured to use.
// A point whose counters moved less (the traffic never crossed that port: it went over another
// device, looped back inside the host, or was never sent) fails with the reason, never averaged in.
//
// Where the counters come from (per port, under <sysfs>/class/infiniband/<dev>/ports/<n>/):
//   counters/port_xmit_packets, port_rcv_packets, port_xmit_data, port_rcv_data
//       the InfiniBand port counters (mlx5, InfiniBand and RoCE); *_data count 4-byte words
//   hw_counters/sent_pkts, rcvd_pkts
//       Soft-RoCE (rdma_rxe), which has no counters/ folder; its bytes come from the network
//       device under the port's RoCE GID (<sysfs>/class/net/<netdev>/statistics/{tx,rx}_bytes)
// Also the provenance of each side: host, device, firmware, GUIDs, link, GID.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace gicomm::net {

// One port's cumulative counters at one moment.
struct PortTraffic {
  std::string device;
  int port = 0;
  bool readable = false;
  std::string error;   // why not, when !readable
  std::string source;  // which files the numbers came from
  uint64_t tx_packets = 0, rx_packets = 0;
  bool has_bytes = false;
  uint64_t tx_bytes = 0, rx_bytes = 0;
};

// The counters of one port (gid_index picks the RoCE netdev for byte counts on Soft-RoCE).
PortTraffic read_port(const std::string& sysfs, const std::string& device, int port, int gid_index = 1);
// Every port of every RDMA device, sorted by device and port.
std::vector<PortTraffic> read_all_ports(const std::string& sysfs, int gid_index = 1);

// What a point says went through the configured port (minimums; headers and ACKs only add).
struct TrafficClaim {
  uint64_t tx_packets = 0, rx_packets = 0, tx_bytes = 0, rx_bytes = 0;
  std::string what;  // e.g. "1000 RDMA writes of 8 B sent"
};
// The rank that sends `messages` RDMA writes of `bytes` each (sender) or receives them: at least
// one packet per MTU-sized piece (one for a zero-length write) and the payload bytes.
TrafficClaim rdma_write_claim(bool sender, uint64_t messages, uint64_t bytes, uint32_t mtu);

struct PortDelta {
  std::string device;
  int port = 0;
  bool valid = false;  // readable before and after, and not going backwards
  std::string error;
  uint64_t tx_packets = 0, rx_packets = 0, tx_bytes = 0, rx_bytes = 0;
  bool has_bytes = false;
};

struct PathVerdict {
  bool ok = false;
  std::string reason;  // empty when ok
  std::string device;  // the configured device and port
  int port = 0;
  TrafficClaim claim;
  std::vector<PortDelta> deltas;  // every port seen, the configured one first
};

// Compares what moved on `device` port `port` between the two readings with the claim. Other
// ports' movements only explain a failure ("the traffic went over rxe1"): busy neighbours (storage
// or IPoIB on another NIC) never fail a point.
PathVerdict check_path(const std::string& device, int port, const std::vector<PortTraffic>& before,
                       const std::vector<PortTraffic>& after, const TrafficClaim& claim);

// The configured port's movement (the first of v.deltas; zeros when the counters could not be
// compared).
const PortDelta& configured_delta(const PathVerdict& v);

// A record's `path_check` object, the one form every harness writes: the configured device and
// port, the point's verdict (`ok`, `reason`: this rank's and the peer's failures together), the
// traffic claimed, what the configured port moved here, what the peer's moved (`peer_tx_bytes`,
// `peer_rx_bytes`: JSON numbers, "null" when not known), this NIC's identity (`nic_json`), this
// rank's whole verdict (`local`) and, where a library picked the device, how (`device_choice`,
// left out when empty).
struct PathCheckFields {
  bool ok = false;
  std::string reason;
  std::string peer_tx_bytes = "null", peer_rx_bytes = "null";
  std::string nic_json = "null";
  std::string device_choice;
};
std::string path_check_json(const PathVerdict& mine, const PathCheckFields& f);
// A record's `peer` object: the other rank, its host, its NIC's identity and its own verdict.
std::string peer_json(int rank, const std::string& host, const std::string& nic_json, const std::string& path_json);

// Provenance of one NIC port, from sysfs (fields missing on a device stay empty).
struct NicInfo {
  std::string host, device, fw_ver, node_guid, sys_image_guid, board_id, hca_type, hw_rev;
  int port = 0;
  std::string link_layer, state, rate, lid, gid, gid_type, netdev;
  int gid_index = 0;
};
NicInfo describe_nic(const std::string& sysfs, const std::string& device, int port, int gid_index);

// Compact JSON objects, for records and logs.
std::string to_json(const NicInfo& nic);
std::string to_json(const PathVerdict& v);
std::string json_string(const std::string& s);

// The sysfs root the port counters are read from: the emulated rdma-core's view when it writes one
// (GICOMM_EMU_SYSFS_DIR), else the kernel's.
inline std::string sysfs_root() {
  const char* emu = std::getenv("GICOMM_EMU_SYSFS_DIR");
  return emu && *emu ? emu : "/sys";
}

}  // namespace gicomm::net
