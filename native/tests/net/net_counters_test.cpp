// Port counters and the path check on fake sysfs trees laid out as mlx5 (InfiniBand port counters,
// data in 4-byte words) and Soft-RoCE (hw_counters, bytes from the RoCE netdev) lay them out.
// The guest run (tools/softroce) checks the same functions on real rxe counters.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "check.h"
#include "gicomm/net/counters.h"

using namespace gicomm::net;

namespace {

std::string root;

void put(const std::string& rel, const std::string& value) {
  const std::string path = root + "/" + rel;
  for (size_t i = 1; i < path.size(); ++i)
    if (path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
  std::ofstream(path) << value << "\n";
}

// An mlx5 port: packets and 4-byte data words.
void mlx5(const std::string& dev, uint64_t tx_pk, uint64_t rx_pk, uint64_t tx_words, uint64_t rx_words) {
  const std::string p = "class/infiniband/" + dev + "/ports/1/";
  put(p + "counters/port_xmit_packets", std::to_string(tx_pk));
  put(p + "counters/port_rcv_packets", std::to_string(rx_pk));
  put(p + "counters/port_xmit_data", std::to_string(tx_words));
  put(p + "counters/port_rcv_data", std::to_string(rx_words));
}

// A Soft-RoCE port on netdev `nd`.
void rxe(const std::string& dev, const std::string& nd, uint64_t sent, uint64_t rcvd, uint64_t txb, uint64_t rxb) {
  const std::string p = "class/infiniband/" + dev + "/ports/1/";
  put(p + "hw_counters/sent_pkts", std::to_string(sent));
  put(p + "hw_counters/rcvd_pkts", std::to_string(rcvd));
  put(p + "gid_attrs/ndevs/1", nd);
  put("class/net/" + nd + "/statistics/tx_bytes", std::to_string(txb));
  put("class/net/" + nd + "/statistics/rx_bytes", std::to_string(rxb));
}

void has(const std::string& text, const std::string& needle) {
  REQUIRE(text.find(needle) != std::string::npos, "'%s' lacks '%s'", text.c_str(), needle.c_str());
}

void mlx5_tree() {
  mlx5("mlx5_0", 100, 50, 1000, 500);
  mlx5("mlx5_1", 7, 7, 70, 70);
  put("class/infiniband/mlx5_0/fw_ver", "28.39.1002");
  put("class/infiniband/mlx5_0/node_guid", "b83f:d203:00a1:0001");
  put("class/infiniband/mlx5_0/board_id", "MT_0000000838");
  put("class/infiniband/mlx5_0/hca_type", "MT4129");
  put("class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand");
  put("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
  put("class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)");
  put("class/infiniband/mlx5_0/ports/1/lid", "0x1a");
  put("class/infiniband/mlx5_0/ports/1/gids/0", "fe80:0000:0000:0000:b83f:d203:00a1:0001");
  put("class/infiniband/mlx5_0/ports/1/gid_attrs/types/0", "IB/RoCE v1");

  const PortTraffic t = read_port(root, "mlx5_0", 1);
  REQUIRE(t.readable, "%s", t.error.c_str());
  REQUIRE(t.tx_packets == 100 && t.rx_packets == 50 && t.has_bytes && t.tx_bytes == 4000 && t.rx_bytes == 2000);
  has(t.source, "counters/port_");
  const auto before = read_all_ports(root);
  REQUIRE(before.size() == 2 && before[0].device == "mlx5_0" && before[1].device == "mlx5_1");

  // 1000 writes of 64 B from mlx5_0: enough packets and words.
  mlx5("mlx5_0", 1100, 60, 1000 + 16000 + 2000, 600);
  mlx5("mlx5_1", 9, 9, 90, 90);  // a busy neighbour (storage, IPoIB) never fails a point
  auto after = read_all_ports(root);
  PathVerdict v = check_path("mlx5_0", 1, before, after, rdma_write_claim(true, 1000, 64, 4096));
  REQUIRE(v.ok, "%s", v.reason.c_str());
  REQUIRE(v.deltas.size() == 2 && v.deltas[0].device == "mlx5_0" && v.deltas[0].tx_packets == 1000 &&
        v.deltas[0].tx_bytes == 72000);
  has(to_json(v), "\"ok\":true");

  // The claim is larger than what crossed the port: 2000 writes of 64 B.
  v = check_path("mlx5_0", 1, before, after, rdma_write_claim(true, 2000, 64, 4096));
  REQUIRE(!v.ok);
  has(v.reason, "claims 2000 RDMA writes of 64 B sent on the configured mlx5_0 port 1");
  has(v.reason, "1000 tx packets (claimed at least 2000)");
  has(v.reason, "no other port carried it either");
  // A 16 KiB write is four 4 KiB packets.
  REQUIRE(rdma_write_claim(false, 10, 16384, 4096).rx_packets == 40);
  REQUIRE(rdma_write_claim(false, 10, 0, 4096).rx_packets == 10);

  // The traffic went over mlx5_1 instead.
  mlx5("mlx5_1", 9 + 1000, 9, 90 + 18000, 90);
  const auto wrong = read_all_ports(root);
  v = check_path("mlx5_0", 1, after, wrong, rdma_write_claim(true, 1000, 64, 4096));
  REQUIRE(!v.ok);
  has(v.reason, "the traffic went over another device: mlx5_1 port 1 moved 1000 tx packets and 72000 tx bytes");
  has(to_json(v), "\"reason\":");

  // Counters that go backwards (a reset) or a device that vanished: unproven, never ok.
  mlx5("mlx5_0", 5, 5, 5, 5);
  v = check_path("mlx5_0", 1, after, read_all_ports(root), rdma_write_claim(true, 1, 8, 4096));
  REQUIRE(!v.ok);
  has(v.reason, "path unproven");
  has(v.reason, "went backwards");
  v = check_path("mlx5_9", 1, before, after, rdma_write_claim(true, 1, 8, 4096));
  REQUIRE(!v.ok);
  has(v.reason, "mlx5_9 port 1 cannot be compared: not read after the point");

  const NicInfo n = describe_nic(root, "mlx5_0", 1, 0);
  REQUIRE(n.fw_ver == "28.39.1002" && n.hca_type == "MT4129" && n.board_id == "MT_0000000838" && n.lid == "0x1a");
  REQUIRE(n.link_layer == "InfiniBand" && n.gid == "fe80:0000:0000:0000:b83f:d203:00a1:0001" && n.netdev.empty());
  const std::string j = to_json(n);
  has(j, "\"fw_ver\":\"28.39.1002\"");
  has(j, "\"device\":\"mlx5_0\"");
  REQUIRE(j.find("netdev") == std::string::npos);  // absent fields stay out
}

void rxe_tree() {
  rxe("rxe0", "va", 0, 0, 100, 100);
  rxe("rxe1", "vb", 0, 0, 100, 100);
  put("class/infiniband/rxe0/fw_ver", "0.0.0");
  const PortTraffic t = read_port(root, "rxe0", 1);
  REQUIRE(t.readable && t.has_bytes && t.tx_bytes == 100);
  has(t.source, "hw_counters/{sent,rcvd}_pkts + net/va/statistics");
  const auto before = read_all_ports(root);
  // Configured rxe0, but 500 writes of 4 KiB (1 KiB MTU) left through rxe1; rxe0 only sent ACKs.
  rxe("rxe1", "vb", 2000, 500, 100 + 2172000, 100 + 31000);
  rxe("rxe0", "va", 500, 2000, 100 + 31000, 100 + 2172000);
  const auto after = read_all_ports(root);
  PathVerdict v = check_path("rxe0", 1, before, after, rdma_write_claim(true, 500, 4096, 1024));
  REQUIRE(!v.ok);
  has(v.reason, "500 tx packets (claimed at least 2000), 31000 tx bytes (claimed at least 2048000)");
  has(v.reason, "went over another device: rxe1 port 1 moved 2000 tx packets and 2172000 tx bytes");
  // The receiving side, configured rxe0, did receive it.
  v = check_path("rxe0", 1, before, after, rdma_write_claim(false, 500, 4096, 1024));
  REQUIRE(v.ok, "%s", v.reason.c_str());

  // A port without counters, and a netdev without statistics (packets only).
  put("class/infiniband/odd0/ports/1/state", "4: ACTIVE");
  PortTraffic odd = read_port(root, "odd0", 1);
  REQUIRE(!odd.readable);
  has(odd.error, "no packet counters under");
  REQUIRE(!read_port(root, "odd0", 2).readable);
  has(read_port(root, "odd0", 2).error, "no such port");
  put("class/infiniband/rxe2/ports/1/hw_counters/sent_pkts", "3");
  put("class/infiniband/rxe2/ports/1/hw_counters/rcvd_pkts", "4");
  const PortTraffic r2 = read_port(root, "rxe2", 1);
  REQUIRE(r2.readable && !r2.has_bytes && r2.tx_packets == 3);
  v = check_path("odd0", 1, read_all_ports(root), read_all_ports(root), rdma_write_claim(true, 1, 8, 1024));
  REQUIRE(!v.ok);
  has(v.reason, "path unproven");
}

// The record objects both harnesses write: path_check from a verdict, peer from its parts.
void record_json() {
  PathVerdict v;
  v.ok = true;
  v.device = "mlx5_0";
  v.port = 1;
  v.claim = rdma_write_claim(true, 10, 8, 4096);
  PortDelta d;
  d.device = "mlx5_0";
  d.port = 1;
  d.valid = d.has_bytes = true;
  d.tx_packets = 12;
  d.tx_bytes = 96;
  d.rx_bytes = 7;
  v.deltas.push_back(d);
  PathCheckFields f;
  f.ok = false;
  f.reason = "rank 1: \"short\"";
  f.peer_tx_bytes = "5";
  std::string j = path_check_json(v, f);
  has(j, "{\"device\":\"mlx5_0\",\"port\":1,\"verdict\":\"failed\",\"expected_bytes\":80,\"expected_packets\":10,"
         "\"tx_bytes\":96,\"rx_bytes\":7,\"peer_tx_bytes\":5,\"peer_rx_bytes\":null,\"reason\":\"rank 1: \\\"short\\\"\",");
  has(j, ",\"nic\":null,\"local\":{\"ok\":true,");
  CHECK(j.find("device_choice") == std::string::npos, "no device_choice unless a library chose: %s", j.c_str());
  f.ok = true;
  f.device_choice = "NVSHMEM_HCA_LIST";
  f.nic_json = "{\"device\":\"mlx5_0\"}";
  j = path_check_json(v, f);
  has(j, "\"verdict\":\"ok\"");
  has(j, "\"device_choice\":\"NVSHMEM_HCA_LIST\",\"nic\":{\"device\":\"mlx5_0\"},\"local\":");
  v.deltas.clear();  // counters never compared: zeros, not a crash
  has(path_check_json(v, f), "\"tx_bytes\":0,\"rx_bytes\":0,");
  CHECK(peer_json(1, "node-b", "", "{\"ok\":true}") == "{\"rank\":1,\"host\":\"node-b\",\"nic\":null,\"path\":{\"ok\":true}}",
        "%s", peer_json(1, "node-b", "", "{\"ok\":true}").c_str());
}

}  // namespace

int main() {
  record_json();
  for (void (*tree)() : {mlx5_tree, rxe_tree}) {
    char tmpl[] = "/tmp/gicomm-sysfs-XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    root = tmpl;
    tree();
    REQUIRE(std::system(("rm -rf '" + root + "'").c_str()) == 0);
  }
  std::printf("net_counters_test: ok\n");
  return 0;
}
