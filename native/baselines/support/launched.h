// Library harnesses whose ranks a launcher starts (host code, tested on the CPU: test_launched):
// one rank per process, from explicit flags (--rank R --world-size 2 [--rendezvous HOST[:PORT]]),
// Open MPI or Slurm (gicomm/net/launcher.h, the native bench's launcher), instead of the two
// children the harness forks on one node (support/ranks.h, still the default). The ranks meet over
// the out-of-band exchange (gicomm/net/oob.h): rank 0's plan of points is checked by rank 1, and
// the blobs the ranks hand each other (a library's unique id, checks, counter movements) travel as
// messages of their own phase. Rank 0 writes the records, rank 1 none.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gicomm/net/launcher.h"
#include "support/ranks.h"

namespace gicomm::baselines {

// What the launch says, when it names two ranks (nullopt: no launcher, or a world of one: the
// harness forks its ranks). `flags` are the command line's launch flags (Options::launch_flags:
// rank, world-size, rendezvous, rendezvous-port, peer-timeout-ms); *error (with nullopt) when they
// or the environment are wrong, naming the flag or variable and what is allowed.
struct LaunchedRank {
  gicomm::net::Launch launch;
  int timeout_ms = 60000;  // how long a rank waits for its peer (--peer-timeout-ms)
  int local_rank = 0;      // this rank among the ranks of its host: its GPU
  int local_ranks = 1;     // ranks on this host
};
std::optional<LaunchedRank> launched_rank(const std::map<std::string, std::string>& flags,
                                          const gicomm::net::Env& env, int nranks, std::string* error);

// Runs `body` as this process's rank: connects to the peer, checks that both ranks run the same
// points (`ctx.points`, in order), runs body(ctx) with ctx.oob set, and on rank 0 records the
// points left unfinished (failed with the reason, or skipped when the body returned 3: hardware
// missing). Returns 0 once the records are written, 2 when the ranks never met.
int run_launched_rank(RankContext ctx, const LaunchedRank& me, const std::vector<std::string>& transports,
                      const std::vector<std::string>& metrics, const std::function<int(RankContext&)>& body);

}  // namespace gicomm::baselines
