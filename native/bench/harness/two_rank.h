// Two-rank runs and the NIC path of a point (topology.h says where they plug in). The launcher
// (native/src/net: rank and peer from flags, Slurm or Open MPI; the out-of-band session) is
// registered with the runner by net_launcher.cpp; the functions below are in nic_path.cpp. Rank 0
// measures; rank 1 serves what rank 0's transport factory asks of it, over the session:
//   verbs   open `qps` RC QPs on this rank's device (--nic-device/--nic-port/--gid-index) with a
//           buffer of `bytes` the peer may write into, connect them to the peer's QPs, read the
//           port counters, answer with its endpoint (QPNs, LID/GID, PSNs, MTU, address, rkey)
//   fetch   a piece of that buffer (what rank 0's writes left there), for the experiment's check
//   done    the point ended: read the counters again, check them against the traffic rank 0
//           posted (the receive side), answer with the verdict and this rank's provenance
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

// Two ranks: copies the peer's buffer (what this rank's writes left there) into `remote`, so the
// experiment checks the data where it landed. One rank: nothing to do.
void fetch_peer_buffer(Run& run, void* remote, size_t bytes);

// Whether the current point runs between two ranks (a launcher is installed).
bool two_ranks();

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

}  // namespace gicomm::bench
