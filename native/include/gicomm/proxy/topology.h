// CPU topology for pinning proxy workers, and the clock of the cores they run on. Host only.
// Everything is read from sysfs / procfs; the roots are parameters so tests can feed a fake tree.
#pragma once

#include <string>
#include <vector>

namespace gicomm {
namespace proxy {

// Parse a kernel cpulist ("0-3,8,10-11"). False on malformed input.
bool parse_cpulist(const std::string& text, std::vector<int>* cpus);

// CPUs of NUMA node `node` (<sysfs>/devices/system/node/node<N>/cpulist). On failure returns false
// and says which nodes exist, e.g. "NUMA node 3 not found (nodes present: 0,1)".
bool numa_node_cpus(int node, std::vector<int>* cpus, std::string* error,
                    const std::string& sysfs_root = "/sys");

// Current frequency of one core, in MHz. Source order: cpufreq scaling_cur_freq (kHz, the
// governor's view), then /proc/cpuinfo "cpu MHz" for that processor (on VMs often a fixed value;
// source says so). When neither is readable, ok is false and `source` holds the reason.
struct CpuFreq {
  bool ok = false;
  double mhz = 0.0;
  std::string source;
};
CpuFreq read_cpu_mhz(int cpu, const std::string& sysfs_root = "/sys",
                     const std::string& cpuinfo_path = "/proc/cpuinfo");

// Pin the calling thread to one CPU. False (with the errno text) when the kernel refuses.
bool pin_this_thread(int cpu, std::string* error);

// Where the softnic cpu engine's `threads` threads run beside a worker pool on NUMA node `node`
// (whose workers take the node's first cpus): from the node's last physical core down, one cpu
// per core (cores from <sysfs>/devices/system/cpu/cpu<N>/topology/thread_siblings_list; a cpu
// without it is a core of its own), only cpus this process may run on (`allowed`; empty: all);
// with fewer cores than threads, thread t takes the (t mod cores)-th. One function, so that the
// engine ceiling's measurement and every run it is attached to place the engine alike. Empty when
// the node's cpus are unknown (the engine then runs unpinned).
std::vector<int> cpu_engine_cpus(int node, unsigned threads, const std::vector<int>& allowed = {},
                                 const std::string& sysfs_root = "/sys");
// The cpus this process may run on (sched_getaffinity); empty when unreadable.
std::vector<int> allowed_cpus();

}  // namespace proxy
}  // namespace gicomm
