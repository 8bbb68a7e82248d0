// Path proof of a library harness's NIC points (host code, tested on the CPU: test_path_proof): the
// port counters of the NIC the library uses, read on both ranks before and after each point, must
// have moved at least the traffic the point claims. The counters and the verdict are the native
// bench's (gicomm/net/counters.h); here is what a library point claims, which NIC NVSHMEM uses,
// how rank 1 hands its counter movement to rank 0, and the record fields rank 0 writes (path_check
// and peer, with the same fields as the native bench's records).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gicomm/net/counters.h"
#include "gicomm/net/oob.h"
#include "harness/harness.h"
#include "support/ranks.h"

namespace gicomm::baselines {

// ---- which NIC ---------------------------------------------------------------------------------------
struct HcaChoice {
  std::string device;  // empty: none fits (error says why)
  int port = 1;
  std::string why;     // for the record: which rule picked it
  std::string error;
  // NVSHMEM_HCA_LIST to set before NVSHMEM starts, so that it uses the device whose counters are
  // read ("" when the environment already names the list).
  std::string pin;
};

// NVSHMEM's HCA selection over the devices rdma-core lists (in its order): NVSHMEM_HCA_LIST
// ("dev[:port],...", a leading '^' excludes the listed devices, a leading '=' asks for exact names)
// picks its first listed device that exists; else the first device whose name begins with
// NVSHMEM_HCA_PREFIX (default "mlx5"). Without a list, NVSHMEM would pick among several devices the
// one nearest to its GPU; the harness pins the choice (pin) so the counters read are the NIC used.
HcaChoice choose_nvshmem_hca(const std::vector<std::string>& listed, const std::map<std::string, std::string>& env);

// ---- what a point claims ---------------------------------------------------------------------------
// The operations of one point of the dissection kernels (nvlink/dissect.cuh) as a NIC sees them:
// the initiator's issue loop (warmup + iters ops), rate loop (reps + 1 rounds of batch ops, the first
// a warm-up), caller-cost sends (caller_sends puts of 8 B) and pings (warmup + iters); the responder's
// echoes (warmup + iters). `local_ran` / `rtt_ran`: whether those parts ran to the end (a part that
// failed claims nothing; its records are failed already).
struct DissectOps {
  uint64_t bytes = 8;  // of each op (8 for a p)
  uint64_t warmup = 0, iters = 0, batch = 0, reps = 0, caller_sends = 0;
  bool local_ran = true, rtt_ran = true;
};

struct PointTraffic {
  uint64_t initiator_ops = 0, initiator_bytes = 0;  // rank 0 -> rank 1
  uint64_t responder_ops = 0, responder_bytes = 0;  // rank 1 -> rank 0 (the round trip's answers)
  std::string initiator_what, responder_what;
};
PointTraffic dissect_traffic(const DissectOps& ops);

// What `rank`'s port must have carried: rank 0 sends the initiator's ops and receives the
// responder's, rank 1 the other way round. At least one packet per op and its payload bytes
// (headers, acknowledgements, the signals of a put-with-signal and the library's own barriers only
// add: the check is "at least").
net::TrafficClaim claim_of(const PointTraffic& t, int rank);

// ---- the readings of one point on one rank -----------------------------------------------------------
class PortWatch {
 public:
  PortWatch(std::string root, std::string device, int port)
      : root_(std::move(root)), device_(std::move(device)), port_(port) {}
  void begin();  // reads every port
  // Reads every port again and compares `device`/`port` with `claim`.
  net::PathVerdict end(const net::TrafficClaim& claim) const;
  const std::string& device() const { return device_; }
  int port() const { return port_; }
  const std::string& root() const { return root_; }

 private:
  std::string root_, device_;
  int port_;
  std::vector<net::PortTraffic> before_;
};

// Rank 1's counter movement as a message (every port's delta from `v`, its configured device and
// port, host and NIC description), and rank 0's reading of it: readings check_path compares as it
// compares its own (all zero before, the deltas after; a port whose delta is invalid unreadable).
net::Message movement_message(const net::PathVerdict& v, const std::string& host, const std::string& nic_json);
struct PeerMovement {
  std::string device, host, nic_json;
  int port = 1;
  std::vector<net::PortTraffic> before, after;
};
bool read_movement(const net::Message& m, PeerMovement* out, std::string* error);

// ---- rank 0's record fields ------------------------------------------------------------------------------
struct PathFields {
  bool ok = false;
  std::string reason;  // "" when ok
  std::string path_check, peer;  // JSON objects for Record::path_check and Record::peer
};
// Rank 0's verdict `mine` (its own port against its claim) and rank 1's movement against rank 1's
// claim (`peer_error`: why rank 1's movement never came, which fails the point). `choice_why`
// says why that device was read.
PathFields path_fields(const net::PathVerdict& mine, const std::string& nic_json, const std::string& choice_why,
                       const PeerMovement* peer, const net::TrafficClaim& peer_claim, const std::string& peer_error);

// A point whose traffic is not proven to have crossed the configured ports is never ok: its ok
// records become failed with the path check's reason; every record carries the fields.
void apply_path_fields(const PathFields& f, std::vector<gicomm::bench::Record>* records);

// ---- around each point of the dissection (nvlink/dissect.cuh) -------------------------------------------
// Called by the point loop on every rank: begin() before the point's first operation, end() after
// its last (both ranks past the point's closing barrier), with what the point ran and, on rank 0,
// the point's records to amend.
class PointWatcher {
 public:
  virtual ~PointWatcher() = default;
  virtual void begin(const gicomm::bench::Point& p) = 0;
  virtual void end(const gicomm::bench::Point& p, const DissectOps& ops, std::vector<gicomm::bench::Record>* records) = 0;
};

// The path proof of a two-PE library point: each rank reads the ports of `root` around the point;
// rank 1 hands its movement to rank 0 (publish_blob / fetch_blob, one blob per point), and rank 0
// puts both verdicts into the point's records (path_fields, apply_path_fields).
class RankPathProof final : public PointWatcher {
 public:
  RankPathProof(const RankContext& ctx, const std::string& root, const HcaChoice& nic, int gid_index = 0);
  void begin(const gicomm::bench::Point& p) override;
  void end(const gicomm::bench::Point& p, const DissectOps& ops, std::vector<gicomm::bench::Record>* records) override;
  // How long rank 0 waits for rank 1's movement of a point.
  static constexpr int kPeerWaitMs = 30000;

 private:
  const RankContext& ctx_;
  PortWatch watch_;
  std::string why_, nic_json_;
  size_t points_ = 0;
};

}  // namespace gicomm::baselines
