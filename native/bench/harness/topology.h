// Where later work plugs into the harness once, instead of into each driver:
//  - a two-rank launcher (a library under native/src/net/): this process's rank, the world size
//    and its peer, from Slurm, mpirun or flags, and the out-of-band exchange of what the ranks
//    must tell each other (QP numbers, addresses, keys). It installs itself before the point loop;
//    without one the process is the whole run (topology single-process, or loopback when the NIC
//    connects QPs to themselves).
//  - an emulated rdma-core (native/emu/) that answers the rdma-core API for the mlx5 and verbs
//    backends: nothing to plug here; the transport factory asks which rdma-core answers
//    (gicomm::mlx5dev::rdma_provider(): "emulated" or "system rdma-core <version>") and every
//    record of those backends carries it as rdma_provider, so emulated numbers never pass for a
//    real NIC's.
// The runner stamps each point's records with the topology; the factory adds rdma_provider and
// where the doorbell goes (doorbell_target).
#pragma once

#include <map>
#include <memory>
#include <string>

namespace gicomm::bench {

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual int peer() const = 0;
  // Gives `mine` to the peer under `key` and returns the peer's; throws (naming the key, the peer
  // and what was waited for) when the peer does not answer within `timeout_ms`.
  virtual std::string exchange(const std::string& key, const std::string& mine, int timeout_ms) = 0;
};

// The launcher of this process (nullptr: one process).
void install_launcher(std::unique_ptr<Launcher> launcher);
Launcher* launcher();

// How the launcher library makes one: from the launch flags of the command line (--rank,
// --world-size, --rendezvous, --rendezvous-port: `flags` maps each given name, without dashes, to
// its value) and the environment (Slurm, Open MPI); nullptr when they describe a single process,
// or with `error` set when they are inconsistent. The library registers it (a static object in
// its file, linked into the drivers that run on two ranks); the runner calls it once, before the
// first point, and installs what it returns.
using LauncherFactory = std::unique_ptr<Launcher> (*)(const std::map<std::string, std::string>& flags,
                                                      std::string* error);
void register_launcher_factory(LauncherFactory factory);
LauncherFactory launcher_factory();

}  // namespace gicomm::bench
