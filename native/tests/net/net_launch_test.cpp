// Slurm host/task lists and the rank launcher: one answer from flags, Open MPI and Slurm, and a
// reason that names the variable or flag for every bad input.
#include <string>
#include <vector>

#include "check.h"
#include "gicomm/net/hostlist.h"
#include "gicomm/net/launcher.h"

using namespace gicomm::net;

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

void expands(const std::string& list, const std::string& want) {
  std::vector<std::string> hosts;
  std::string err;
  REQUIRE(expand_hostlist(list, &hosts, &err), "%s: %s", list.c_str(), err.c_str());
  REQUIRE(joined(hosts) == want, "%s -> '%s', want '%s'", list.c_str(), joined(hosts).c_str(), want.c_str());
}

void refuses(const std::string& list, const std::string& needle) {
  std::vector<std::string> hosts;
  std::string err;
  REQUIRE(!expand_hostlist(list, &hosts, &err), "%s expanded to '%s'", list.c_str(), joined(hosts).c_str());
  REQUIRE(err.find(needle) != std::string::npos, "%s: '%s' lacks '%s'", list.c_str(), err.c_str(), needle.c_str());
}

void hostlists() {
  expands("node1", "node1");
  expands("a,b", "a b");
  expands("gpu[01-03,7],login1", "gpu01 gpu02 gpu03 gpu7 login1");
  expands("n[8-10]", "n8 n9 n10");
  expands("n[08-10]", "n08 n09 n10");
  expands("r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2");
  expands("rack[1-2]-gpu[3]-ib", "rack1-gpu3-ib rack2-gpu3-ib");
  expands("x-[0001-0002].cluster,y", "x-0001.cluster x-0002.cluster y");
  refuses("", "empty");
  refuses("n[1-", "unmatched '['");
  refuses("n1]", "brackets do not pair up");
  refuses("n[3-1]", "runs backwards");
  refuses("n[a-b]", "range 'a-b'");
  refuses("n[1-99999999]", "more than");
  refuses("a,,b", "empty host name");

  std::vector<int> counts;
  std::string err;
  REQUIRE(expand_tasks_per_node("2(x3),1", &counts, &err));
  REQUIRE((counts == std::vector<int>{2, 2, 2, 1}));
  REQUIRE(expand_tasks_per_node("1", &counts, &err) && counts == std::vector<int>{1});
  REQUIRE(!expand_tasks_per_node("2(x", &counts, &err) && err.find("N(xM)") != std::string::npos);
  REQUIRE(!expand_tasks_per_node("two", &counts, &err));
}

Launch resolves(const LaunchFlags& f, const Env& env) {
  Launch l;
  std::string err;
  REQUIRE(resolve_launch(f, env, &l, &err), "%s", err.c_str());
  return l;
}

void fails(const LaunchFlags& f, const Env& env, const std::string& needle) {
  Launch l;
  std::string err;
  REQUIRE(!resolve_launch(f, env, &l, &err), "resolved rank %d of %d from %s", l.rank, l.world, l.source.c_str());
  REQUIRE(err.find(needle) != std::string::npos, "'%s' lacks '%s'", err.c_str(), needle.c_str());
  REQUIRE(err.find('\n') == std::string::npos);
}

LaunchFlags flags(const std::vector<std::pair<std::string, std::string>>& kv) {
  LaunchFlags f;
  for (const auto& [k, v] : kv) {
    std::string err;
    REQUIRE(parse_launch_flag(k, v, &f, &err), "%s is not a launch flag", k.c_str());
    REQUIRE(err.empty(), "%s", err.c_str());
  }
  return f;
}

// What srun sets in each task of `srun -N2 -n2 --ntasks-per-node=1` (and the one-node variant).
Env slurm_task(int rank, const std::string& nodelist, const std::string& tpn, const std::string& node) {
  return {{"SLURM_PROCID", std::to_string(rank)}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NUM_TASKS", "2"},
          {"SLURM_STEP_NODELIST", nodelist}, {"SLURM_JOB_NODELIST", nodelist}, {"SLURM_STEP_TASKS_PER_NODE", tpn},
          {"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "1"}, {"SLURMD_NODENAME", node}};
}

void launchers() {
  // Explicit flags: a local two-process run.
  Launch l = resolves(flags({{"rank", "1"}, {"world-size", "2"}, {"rendezvous-port", "17600"}}), {});
  REQUIRE(l.source == "flags" && l.rank == 1 && l.world == 2 && l.rendezvous_host == "localhost" &&
        l.rendezvous_port == 17600);
  l = resolves(flags({{"rank", "0"}, {"world-size", "2"}, {"rendezvous", "10.0.0.1:18000"}}), {});
  REQUIRE(l.rendezvous_host == "10.0.0.1" && l.rendezvous_port == 18000);
  l = resolves(flags({{"rank", "0"}, {"world-size", "2"}, {"rendezvous", "[::1]:18001"}}), {});
  REQUIRE(l.rendezvous_host == "::1" && l.rendezvous_port == 18001);
  REQUIRE(resolves(flags({{"rank", "0"}, {"world-size", "2"}}), {}).rendezvous_port == kDefaultRendezvousPort);

  // Slurm, two nodes, one task each: rank 0 is on the first node; each rank knows the other's host.
  for (int r = 0; r < 2; ++r) {
    l = resolves({}, slurm_task(r, "gpu[07-08]", "1(x2)", r ? "gpu08" : "gpu07"));
    REQUIRE(l.source == "slurm" && l.rank == r && l.world == 2);
    REQUIRE(l.rendezvous_host == "gpu07" && l.host_of(1) == "gpu08" && l.name_rank(1) == "rank 1 (host gpu08)");
    REQUIRE(l.rendezvous_port == 15000 + (4242 * 16 + 1) % 15000);
  }
  // One node, two tasks (the CI cluster), and cyclic distribution over two nodes.
  l = resolves({}, slurm_task(1, "vm", "2", "vm"));
  REQUIRE(l.rendezvous_host == "vm" && l.host_of(1) == "vm");
  Env cyc = slurm_task(1, "a,b", "1(x2)", "b");
  cyc["SLURM_DISTRIBUTION"] = "cyclic";
  REQUIRE(resolves({}, cyc).host_of(1) == "b");
  // Flags and GICOMM_RENDEZVOUS override Slurm's answer; a flag beats the environment.
  Env over = slurm_task(0, "a,b", "1(x2)", "a");
  over["GICOMM_RENDEZVOUS"] = "a-ib0:19000";
  l = resolves({}, over);
  REQUIRE(l.rendezvous_host == "a-ib0" && l.rendezvous_port == 19000);
  over["GICOMM_RENDEZVOUS_PORT"] = "19001";
  REQUIRE(resolves({}, over).rendezvous_port == 19001);
  REQUIRE(resolves(flags({{"rendezvous-port", "19002"}}), over).rendezvous_port == 19002);
  REQUIRE(resolves(flags({{"rendezvous", "c:19003"}}), over).rendezvous_host == "c");

  // Open MPI wins over the Slurm variables of an allocation mpirun runs in, and needs a rendezvous.
  Env ompi = slurm_task(0, "a,b", "1(x2)", "a");
  ompi["OMPI_COMM_WORLD_RANK"] = "1";
  ompi["OMPI_COMM_WORLD_SIZE"] = "2";
  fails({}, ompi, "mpirun does not tell a rank where rank 0 runs");
  ompi["GICOMM_RENDEZVOUS"] = "a";
  l = resolves({}, ompi);
  REQUIRE(l.source == "openmpi" && l.rank == 1 && l.world == 2 && l.rendezvous_host == "a" &&
        l.rendezvous_port == kDefaultRendezvousPort);
  // Flags win over both.
  REQUIRE(resolves(flags({{"rank", "0"}, {"world-size", "2"}}), ompi).source == "flags");

  // Bad input, each named.
  fails({}, {}, "no rank: not started by srun");
  fails(flags({{"rank", "0"}}), {}, "--rank needs --world-size");
  fails(flags({{"rank", "2"}, {"world-size", "2"}}), {}, "--rank 2 is not below --world-size 2");
  Env e = slurm_task(0, "a,b", "1(x2)", "a");
  e["SLURM_PROCID"] = "x";
  fails({}, e, "SLURM_PROCID='x' is not an integer");
  e = slurm_task(2, "a,b", "1(x2)", "a");
  fails({}, e, "SLURM_PROCID=2 is not below SLURM_STEP_NUM_TASKS=2");
  e = slurm_task(0, "a,b", "1(x3)", "a");
  fails({}, e, "gives 3 nodes");
  e = slurm_task(0, "a,b", "1(x2)", "b");
  fails({}, e, "Slurm placed rank 0 on b");
  e = slurm_task(0, "a,b", "1(x2)", "a");
  e["SLURM_DISTRIBUTION"] = "arbitrary";
  fails({}, e, "block or cyclic");
  e = slurm_task(0, "a,b", "1(x2)", "a");
  e.erase("SLURM_STEP_NODELIST");
  e.erase("SLURM_JOB_NODELIST");
  fails({}, e, "SLURM_NODELIST is not set: started by srun?");
  e = slurm_task(0, "a,b", "1(x2)", "a");
  e["GICOMM_RENDEZVOUS_PORT"] = "70000";
  fails({}, e, "GICOMM_RENDEZVOUS_PORT='70000'");
  ompi.erase("GICOMM_RENDEZVOUS");
  ompi["OMPI_COMM_WORLD_RANK"] = "5";
  fails({}, ompi, "OMPI_COMM_WORLD_RANK='5' is not an integer in 0..1");

  LaunchFlags f;
  std::string err;
  REQUIRE(!parse_launch_flag("device", "x", &f, &err));  // not ours
  REQUIRE(parse_launch_flag("rank", "-1", &f, &err) && err.find("--rank '-1'") != std::string::npos);
  err.clear();
  REQUIRE(parse_launch_flag("rendezvous-port", "0", &f, &err) && err.find("1..65535") != std::string::npos);
  err.clear();
  f = LaunchFlags{};
  REQUIRE(parse_launch_flag("rendezvous", "h:99999", &f, &err) && err.empty());
  fails(flags({{"rank", "0"}, {"world-size", "2"}}), {{"GICOMM_RENDEZVOUS", "h:99999"}}, "port '99999'");
}

}  // namespace

int main() {
  hostlists();
  launchers();
  std::printf("net_launch_test: ok\n");
  return 0;
}
