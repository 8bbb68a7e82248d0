// Rank, world size and rendezvous from flags, Open MPI or Slurm (see gicomm/net/launcher.h).
#include "gicomm/net/launcher.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "gicomm/net/hostlist.h"

extern char** environ;

namespace gicomm::net {
namespace {

const std::string* find(const Env& env, const char* key) {
  const auto it = env.find(key);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

bool parse_int(const std::string& text, long lo, long hi, long* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (errno || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool int_var(const Env& env, const char* key, long lo, long hi, long* out, std::string* error) {
  const std::string* v = find(env, key);
  if (!v) {
    *error = std::string(key) + " is not set";
    return false;
  }
  if (!parse_int(*v, lo, hi, out)) {
    *error = std::string(key) + "='" + *v + "' is not an integer in " + std::to_string(lo) + ".." +
             std::to_string(hi);
    return false;
  }
  return true;
}

// "host" or "host:port" (the port in 1..65535). An IPv6 literal goes in brackets: [::1]:17517.
bool split_host_port(const std::string& what, const std::string& text, std::string* host, int* port,
                     std::string* error) {
  std::string h = text;
  std::string p;
  if (!h.empty() && h[0] == '[') {
    const size_t close = h.find(']');
    if (close == std::string::npos) {
      *error = what + "='" + text + "': unmatched '['";
      return false;
    }
    p = close + 1 < h.size() && h[close + 1] == ':' ? h.substr(close + 2) : "";
    h = h.substr(1, close - 1);
  } else if (h.find(':') != std::string::npos && h.find(':') == h.rfind(':')) {
    p = h.substr(h.find(':') + 1);
    h = h.substr(0, h.find(':'));
  }
  long v = 0;
  if (!p.empty() && !parse_int(p, 1, 65535, &v)) {
    *error = what + "='" + text + "': port '" + p + "' is not in 1..65535";
    return false;
  }
  if (h.empty()) {
    *error = what + "='" + text + "': no host";
    return false;
  }
  *host = h;
  if (!p.empty()) *port = static_cast<int>(v);
  return true;
}

// Rank -> node index under Slurm's block or cyclic distribution of `tasks` over nodes that take
// counts[k] tasks each. false when the distribution is neither.
bool slurm_rank_nodes(const std::vector<int>& counts, int tasks, const std::string& distribution,
                      std::vector<int>* node_of, std::string* error) {
  node_of->clear();
  const std::string kind = distribution.substr(0, distribution.find_first_of(":,"));
  if (kind.empty() || kind == "block") {
    for (size_t k = 0; k < counts.size(); ++k)
      for (int t = 0; t < counts[k]; ++t) node_of->push_back(static_cast<int>(k));
  } else if (kind == "cyclic") {
    std::vector<int> left = counts;
    bool placed = true;
    while (placed) {
      placed = false;
      for (size_t k = 0; k < left.size(); ++k)
        if (left[k] > 0) {
          --left[k];
          node_of->push_back(static_cast<int>(k));
          placed = true;
        }
    }
  } else {
    *error = "SLURM_DISTRIBUTION='" + distribution +
             "': rank 0's host is known only for block or cyclic distributions; pass --rendezvous HOST";
    return false;
  }
  if (static_cast<int>(node_of->size()) != tasks) {
    *error = "the step's tasks per node add up to " + std::to_string(node_of->size()) + ", SLURM_NTASKS is " +
             std::to_string(tasks);
    return false;
  }
  return true;
}

bool from_slurm(const Env& env, Launch* out, std::string* error) {
  long rank = 0, world = 0;
  if (!int_var(env, "SLURM_PROCID", 0, INT_MAX, &rank, error)) return false;
  const char* world_key = find(env, "SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  if (!int_var(env, world_key, 1, INT_MAX, &world, error)) return false;
  if (rank >= world) {
    *error = "SLURM_PROCID=" + std::to_string(rank) + " is not below " + world_key + "=" + std::to_string(world);
    return false;
  }
  out->rank = static_cast<int>(rank);
  out->world = static_cast<int>(world);
  out->source = "slurm";
  const char* list_key = find(env, "SLURM_STEP_NODELIST")  ? "SLURM_STEP_NODELIST"
                         : find(env, "SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST"
                                                           : "SLURM_NODELIST";
  const char* tpn_key = find(env, "SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
  const std::string* list = find(env, list_key);
  const std::string* tpn = find(env, tpn_key);
  if (!list || !tpn) {
    *error = std::string(list ? tpn_key : list_key) + " is not set: started by srun? (pass --rendezvous HOST otherwise)";
    return false;
  }
  std::vector<std::string> nodes;
  std::vector<int> counts;
  if (!expand_hostlist(*list, &nodes, error) || !expand_tasks_per_node(*tpn, &counts, error)) {
    *error = std::string(list_key) + "/" + tpn_key + ": " + *error;
    return false;
  }
  if (counts.size() != nodes.size()) {
    *error = std::string(tpn_key) + "='" + *tpn + "' gives " + std::to_string(counts.size()) + " nodes, " + list_key +
             "='" + *list + "' has " + std::to_string(nodes.size());
    return false;
  }
  const std::string* dist = find(env, "SLURM_DISTRIBUTION");
  std::vector<int> node_of;
  if (!slurm_rank_nodes(counts, out->world, dist ? *dist : "", &node_of, error)) return false;
  for (int n : node_of) out->hosts.push_back(nodes[static_cast<size_t>(n)]);
  out->rendezvous_host = out->hosts[0];
  out->note = "rank 0's host from " + std::string(list_key) + "='" + *list + "', " + tpn_key + "='" + *tpn +
              "', distribution " + (dist ? *dist : "block");
  // A port of this job step's own, so two steps on a shared node do not meet each other.
  long job = 0, step = 0;
  if (find(env, "SLURM_JOB_ID") && parse_int(*find(env, "SLURM_JOB_ID"), 0, LONG_MAX, &job)) {
    if (find(env, "SLURM_STEP_ID")) parse_int(*find(env, "SLURM_STEP_ID"), 0, LONG_MAX, &step);
    out->rendezvous_port = 15000 + static_cast<int>((job * 16 + step) % 15000);
  }
  return true;
}

bool from_openmpi(const Env& env, Launch* out, std::string* error) {
  long rank = 0, world = 0;
  if (!int_var(env, "OMPI_COMM_WORLD_SIZE", 1, INT_MAX, &world, error)) return false;
  if (!int_var(env, "OMPI_COMM_WORLD_RANK", 0, world - 1, &rank, error)) return false;
  out->rank = static_cast<int>(rank);
  out->world = static_cast<int>(world);
  out->source = "openmpi";
  return true;
}

}  // namespace

Env process_env() {
  Env env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

bool parse_launch_flag(const std::string& key, const std::string& value, LaunchFlags* flags, std::string* error) {
  long v = 0;
  if (key == "rank" || key == "world-size") {
    const long lo = key == "rank" ? 0 : 1;
    if (!parse_int(value, lo, INT_MAX, &v)) {
      *error = "--" + key + " '" + value + "' is not an integer >= " + std::to_string(lo);
      return true;
    }
    (key == "rank" ? flags->rank : flags->world) = static_cast<int>(v);
    return true;
  }
  if (key == "rendezvous") {
    if (value.empty()) *error = "--rendezvous needs HOST or HOST:PORT";
    flags->rendezvous = value;
    return true;
  }
  if (key == "rendezvous-port") {
    if (!parse_int(value, 1, 65535, &v)) {
      *error = "--rendezvous-port '" + value + "' is not in 1..65535";
      return true;
    }
    flags->port = static_cast<int>(v);
    return true;
  }
  return false;
}

std::string Launch::host_of(int r) const {
  if (r >= 0 && static_cast<size_t>(r) < hosts.size()) return hosts[static_cast<size_t>(r)];
  return r == 0 ? rendezvous_host : "";
}

std::string Launch::name_rank(int r) const {
  const std::string h = host_of(r);
  return "rank " + std::to_string(r) + (h.empty() ? "" : " (host " + h + ")");
}

bool resolve_launch(const LaunchFlags& flags, const Env& env, Launch* out, std::string* error) {
  *out = Launch{};
  if (flags.rank.has_value() != flags.world.has_value()) {
    *error = flags.rank ? "--rank needs --world-size too" : "--world-size needs --rank too";
    return false;
  }
  if (flags.rank) {
    if (*flags.rank >= *flags.world) {
      *error = "--rank " + std::to_string(*flags.rank) + " is not below --world-size " + std::to_string(*flags.world);
      return false;
    }
    out->rank = *flags.rank;
    out->world = *flags.world;
    out->source = "flags";
    out->rendezvous_host = "localhost";
    out->note = "rank 0 on localhost (explicit flags)";
  } else if (find(env, "OMPI_COMM_WORLD_RANK") || find(env, "OMPI_COMM_WORLD_SIZE")) {
    if (!from_openmpi(env, out, error)) return false;
  } else if (find(env, "SLURM_PROCID")) {
    if (!from_slurm(env, out, error)) return false;
  } else {
    *error = "no rank: not started by srun (SLURM_PROCID) or mpirun (OMPI_COMM_WORLD_RANK), and no --rank/--world-size";
    return false;
  }
  // Overrides, flags before the environment: --rendezvous-port, --rendezvous HOST:PORT,
  // GICOMM_RENDEZVOUS_PORT, GICOMM_RENDEZVOUS=HOST:PORT, then the launcher's own.
  const std::string* env_rdv = find(env, "GICOMM_RENDEZVOUS");
  const std::string* env_port = find(env, "GICOMM_RENDEZVOUS_PORT");
  int flag_rdv_port = 0, env_rdv_port = 0;
  long env_port_value = 0;
  if (!flags.rendezvous.empty()) {
    if (!split_host_port("--rendezvous", flags.rendezvous, &out->rendezvous_host, &flag_rdv_port, error))
      return false;
    out->note = "rank 0's host from --rendezvous";
  } else if (env_rdv) {
    if (!split_host_port("GICOMM_RENDEZVOUS", *env_rdv, &out->rendezvous_host, &env_rdv_port, error)) return false;
    out->note = "rank 0's host from GICOMM_RENDEZVOUS";
  }
  if (env_port && !parse_int(*env_port, 1, 65535, &env_port_value)) {
    *error = "GICOMM_RENDEZVOUS_PORT='" + *env_port + "' is not in 1..65535";
    return false;
  }
  for (const int p : {flags.port, flag_rdv_port, static_cast<int>(env_port_value), env_rdv_port})
    if (p) {
      out->rendezvous_port = p;
      break;
    }
  if (out->rendezvous_host.empty()) {
    *error = "mpirun does not tell a rank where rank 0 runs: pass --rendezvous HOST (rank 0's host) or export "
             "GICOMM_RENDEZVOUS=HOST to every rank (mpirun -x GICOMM_RENDEZVOUS)";
    return false;
  }
  // Under Slurm, rank 0 checks that it runs where the others will look for it.
  const std::string* node_name = find(env, "SLURMD_NODENAME");
  if (out->source == "slurm" && flags.rendezvous.empty() && !env_rdv && out->rank == 0 && node_name &&
      *node_name != out->rendezvous_host) {
    *error = "Slurm placed rank 0 on " + *node_name + ", but " + out->note + " puts it on " + out->rendezvous_host +
             ": use block distribution or pass --rendezvous HOST";
    return false;
  }
  return true;
}

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string short_host(const std::string& host) { return host.substr(0, host.find('.')); }

std::optional<NamedLaunch> launch_of(const std::map<std::string, std::string>& flags, const Env& env, int world,
                                     const std::string& runs, std::string* error) {
  error->clear();
  NamedLaunch named;
  LaunchFlags lf;
  for (const auto& [key, value] : flags) {
    if (key == "peer-timeout-ms") {
      char* end = nullptr;
      const long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 100 || v > 86400000) {
        *error = "--peer-timeout-ms " + value + ": allowed: an integer from 100 to 86400000";
        return std::nullopt;
      }
      named.peer_timeout_ms = static_cast<int>(v);
      continue;
    }
    if (!parse_launch_flag(key, value, &lf, error)) *error = "--" + key + ": not a launch flag";
    if (!error->empty()) return std::nullopt;
  }
  if (flags.empty() && !env.count("SLURM_PROCID") && !env.count("OMPI_COMM_WORLD_RANK")) return std::nullopt;
  if (!resolve_launch(lf, env, &named.launch, error)) return std::nullopt;
  if (named.launch.world == 1) return std::nullopt;
  if (named.launch.world != world) {
    *error = "world size " + std::to_string(named.launch.world) + " (from " + named.launch.source + "): " + runs;
    return std::nullopt;
  }
  return named;
}

}  // namespace gicomm::net
