// Where two-rank runs and NIC paths plug into the harness once, instead of into each driver:
//  - a two-rank launcher (harness/net_launcher.cpp over the library in native/src/net/): this
//    process's rank and its peer from Slurm, mpirun or flags, and the out-of-band exchange. The
//    runner meets the peer once per run (the points rank 0 will measure) and once per point;
//    rank 0 measures, rank 1 serves what rank 0's transport factory asks of it (QPs connected to
//    rank 0's, a buffer to write into, its port counters) and writes no records.
//  - the NIC path of a point (PointLink): made by the transport factory when a point's QPs go
//    through an RDMA device (mlx5, verbs), finished by the runner after the experiment: the port
//    counters of both ranks against the traffic the point posted (path_check), and the peer's
//    provenance (peer), on every record of the point.
//  - an emulated rdma-core (native/emu/) needs no hook: the factory asks which rdma-core answers
//    (gicomm::mlx5dev::rdma_provider(): "emulated" or "system rdma-core <version>").
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gicomm::bench {

struct Options;
struct Record;

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // "rank 1 (host nodeb)": how messages name the peer.
  virtual std::string peer_name() const = 0;
  // Meets the peer for the run (same build, experiment and run index: checked). Rank 0 passes the
  // points it will measure, in order; rank 1 passes the ids of its own points file and gets rank
  // 0's list back (every id must be in its file). Throws naming the peer and the reason.
  virtual std::vector<std::string> begin_run(const std::string& experiment, int run_index,
                                             const std::vector<std::string>& points) = 0;
  // Both ranks at the same point (checked); throws naming the peer.
  virtual void begin_point(const std::string& point_id) = 0;
  // Rank 0: the point ended; tells rank 1 when no PointLink did (the point used no NIC).
  virtual void end_point(const std::string& failure) = 0;
  // Rank 0: this point is the last (the hardware a point needs is missing: exit 3); rank 1 hears
  // it with the point's end and stops too (PeerStopped).
  virtual void stop_after_point() = 0;
  // Rank 1: serves rank 0's requests for the current point until rank 0 ends it. Returns a line
  // for the log; throws when rank 0 goes away or asks what this rank cannot give.
  virtual std::string serve_point(const Options& options) = 0;
};

// Thrown by serve_point when rank 0 stops the run after the point (rank 1 exits 3 as rank 0 does).
struct PeerStopped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The launcher of this process (nullptr: one process).
void install_launcher(std::unique_ptr<Launcher> launcher);
Launcher* launcher();

// How the launcher library makes one: from the launch flags of the command line (--rank,
// --world-size, --rendezvous, --rendezvous-port, --peer-timeout-ms: `flags` maps each given name,
// without dashes, to its value) and the environment (Slurm, Open MPI); nullptr when they describe
// a single process, or with `error` set when they are inconsistent. The library registers it (a
// static object in its file, linked into the drivers that run NIC experiments); the runner calls it
// once, before the first point, and installs what it returns.
using LauncherFactory = std::unique_ptr<Launcher> (*)(const std::map<std::string, std::string>& flags,
                                                      std::string* error);
void register_launcher_factory(LauncherFactory factory);
LauncherFactory launcher_factory();

// The NIC path of one point (see above). finish() runs after the experiment returned (`failure`
// empty) or threw (its message): it ends the peer's side, reads the counters and adds path_check
// (and peer) to every record, failing the records whose path check failed.
class PointLink {
 public:
  virtual ~PointLink() = default;
  virtual void finish(std::vector<Record>* records, const std::string& failure) = 0;
};

}  // namespace gicomm::bench
