// See launched.h.
#include "support/launched.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace gicomm::baselines {

namespace {

bool is_loopback(const std::string& host) {
  return host.empty() || host == "localhost" || host == "127.0.0.1" || host == "::1" ||
         net::short_host(host) == net::short_host(net::this_host());
}

int env_int(const net::Env& env, const char* key, int fallback) {
  const auto it = env.find(key);
  if (it == env.end() || it->second.empty()) return fallback;
  char* end = nullptr;
  const long v = std::strtol(it->second.c_str(), &end, 10);
  return *end == '\0' && v >= 0 && v < 4096 ? static_cast<int>(v) : fallback;
}

// Where this rank sits among the ranks of its host: Slurm's node list says which ranks share it;
// Open MPI says outright; explicit flags put both ranks on this host when rank 0 listens here
// (a local two-process run), else each on its own.
void place_locally(const net::Env& env, LaunchedRank* me) {
  const net::Launch& l = me->launch;
  if (l.source == "openmpi") {
    me->local_rank = env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
    me->local_ranks = env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
    return;
  }
  if (!l.hosts.empty()) {
    me->local_rank = 0;
    me->local_ranks = 0;
    for (int r = 0; r < l.world; ++r) {
      if (l.host_of(r) != l.host_of(l.rank)) continue;
      if (r < l.rank) ++me->local_rank;
      ++me->local_ranks;
    }
    return;
  }
  const bool here = is_loopback(l.rendezvous_host);
  me->local_rank = here ? l.rank : 0;
  me->local_ranks = here ? l.world : 1;
}

// Both ranks agree on the points (net::agree_on_plan); rank 1 keeps its own of rank 0's plan.
// "" or why not.
std::string agree_on_points(RankContext* ctx) {
  std::vector<std::string> ids;
  for (const Point& p : ctx->points) ids.push_back(p.point_id);
  std::string why;
  const auto plan = net::agree_on_plan(*ctx->oob, ids,
                                       "among rank " + std::to_string(ctx->rank) + "'s points of this transport",
                                       ctx->peer_timeout_ms, &why);
  if (!plan) return why;
  std::vector<Point> mine;
  for (const std::string& id : *plan)
    for (const Point& p : ctx->points)
      if (p.point_id == id) {
        mine.push_back(p);
        break;
      }
  ctx->points = mine;
  return "";
}

}  // namespace

std::optional<LaunchedRank> launched_rank(const std::map<std::string, std::string>& flags, const net::Env& env,
                                          int nranks, std::string* error) {
  const auto named = net::launch_of(flags, env, nranks,
                                    "this harness runs " + std::to_string(nranks) + " ranks, one per process", error);
  if (!named) return std::nullopt;
  LaunchedRank me;
  me.launch = named->launch;
  me.timeout_ms = named->peer_timeout_ms;
  place_locally(env, &me);
  return me;
}

int run_launched_rank(RankContext ctx, const LaunchedRank& me, const std::vector<std::string>& transports,
                      const std::vector<std::string>& metrics, const std::function<int(RankContext&)>& body) {
  ctx.rank = me.launch.rank;
  ctx.nranks = me.launch.world;
  ctx.local_rank = me.local_rank;
  ctx.local_ranks = me.local_ranks;
  ctx.peer_timeout_ms = me.timeout_ms;
  const std::vector<Point> mine = ctx.points;
  std::fprintf(stderr, "[gicomm] rank %d of %d (from %s; rank 0 at %s:%d), local rank %d of %d\n", ctx.rank,
               ctx.nranks, me.launch.source.c_str(), me.launch.rendezvous_host.c_str(), me.launch.rendezvous_port,
               ctx.local_rank, ctx.local_ranks);
  net::Identity id;
  id.experiment = ctx.options.experiment.empty() ? "-" : ctx.options.experiment;
  id.point = "-";
  id.run = ctx.options.run_index;
  std::string why, err;
  int code = 0;
  ctx.rendezvous_dir = make_rendezvous_dir();
  std::unique_ptr<net::OobSession> session = net::OobSession::establish(me.launch, id, me.timeout_ms, &err);
  if (!session) {
    why = err;
  } else {
    ctx.oob = std::move(session);
    why = agree_on_points(&ctx);
    if (why.empty() && !ctx.points.empty()) {
      start_host_load_window();
      try {
        code = body(ctx);
        if (code != 0 && code != 3) why = "rank " + std::to_string(ctx.rank) + " ended with code " + std::to_string(code);
      } catch (const std::exception& e) {
        why = "rank " + std::to_string(ctx.rank) + ": " + e.what();
      }
    }
  }
  remove_rendezvous_dir(ctx.rendezvous_dir);
  if (!why.empty()) std::fprintf(stderr, "[gicomm] rank %d: %s\n", ctx.rank, why.c_str());
  if (ctx.rank != 0) return why.empty() ? 0 : 1;
  // Rank 0: the points it did not record, with the reason.
  const bool missing = code == 3;
  for (const Point& p : select_points(mine, transports, ctx.options.out_path)) {
    const std::string text = missing ? "not measurable on this host: " + missing_reason()
                                     : why.empty() ? "rank 0 ended without recording this point" : why;
    write_point(ctx, p, status_records(metrics, missing ? "skipped" : "failed", text));
  }
  return 0;
}

}  // namespace gicomm::baselines
