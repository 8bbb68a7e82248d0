// Process plumbing shared by the baseline harnesses: run a two-rank job as forked children of a
// parent that never touches CUDA (or as one rank of two a launcher started: support/launched.h),
// exchange a small blob (an NVSHMEM or NCCL unique id) through a file (or the out-of-band session),
// and turn what the ranks left behind into records for the points they did not finish.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gicomm/net/oob.h"
#include "harness/harness.h"

namespace gicomm::baselines {

using gicomm::bench::DriverInfo;
using gicomm::bench::Options;
using gicomm::bench::Point;
using gicomm::bench::Record;

// What the parent hands every rank.
struct RankContext {
  int rank = 0;
  int nranks = 1;
  std::string rendezvous_dir;  // private temporary directory of this job (of this rank, when launched)
  // Where this rank runs among the ranks of its host (its GPU): forked ranks all share one host.
  int local_rank = 0, local_ranks = 1;
  // Ranks a launcher started: the session with the peer, which carries the blobs, and how long a
  // rank waits for its peer. nullptr: forked ranks, blobs through files of rendezvous_dir.
  std::shared_ptr<gicomm::net::OobSession> oob;
  int peer_timeout_ms = 60000;
  Options options;
  DriverInfo info;
  std::vector<Point> points;  // unfinished points of this transport, in file order
  // Provenance a rank learns once it runs, carried by every record it writes unless the record
  // sets its own: the RDMA provider that answered ("emulated", "system rdma-core <version>"), the
  // topology of the ranks, and parameters beyond the point's own (how the ranks were placed).
  std::string rdma_provider, topology;
  std::vector<std::pair<std::string, gicomm::bench::Scalar>> extra_params;
};

// Runs `body(ctx)` in `nranks` forked children (ctx.rank = 0..nranks-1) and waits for all of them,
// killing every child once `deadline_s` has passed, and the partners of a rank that failed once
// `grace_s` has passed after it. Returns how each child ended ("" for exit 0). Each child's stderr
// reaches ours through a pipe; `last_lines`, when given, gets each child's last non-empty line.
std::vector<std::string> run_ranks(int nranks, double deadline_s, const RankContext& base,
                                   const std::function<int(RankContext&)>& body, double grace_s = 10.0,
                                   std::vector<std::string>* last_lines = nullptr);

// Rank 0 publishes `blob` under `name` (write + rename); the others wait for it, at most
// `timeout_ms`. Throws std::runtime_error on timeout or I/O error. Launched ranks (ctx.oob) swap
// it as a message of phase `name`: both must call, in the same order.
void publish_blob(const RankContext& ctx, const std::string& name, const void* data, size_t size);
void fetch_blob(const RankContext& ctx, const std::string& name, void* data, size_t size, int timeout_ms);

// A rank that finds the hardware or library it needs missing calls this and returns its result
// (exit code 3); the reason ends up in the skipped records of every point.
int hardware_missing(const RankContext& ctx, const std::string& reason);
// The reason this process's last hardware_missing gave ("" when none).
const std::string& missing_reason();

// The job's private directory (tmpfs where there is one), and its removal with what it holds.
std::string make_rendezvous_dir();
void remove_rendezvous_dir(const std::string& dir);
// Opens this rank's host-load window for its first point (write_point opens the next ones).
void start_host_load_window();

// Appends `records` of one point (whole lines, one write + fsync), each with the rank's provenance
// (RankContext) where the record sets none.
void write_point(const RankContext& ctx, const Point& p, const std::vector<Record>& records);

// One record per metric with status failed/skipped and `why`.
std::vector<Record> status_records(const std::vector<std::string>& metrics, const std::string& status,
                                   const std::string& why);

// The standard entry point of a baseline driver that serves some transports itself:
// parses the contract's options, selects the unfinished points whose `transport` parameter is in
// `transports`, runs them with `nranks` ranks through `body`, and records the points that the
// ranks left unfinished as failed with the reason. Points of other transports are left alone.
// `metrics` names the metrics a failed/skipped point is reported under.
int run_baseline_driver(int argc, char** argv, const DriverInfo& info, const std::vector<std::string>& transports,
                        int nranks, const std::vector<std::string>& metrics,
                        const std::function<int(RankContext&)>& body);

// The transport of the first point in the points file the command line names, when it is one of
// `allowed`; else allowed[0] (a harness serving several transports gets one points file per
// transport from the batch runner; a bad command line is left to run_baseline_driver to report).
std::string first_point_transport(int argc, char** argv, const std::vector<std::string>& allowed);

// Points of `all` whose transport is in `transports` and whose id is not in `out`.
std::vector<Point> select_points(const std::vector<Point>& all, const std::vector<std::string>& transports,
                                 const std::string& out_path);

// Logs one progress line in the contract's format.
void log_point(const RankContext& ctx, size_t index, const Point& p, const std::string& summary, double secs);

}  // namespace gicomm::baselines
