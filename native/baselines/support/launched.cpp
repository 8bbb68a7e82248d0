// See launched.h.
#include "support/launched.h"

#include <cstdio>
#include <cstdlib>
#include <set>
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

// Both ranks agree on the points: rank 0 sends its plan, rank 1 takes it (every id must be one of
// its own points of these transports). "" or why not.
std::string agree_on_points(RankContext* ctx) {
  net::Message mine, theirs;
  if (ctx->rank == 0) {
    mine.set_u64("points", ctx->points.size());
    for (size_t i = 0; i < ctx->points.size(); ++i) mine.set("point." + std::to_string(i), ctx->points[i].point_id);
  }
  std::string err;
  if (!ctx->oob->exchange("plan", mine, &theirs, ctx->peer_timeout_ms, &err)) return err;
  std::string verdict = "ok";
  if (ctx->rank != 0) {
    uint64_t n = 0;
    if (!theirs.get_u64("points", 1u << 20, &n, &err)) {
      verdict = ctx->oob->peer_name() + " sent a bad plan: " + err;
    } else {
      std::vector<Point> plan;
      for (uint64_t i = 0; i < n && verdict == "ok"; ++i) {
        const std::string id = theirs.get("point." + std::to_string(i));
        const Point* found = nullptr;
        for (const Point& p : ctx->points)
          if (p.point_id == id) found = &p;
        if (found)
          plan.push_back(*found);
        else
          verdict = "point " + id + " is not among rank " + std::to_string(ctx->rank) +
                    "'s points of this transport (give both ranks the same --points)";
      }
      ctx->points = plan;
    }
  }
  net::Message check;
  check.set("status", verdict);
  if (!ctx->oob->exchange("plan-check", check, &theirs, ctx->peer_timeout_ms, &err)) return err;
  if (verdict != "ok") return verdict;
  if (theirs.get("status") != "ok") return ctx->oob->peer_name() + " refused the plan: " + theirs.get("status");
  return "";
}

}  // namespace

std::optional<LaunchedRank> launched_rank(const std::map<std::string, std::string>& flags, const net::Env& env,
                                          int nranks, std::string* error) {
  error->clear();
  LaunchedRank me;
  net::LaunchFlags lf;
  for (const auto& [key, value] : flags) {
    if (key == "peer-timeout-ms") {
      char* end = nullptr;
      const long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 100 || v > 86400000) {
        *error = "--peer-timeout-ms " + value + ": allowed: an integer from 100 to 86400000";
        return std::nullopt;
      }
      me.timeout_ms = static_cast<int>(v);
      continue;
    }
    if (!net::parse_launch_flag(key, value, &lf, error)) *error = "--" + key + ": not a launch flag";
    if (!error->empty()) return std::nullopt;
  }
  // Nothing names a rank: the harness forks its ranks.
  const bool named = flags.count("rank") || flags.count("world-size") || flags.count("rendezvous") ||
                     flags.count("rendezvous-port");
  if (!named && !env.count("SLURM_PROCID") && !env.count("OMPI_COMM_WORLD_RANK")) return std::nullopt;
  if (!net::resolve_launch(lf, env, &me.launch, error)) return std::nullopt;
  if (me.launch.world == 1) return std::nullopt;
  if (me.launch.world != nranks) {
    *error = "world size " + std::to_string(me.launch.world) + " (from " + me.launch.source + "): this harness runs " +
             std::to_string(nranks) + " ranks, one per process";
    return std::nullopt;
  }
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
