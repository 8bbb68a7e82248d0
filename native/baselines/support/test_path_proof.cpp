// The library harnesses' path proof (path_proof.h) on fake sysfs trees: which NIC NVSHMEM's
// selection picks, what a dissection point claims, and the verdict rank 0 records for both ranks:
// ok when both ports moved at least the claim, failed when one moved too little or the traffic went
// over another device, or rank 1's movement never came.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "harness/json.h"
#include "check.h"
#include "support/path_proof.h"

using namespace gicomm::baselines;
namespace net = gicomm::net;


static bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A fake port: counters/port_{xmit,rcv}_{packets,data} under root/class/infiniband/dev/ports/1.
struct FakePort {
  std::string dir;
  uint64_t txp = 0, rxp = 0, txw = 0, rxw = 0;
  FakePort(const std::string& root, const std::string& dev) {
    dir = root + "/class/infiniband/" + dev + "/ports/1/counters";
    REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
    write();
  }
  void write() const {
    for (auto [name, v] : {std::pair{"port_xmit_packets", txp}, std::pair{"port_rcv_packets", rxp},
                           std::pair{"port_xmit_data", txw}, std::pair{"port_rcv_data", rxw}})
      std::ofstream(dir + "/" + name) << v << "\n";
  }
  // Moves `claim`'s traffic (bytes as 4-byte words), scaled by `share` (1.0: exactly the claim).
  void move(const net::TrafficClaim& c, double share) {
    txp += static_cast<uint64_t>(c.tx_packets * share);
    rxp += static_cast<uint64_t>(c.rx_packets * share);
    txw += static_cast<uint64_t>(c.tx_bytes * share) / 4;
    rxw += static_cast<uint64_t>(c.rx_bytes * share) / 4;
    write();
  }
};

static void test_choice() {
  const std::vector<std::string> listed = {"bnxt_re0", "mlx5_2", "mlx5_0"};
  HcaChoice c = choose_nvshmem_hca(listed, {});
  CHECK(c.device == "mlx5_2" && c.port == 1 && c.pin == "mlx5_2:1", "default: the first mlx5 rdma-core lists, pinned");
  CHECK(has(c.why, "NVSHMEM_HCA_PREFIX mlx5 (NVSHMEM's default)"), "%s", c.why.c_str());
  c = choose_nvshmem_hca(listed, {{"NVSHMEM_HCA_PREFIX", "bnxt"}});
  CHECK(c.device == "bnxt_re0" && c.pin == "bnxt_re0:1", "prefix picks bnxt_re0");
  c = choose_nvshmem_hca(listed, {{"NVSHMEM_HCA_LIST", "mlx5_7:1,mlx5_0:2"}});
  CHECK(c.device == "mlx5_0" && c.port == 2 && c.pin.empty(), "list: its first entry that exists, its port, no pin");
  c = choose_nvshmem_hca(listed, {{"NVSHMEM_HCA_LIST", "^mlx5_2"}});
  CHECK(c.device == "mlx5_0" && c.port == 1, "exclusion list: the first mlx5 not excluded");
  c = choose_nvshmem_hca({"mlx5_10", "mlx5_1"}, {{"NVSHMEM_HCA_LIST", "=mlx5_1"}});
  CHECK(c.device == "mlx5_1", "exact names: mlx5_1, not mlx5_10");
  c = choose_nvshmem_hca(listed, {{"NVSHMEM_HCA_LIST", "mlx5_0:x"}});
  CHECK(c.device.empty() && has(c.error, "NVSHMEM_HCA_LIST mlx5_0:x") && has(c.error, "port 'x'"), "%s", c.error.c_str());
  c = choose_nvshmem_hca(listed, {{"NVSHMEM_HCA_LIST", "mlx5_9"}});
  CHECK(c.device.empty() && has(c.error, "names no device") && has(c.error, "mlx5_2"), "%s", c.error.c_str());
  c = choose_nvshmem_hca({"bnxt_re0"}, {});
  CHECK(c.device.empty() && has(c.error, "begins with NVSHMEM_HCA_PREFIX mlx5"), "%s", c.error.c_str());
  c = choose_nvshmem_hca({}, {});
  CHECK(c.device.empty() && has(c.error, "no RDMA device"), "%s", c.error.c_str());
}

static DissectOps ops_of_8b_put() {
  DissectOps o;
  o.bytes = 8;
  o.warmup = 20;
  o.iters = 200;
  o.batch = 1000;
  o.reps = 20;
  o.caller_sends = 11 * 528;  // (1 warm-up + 10 reps) x 4 blocks per SM on 132 SMs
  return o;
}

static void test_claim() {
  const PointTraffic t = dissect_traffic(ops_of_8b_put());
  const uint64_t ops = 220 + 21 * 1000 + 11 * 528 + 220;
  CHECK(t.initiator_ops == ops, "initiator ops: issue + rate + caller + ping");
  CHECK(t.initiator_bytes == ops * 8, "initiator bytes: every op 8 B");
  CHECK(t.responder_ops == 220 && t.responder_bytes == 220 * 8, "responder: one echo per ping");
  const net::TrafficClaim c0 = claim_of(t, 0), c1 = claim_of(t, 1);
  CHECK(c0.tx_bytes == t.initiator_bytes && c0.rx_bytes == t.responder_bytes, "rank 0 sends the initiator's");
  CHECK(c1.tx_bytes == t.responder_bytes && c1.rx_bytes == t.initiator_bytes, "rank 1 receives them");
  CHECK(has(c0.what, "21000 rate ops of 8 B") && has(c0.what, "220 echoes of 8 B received"), "%s", c0.what.c_str());
  DissectOps big = ops_of_8b_put();
  big.bytes = 65536;
  big.batch = 16;
  big.rtt_ran = false;  // the round trip failed: it claims nothing
  const PointTraffic b = dissect_traffic(big);
  CHECK(b.initiator_bytes == (220 + 21 * 16) * 65536ull + 11 * 528 * 8ull && b.responder_ops == 0,
        "a failed round trip claims no pings and no echoes");
  big.local_ran = false;
  CHECK(dissect_traffic(big).initiator_ops == 0, "nothing ran: nothing claimed");
}

// Rank 1's side as the harness runs it: its movement through the message rank 0 decodes.
static PeerMovement through_the_wire(const PortWatch& w1, const net::TrafficClaim& none) {
  const net::PathVerdict v1 = w1.end(none);
  const std::string text = movement_message(v1, "hostb", "{\"device\":\"mlx5_0\"}").encode("path");
  net::Message m;
  std::string phase, err;
  int version = 0;
  CHECK(net::Message::decode(text, &m, &phase, &version, &err), "%s", err.c_str());
  PeerMovement peer;
  CHECK(read_movement(m, &peer, &err), "%s", err.c_str());
  CHECK(peer.device == "mlx5_0" && peer.port == 1 && peer.host == "hostb", "the movement names rank 1's port");
  return peer;
}

static void test_verdict(const std::string& root) {
  const std::string r0 = root + "/rank0", r1 = root + "/rank1";
  FakePort a0(r0, "mlx5_0"), a1(r0, "mlx5_1"), b0(r1, "mlx5_0");
  const PointTraffic t = dissect_traffic(ops_of_8b_put());
  const net::TrafficClaim c0 = claim_of(t, 0), c1 = claim_of(t, 1);
  auto point = [&](double share0, FakePort& carrier0, double share1, std::vector<gicomm::bench::Record>* recs) {
    PortWatch w0(r0, "mlx5_0", 1), w1(r1, "mlx5_0", 1);
    w0.begin();
    w1.begin();
    carrier0.move(c0, share0);
    b0.move(c1, share1);
    const PeerMovement peer = through_the_wire(w1, net::TrafficClaim{});
    const PathFields f = path_fields(w0.end(c0), "{\"device\":\"mlx5_0\"}", "the test's choice", &peer, c1, "");
    apply_path_fields(f, recs);
    return f;
  };
  auto ok_records = [] {
    return std::vector<gicomm::bench::Record>{gicomm::bench::Record::ok("rtt_ns", "ns", gicomm::bench::Stats{})};
  };

  // Both ports moved the claim (and more: NVSHMEM's barriers): ok, the records stay ok.
  std::vector<gicomm::bench::Record> recs = ok_records();
  PathFields f = point(1.2, a0, 1.0, &recs);
  CHECK(f.ok && f.reason.empty(), "%s", f.reason.c_str());
  CHECK(recs[0].status == "ok", "a proven point stays ok");
  const auto j = gicomm::bench::Json::parse(recs[0].path_check);
  CHECK(j["verdict"] == "ok" && j["device"] == "mlx5_0" && j["port"] == 1, "path_check names device and port");
  CHECK(j["expected_bytes"] == c0.tx_bytes && j["tx_bytes"].get<uint64_t>() >= c0.tx_bytes, "expected and moved bytes");
  CHECK(j["peer_rx_bytes"] == c0.tx_bytes && j["peer_tx_bytes"] == c1.tx_bytes, "rank 1's bytes");
  CHECK(j["device_choice"] == "the test's choice" && j["nic"]["device"] == "mlx5_0", "why that device, and the NIC");
  const auto p = gicomm::bench::Json::parse(recs[0].peer);
  CHECK(p["rank"] == 1 && p["host"] == "hostb" && p["path"]["ok"] == true, "peer: rank 1's host and verdict");

  // Rank 0's port moved half the claim: failed with the shortfall.
  recs = ok_records();
  f = point(0.5, a0, 1.0, &recs);
  CHECK(!f.ok && has(f.reason, "path check failed") && has(f.reason, "claimed at least"), "%s", f.reason.c_str());
  CHECK(recs[0].status == "failed" && has(recs[0].error, "path check: "), "%s", recs[0].error.c_str());
  CHECK(gicomm::bench::Json::parse(recs[0].path_check)["verdict"] == "failed", "verdict failed in the record");

  // The traffic went over mlx5_1 instead of the configured mlx5_0.
  recs = ok_records();
  f = point(1.0, a1, 1.0, &recs);
  CHECK(!f.ok && has(f.reason, "went over another device: mlx5_1 port 1"), "%s", f.reason.c_str());

  // Rank 1's port did not see the traffic rank 0 sent.
  recs = ok_records();
  f = point(1.0, a0, 0.1, &recs);
  CHECK(!f.ok && has(f.reason, "rank 1: path check failed"), "%s", f.reason.c_str());
  CHECK(recs[0].status == "failed", "rank 1's shortfall fails the point");

  // Rank 1's movement never came: failed, saying so.
  PortWatch w0(r0, "mlx5_0", 1);
  w0.begin();
  a0.move(c0, 1.0);
  f = path_fields(w0.end(c0), "", "x", nullptr, c1, "no counters from rank 1 within 10000 ms");
  CHECK(!f.ok && has(f.reason, "rank 1: no counters from rank 1"), "%s", f.reason.c_str());
  CHECK(gicomm::bench::Json::parse(f.peer)["path"]["ok"] == false, "peer path says why");

  // The configured device does not exist on rank 0: unproven, failed.
  PortWatch wrong(r0, "mlx5_9", 1);
  wrong.begin();
  f = path_fields(wrong.end(c0), "", "x", nullptr, c1, "");
  CHECK(!f.ok && has(f.reason, "path unproven") && has(f.reason, "mlx5_9 port 1"), "%s", f.reason.c_str());
}

// Both ranks as forked processes (run_ranks), each with its own fake port: rank 1's movement
// reaches rank 0 through the job's blobs, point after point, and rank 0's records carry the verdict.
static void test_two_ranks(const std::string& root) {
  RankContext base;
  base.rendezvous_dir = root + "/rdv";
  REQUIRE(std::system(("mkdir -p " + base.rendezvous_dir).c_str()) == 0);
  const std::string out = root + "/verdicts.txt";
  DissectOps ops = ops_of_8b_put();
  const auto outcome = run_ranks(2, 60, base, [&](RankContext& ctx) {
    const std::string mine = root + "/two" + std::to_string(ctx.rank);
    FakePort port(mine, "mlx5_0");
    HcaChoice nic;
    nic.device = "mlx5_0";
    nic.why = "test";
    RankPathProof proof(ctx, mine, nic);
    const PointTraffic t = dissect_traffic(ops);
    std::string verdicts;
    for (double share : {1.0, 0.5}) {  // the second point: rank 1 sees half of what rank 0 sent
      gicomm::bench::Point p;
      proof.begin(p);
      port.move(claim_of(t, ctx.rank), ctx.rank == 1 ? share : 1.0);
      std::vector<gicomm::bench::Record> recs{gicomm::bench::Record::ok("rtt_ns", "ns", gicomm::bench::Stats{})};
      proof.end(p, ops, ctx.rank == 0 ? &recs : nullptr);
      verdicts += recs[0].status + "|" + recs[0].error + "\n";
    }
    if (ctx.rank == 0) std::ofstream(out) << verdicts;
    return 0;
  });
  CHECK(outcome.size() == 2 && outcome[0].empty() && outcome[1].empty(), "both ranks exit 0");
  std::ifstream in(out);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  CHECK(first == "ok|", "%s", first.c_str());
  CHECK(second.rfind("failed|path check: rank 1: path check failed", 0) == 0, "%s", second.c_str());
}

int main() {
  char dir[] = "/tmp/gicomm-path-proof-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  test_choice();
  test_claim();
  test_verdict(dir);
  test_two_ranks(dir);
  REQUIRE(std::system(("rm -rf " + std::string(dir)).c_str()) == 0);
  return check_result("test_baselines_path_proof");
}
