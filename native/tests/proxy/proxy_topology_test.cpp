// Topology and core-clock readers against a fake sysfs/procfs tree, plus the real one.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "check.h"
#include "gicomm/proxy/topology.h"

using namespace gicomm::proxy;

namespace {
void write(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}
void mkdirs(const std::string& path) {
  std::string cur;
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
  }
}
}  // namespace

int main() {
  std::vector<int> c;
  REQUIRE(parse_cpulist("0-3,8,10-11\n", &c));
  REQUIRE((c == std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  REQUIRE(parse_cpulist("5", &c) && c.size() == 1 && c[0] == 5);
  REQUIRE(!parse_cpulist("", &c));
  REQUIRE(!parse_cpulist("3-1", &c));
  REQUIRE(!parse_cpulist("a-b", &c));

  char tmpl[] = "/tmp/gicomm_topo_XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string root = tmpl;
  mkdirs(root + "/devices/system/node/node0");
  mkdirs(root + "/devices/system/node/node2");
  write(root + "/devices/system/node/node0/cpulist", "0-1\n");
  write(root + "/devices/system/node/node2/cpulist", "16-17,20\n");
  std::string err;
  REQUIRE(numa_node_cpus(2, &c, &err, root) && (c == std::vector<int>{16, 17, 20}));
  REQUIRE(!numa_node_cpus(1, &c, &err, root));
  REQUIRE(err == "NUMA node 1 not found (nodes present: 0,2)", "%s", err.c_str());
  REQUIRE(!numa_node_cpus(-1, &c, &err, root));

  // The cpu engine's placement: node 3 has cpus 0-7 as four cores of two hyperthreads (n, n+4);
  // its threads take the last cores first, one cpu per core, never a worker's (the first cpus)
  // while cores are left, and wrap over the cores when there are more threads than cores.
  mkdirs(root + "/devices/system/node/node3");
  write(root + "/devices/system/node/node3/cpulist", "0-7\n");
  for (int cpu = 0; cpu < 8; ++cpu) {
    const std::string dir = root + "/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology";
    mkdirs(dir);
    write(dir + "/thread_siblings_list", std::to_string(cpu % 4) + "," + std::to_string(cpu % 4 + 4) + "\n");
  }
  REQUIRE((cpu_engine_cpus(3, 2, {}, root) == std::vector<int>{7, 6}), "two threads on the last two cores");
  REQUIRE((cpu_engine_cpus(3, 6, {}, root) == std::vector<int>{7, 6, 5, 4, 7, 6}), "four cores, six threads");
  REQUIRE((cpu_engine_cpus(3, 2, {0, 1, 2, 5}, root) == std::vector<int>{5, 2}), "only allowed cpus");
  REQUIRE(cpu_engine_cpus(3, 0, {}, root).empty() && cpu_engine_cpus(1, 2, {}, root).empty(),
          "no threads, or no such node: unpinned");
  // Node 2's cpus have no topology files: each is a core of its own.
  REQUIRE((cpu_engine_cpus(2, 2, {}, root) == std::vector<int>{20, 17}));
  REQUIRE(!allowed_cpus().empty(), "this process runs somewhere");

  // Frequency: cpufreq first (kHz), then /proc/cpuinfo, else a reason.
  mkdirs(root + "/devices/system/cpu/cpu1/cpufreq");
  write(root + "/devices/system/cpu/cpu1/cpufreq/scaling_cur_freq", "2450000\n");
  write(root + "/cpuinfo",
        "processor\t: 0\ncpu MHz\t\t: 1200.500\n\nprocessor\t: 1\ncpu MHz\t\t: 999.0\n\n"
        "processor\t: 2\ncpu MHz\t\t: 3100.250\n");
  CpuFreq f = read_cpu_mhz(1, root, root + "/cpuinfo");
  REQUIRE(f.ok && f.mhz == 2450.0 && f.source == "scaling_cur_freq");
  f = read_cpu_mhz(2, root, root + "/cpuinfo");
  REQUIRE(f.ok && f.mhz == 3100.25 && f.source == "proc_cpuinfo");
  f = read_cpu_mhz(7, root, root + "/cpuinfo");
  REQUIRE(!f.ok && f.source.find("cpu7") != std::string::npos);

  // The real machine: node 0 exists wherever Linux exposes NUMA; its first CPU has some clock.
  if (numa_node_cpus(0, &c, &err)) {
    REQUIRE(!c.empty());
    REQUIRE(pin_this_thread(c[0], &err));
    f = read_cpu_mhz(c[0]);
    std::printf("  cpu%d: %s %.1f MHz (%s)\n", c[0], f.ok ? "ok" : "unreadable", f.mhz, f.source.c_str());
  }
  REQUIRE(!pin_this_thread(100000, &err));
  std::printf("proxy_topology_test: ok\n");
  return 0;
}
