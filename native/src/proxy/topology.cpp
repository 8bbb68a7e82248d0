// CPU topology and core clocks from sysfs/procfs (see gicomm/proxy/topology.h).
#include "gicomm/proxy/topology.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <algorithm>
#include <fstream>
#include <sstream>

#include "gicomm/common/affinity.h"

namespace gicomm {
namespace proxy {

namespace {
bool read_file(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

bool parse_int(const std::string& s, int* v) {
  if (s.empty() || s.size() > 9) return false;
  int x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + (c - '0');
  }
  *v = x;
  return true;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  size_t e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}
}  // namespace

bool parse_cpulist(const std::string& text, std::vector<int>* cpus) {
  cpus->clear();
  const std::string t = trim(text);
  if (t.empty()) return false;
  std::stringstream ss(t);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const size_t dash = part.find('-');
    int a = 0, b = 0;
    if (dash == std::string::npos) {
      if (!parse_int(part, &a)) return false;
      b = a;
    } else if (!parse_int(part.substr(0, dash), &a) || !parse_int(part.substr(dash + 1), &b) ||
               b < a) {
      return false;
    }
    for (int c = a; c <= b; ++c) cpus->push_back(c);
  }
  return !cpus->empty();
}

bool numa_node_cpus(int node, std::vector<int>* cpus, std::string* error,
                    const std::string& sysfs_root) {
  const std::string base = sysfs_root + "/devices/system/node";
  std::string text;
  if (node >= 0 && read_file(base + "/node" + std::to_string(node) + "/cpulist", &text)) {
    if (!parse_cpulist(text, cpus)) {
      if (error) *error = "NUMA node " + std::to_string(node) + " has no CPUs (cpulist '" + trim(text) + "')";
      return false;
    }
    return true;
  }
  // Say which nodes exist, so a bad --numa-node is easy to fix.
  std::vector<int> nodes;
  if (DIR* d = opendir(base.c_str())) {
    while (dirent* e = readdir(d)) {
      int n = 0;
      if (std::strncmp(e->d_name, "node", 4) == 0 && parse_int(e->d_name + 4, &n)) nodes.push_back(n);
    }
    closedir(d);
  }
  std::sort(nodes.begin(), nodes.end());
  std::string list;
  for (int n : nodes) list += (list.empty() ? "" : ",") + std::to_string(n);
  if (error)
    *error = "NUMA node " + std::to_string(node) + " not found (nodes present: " +
             (list.empty() ? "none, " + base + " unreadable" : list) + ")";
  return false;
}

CpuFreq read_cpu_mhz(int cpu, const std::string& sysfs_root, const std::string& cpuinfo_path) {
  CpuFreq f;
  const std::string sys = sysfs_root + "/devices/system/cpu/cpu" + std::to_string(cpu) +
                          "/cpufreq/scaling_cur_freq";
  std::string text;
  if (read_file(sys, &text)) {
    char* end = nullptr;
    const double khz = std::strtod(text.c_str(), &end);
    if (end != text.c_str() && khz > 0) {
      f.ok = true;
      f.mhz = khz / 1000.0;
      f.source = "scaling_cur_freq";
      return f;
    }
  }
  // /proc/cpuinfo: find "processor : cpu", then its "cpu MHz" line.
  std::ifstream in(cpuinfo_path);
  if (in) {
    std::string line;
    bool ours = false;
    while (std::getline(in, line)) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = trim(line.substr(0, colon));
      const std::string val = trim(line.substr(colon + 1));
      if (key == "processor") {
        int p = -1;
        ours = parse_int(val, &p) && p == cpu;
      } else if (ours && key == "cpu MHz") {
        f.mhz = std::strtod(val.c_str(), nullptr);
        if (f.mhz > 0) {
          f.ok = true;
          f.source = "proc_cpuinfo";  // may be a fixed value under a hypervisor
          return f;
        }
      }
    }
  }
  f.ok = false;
  f.source = "no cpufreq for cpu" + std::to_string(cpu) + " and no 'cpu MHz' in " + cpuinfo_path;
  return f;
}

bool pin_this_thread(int cpu, std::string* error) {
  const int rc = pin_thread(pthread_self(), cpu);
  if (rc != 0) {
    if (error) *error = "cannot pin to cpu " + std::to_string(cpu) + ": " + std::strerror(rc);
    return false;
  }
  return true;
}

std::vector<int> cpu_engine_cpus(int node, unsigned threads, const std::vector<int>& allowed,
                                 const std::string& sysfs_root) {
  std::vector<int> node_cpus;
  if (threads == 0 || !numa_node_cpus(node, &node_cpus, nullptr, sysfs_root)) return {};
  std::vector<int> cores;  // one cpu per core, from the node's last cpu down
  std::vector<int> seen;   // cpus of the cores already taken
  for (auto it = node_cpus.rbegin(); it != node_cpus.rend(); ++it) {
    const int cpu = *it;
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), cpu) == allowed.end()) continue;
    if (std::find(seen.begin(), seen.end(), cpu) != seen.end()) continue;
    std::string text;
    std::vector<int> siblings;
    if (read_file(sysfs_root + "/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list",
                  &text) &&
        parse_cpulist(text, &siblings))
      seen.insert(seen.end(), siblings.begin(), siblings.end());
    seen.push_back(cpu);
    cores.push_back(cpu);
  }
  if (cores.empty()) return {};
  std::vector<int> out;
  for (unsigned t = 0; t < threads; ++t) out.push_back(cores[t % cores.size()]);
  return out;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

}  // namespace proxy
}  // namespace gicomm
