// Two-rank runs and the NIC path of a point (topology.h says where they plug in). The launcher
// (native/src/net: rank and peer from flags, Slurm or Open MPI; the out-of-band session) is
// registered with the runner by net_launcher.cpp; the functions below are in nic_path.cpp. Rank 0
// measures; rank 1 serves what rank 0's transport factory asks of it, over the session:
//   verbs   open `qps` RC QPs on this rank's device (--nic-device/--nic-port/--gid-index) with a
//           buffer of `bytes` the peer may write into, connect them to the peer's QPs, read the
//           port counters, answer with its endpoint (QPNs, LID/GID, PSNs, MTU, address, rkey)
//   fetch   a piece of that buffer (what rank 0's writes left there), for the experiment's check
//   respond start the experiment's responder (a round trip's far half, GICOMM_EXPERIMENT_SERVE
//           below) on those QPs: it answers rank 0's writes with writes into rank 0's buffer
//   done    the point ended: stop the responder, read the counters again, check them against the
//           traffic rank 0 posted (the receive side) and the responder sent, answer with the
//           verdict, the responder's outcome and this rank's provenance
// Rank 1 writes no records: its provenance (host, device, firmware, GID) and its path verdict are
// in rank 0's records (`peer`, `path_check.peer_*`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gicomm/gda/peer_qp.h"
#include "gicomm/net/oob.h"
#include "gicomm/proxy/backend.h"
#include "harness/runner.h"

namespace gicomm::bench {

// mini-proxy's verbs backend for the current point: two ranks: `qps` QPs on this rank's device
// connected to the peer's, writes landing in the peer's buffer of `remote_bytes`; one rank:
// loopback on one device, only when the run says --topology loopback (else HardwareMissing saying
// how to run it). Counts what the workers post and installs the point's link (path proof, peer
// provenance) in `run`; sets run.topology. HardwareMissing when the device cannot be opened.
std::unique_ptr<proxy::Backend> open_verbs_path(Run& run, uint32_t qps, void* remote, size_t remote_bytes,
                                                void* local, size_t local_bytes);

// Two ranks: the address and rkey of this rank's `remote` buffer as open_verbs_path offered it to
// the peer for the current point (where a responder may be told to answer); false otherwise.
bool offered_buffer(const Run& run, uint64_t* addr, uint32_t* rkey);

// Two ranks: copies the peer's buffer (what this rank's writes left there) into `remote`, so the
// experiment checks the data where it landed. One rank: nothing to do.
void fetch_peer_buffer(Run& run, void* remote, size_t bytes);

// Whether the current point runs between two ranks (a launcher is installed).
bool two_ranks();

// Two ranks: fails the point ("bad parameter: ...") for an experiment, or a form of one, that does
// not run between two ranks; `missing` names what it would need. One process: nothing.
void refuse_two_ranks(const Run& run, const std::string& what, const std::string& missing);

// mini-gda's mlx5 placement: where the QPs of the current point connect. One rank: each QP to
// itself, only when the run says --topology loopback (else HardwareMissing saying how to run it);
// sets run.topology.
void require_gda_topology(Run& run);

// Two ranks: what gda::SessionConfig::connect_peer does. The peer opens as many QPs (PSN 0) with a
// buffer of `dst_bytes` and answers with its QPs, the path MTU, and the buffer's address and rkey
// (filled into *peer_buffer once the session connected).
struct PeerBuffer {
  uint64_t addr = 0;
  uint32_t rkey = 0;
};
using GdaConnector = std::function<bool(const std::vector<gda::PeerQp>&, std::vector<gda::PeerQp>*, uint32_t*,
                                        std::string*)>;
GdaConnector gda_peer_connector(Run& run, size_t dst_bytes, std::shared_ptr<PeerBuffer> peer_buffer);

// Installs the point's link for mini-gda's mlx5 QPs: `posted_wqes` counts the WQEs the QPs have
// posted so far (the path proof expects at least one packet each from now on).
void attach_gda_link(Run& run, std::function<uint64_t()> posted_wqes);

// ---- Round trips between two ranks: rank 1's responder ----------------------------------------
// An experiment whose answer comes from the peer (a ping-pong) registers rank 1's half beside its
// measurement: GICOMM_EXPERIMENT_SERVE(name, fn) next to GICOMM_EXPERIMENT(name, measure). Rank 0's
// experiment asks for it with start_peer_responder() once the point's QPs are connected; rank 1
// calls fn with what it holds for the point and keeps the responder running while it serves rank
// 0's further requests. The point's end stops it: its outcome (the answers it sent, or the wait
// that timed out) comes back with rank 1's path verdict, a failed responder fails the point's
// records, and a failed point's error carries what rank 1's responder saw, so the record says which
// side timed out. The responder's writes are part of the path proof (rank 1 sends, rank 0 receives).

// What rank 1 holds for the point when rank 0 asks for its responder.
struct ResponderSetup {
  const net::Message& request;      // rank 0's parameters for the responder
  const uint64_t* landing;          // rank 1's buffer, where rank 0's writes land (host memory)
  size_t landing_bytes;
  proxy::Backend& backend;          // rank 1's QPs: worker w posts on QP w into rank 0's buffer
  uint32_t qps;
  uint64_t timeout_ns;              // the run's --timeout-ms
};

class Responder {
 public:
  virtual ~Responder() = default;
  // Stops it (it may have stopped on its own: timed out) and waits for what it posted to complete.
  // True when it answered every request it saw and nothing failed. `answers` gets how many answers
  // it sent, `state` what it saw (the requests, the answers, the wait it timed out in or was
  // stopped in), for the record of a failed point.
  virtual bool stop(uint64_t* answers, std::string* state) = 0;
};

using ServeFn = std::function<std::unique_ptr<Responder>(const ResponderSetup&)>;
struct ServeRegistration {
  ServeRegistration(const char* name, ServeFn fn);
};
#define GICOMM_EXPERIMENT_SERVE(name, fn) \
  static const ::gicomm::bench::ServeRegistration gicomm_serve_registration_##name(#name, fn)

// Rank 1's half of `experiment` (nullptr: it registers none).
ServeFn find_responder(const std::string& experiment);

// Rank 0: starts rank 1's responder for the current point, whose QPs are connected
// (open_verbs_path made them); `params` carries what the experiment's responder needs. Throws
// PointFailure with rank 1's reason (no responder registered, bad parameters, no QPs).
void start_peer_responder(Run& run, const net::Message& params);

}  // namespace gicomm::bench
