// Who am I among the ranks of a two-node point, and where is rank 0: one answer from three
// launchers, so the code after it is the same for all of them.
//
//   explicit flags   --rank R --world-size N [--rendezvous HOST[:PORT]] [--rendezvous-port P]
//                    (a local two-process run; rank 0's host defaults to localhost)
//   Open MPI         OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE; mpirun tells a rank nothing about
//                    where rank 0 runs, so the rendezvous host comes from --rendezvous or
//                    GICOMM_RENDEZVOUS (mpirun -x GICOMM_RENDEZVOUS=<first host>)
//   Slurm (srun)     SLURM_PROCID / SLURM_NTASKS, the step's node list (SLURM_STEP_NODELIST, else
//                    SLURM_JOB_NODELIST / SLURM_NODELIST) and tasks per node: rank 0's host and the
//                    peer's host follow from the task distribution (block or cyclic)
//
// The first that applies wins, in that order: flags over Open MPI (mpirun under an sbatch
// allocation also carries SLURM_* variables, which then describe mpirun's daemons, not the
// ranks) over Slurm. GICOMM_RENDEZVOUS=HOST[:PORT] and GICOMM_RENDEZVOUS_PORT override the host
// and port of any source when no flag names them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gicomm::net {

using Env = std::map<std::string, std::string>;
// This process's environment.
Env process_env();

// The port rank 0 listens on when nothing names one (outside Slurm).
constexpr int kDefaultRendezvousPort = 17517;

struct LaunchFlags {
  std::optional<int> rank, world;
  std::string rendezvous;  // HOST or HOST:PORT; empty: from the launcher
  int port = 0;            // 0: from --rendezvous, the environment, or the default
};

// Consumes one command-line option if it is a launch flag (rank, world-size, rendezvous,
// rendezvous-port; `key` without the leading dashes). Returns false when `key` is not one; sets
// *error (and returns true) when it is one with a bad value.
bool parse_launch_flag(const std::string& key, const std::string& value, LaunchFlags* flags,
                       std::string* error);

struct Launch {
  int rank = 0;
  int world = 1;
  std::string source;           // "flags", "openmpi" or "slurm"
  std::string rendezvous_host;  // where rank 0 listens (its host)
  int rendezvous_port = kDefaultRendezvousPort;
  std::vector<std::string> hosts;  // host of each rank where the launcher says (Slurm); else empty
  std::string note;                // how rank 0's host was found, for logs and provenance

  // The host of `r` as the launcher tells it ("" when it does not say).
  std::string host_of(int r) const;
  // "rank 1 (host nodeb)" or "rank 1": how errors name a rank.
  std::string name_rank(int r) const;
};

// Resolves the launch from flags and the environment. false and a one-line reason that names the
// variable or flag at fault and what is allowed.
bool resolve_launch(const LaunchFlags& flags, const Env& env, Launch* out, std::string* error);

// A launch named on a command line: the launch flags by name (`flags`: rank, world-size,
// rendezvous, rendezvous-port and peer-timeout-ms, without dashes) and the environment.
struct NamedLaunch {
  Launch launch;
  int peer_timeout_ms = 60000;  // how long a rank waits for its peer (--peer-timeout-ms)
};
// nullopt with *error empty: no flag and no Slurm or Open MPI rank (one process), or a world of
// one. nullopt and *error: a flag or variable is wrong, or the world is not `world` ("world size 4
// (from slurm): <runs>").
std::optional<NamedLaunch> launch_of(const std::map<std::string, std::string>& flags, const Env& env, int world,
                                     const std::string& runs, std::string* error);

// This host's name (gethostname), and its short form (up to the first dot).
std::string this_host();
std::string short_host(const std::string& host);

}  // namespace gicomm::net
