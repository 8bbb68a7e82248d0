// What else kept the host busy while a point ran: the 1-minute load average, the busy fraction of
// all CPUs (from /proc/stat) over the point's window, and how much of that was this process (its
// CPU time over the window), so a reader can tell a point measured on an idle host from one that
// shared its cores. Every record of the point carries it (record field host_load); Linux only: off
// Linux, or where /proc cannot be read, the field is absent, never a guess.
#pragma once

#include <optional>
#include <string>

namespace gicomm::bench {

struct HostLoad {
  double loadavg_1m = 0;  // /proc/loadavg at the end of the window
  // Busy fraction of all CPUs over the window, 0..1 (this process included); nullopt when the
  // window is under two clock ticks per CPU (/proc/stat counts 10 ms ticks: too coarse to tell).
  std::optional<double> cpu_busy;
  double self_cpus = 0;   // CPUs this process kept busy over the window (its CPU time / window)
  int ncpu = 0;           // CPUs counted in /proc/stat
  double window_s = 0;    // length of the window
};

// The aggregate "cpu" line of /proc/stat: busy and total jiffies (guest time is already counted
// in user and nice, so it is not added again), and the number of "cpuN" lines.
struct CpuJiffies {
  unsigned long long busy = 0, total = 0;
  int ncpu = 0;
};
std::optional<CpuJiffies> parse_proc_stat(const std::string& text);
// The first field of /proc/loadavg.
std::optional<double> parse_loadavg(const std::string& text);

// One reading of the host: /proc/stat, /proc/loadavg, this process's CPU time, the time.
struct HostSample {
  std::optional<CpuJiffies> cpu;
  std::optional<double> loadavg_1m;
  double self_cpu_s = 0;
  double wall_s = 0;
};
HostSample sample_host();
// The load between two readings; nullopt when either could not read /proc or no time passed.
std::optional<HostLoad> host_load_between(const HostSample& start, const HostSample& end);

// A point's window: opened when the point starts, read when its records are written.
class HostLoadWindow {
 public:
  HostLoadWindow() : start_(sample_host()) {}
  std::optional<HostLoad> finish() const { return host_load_between(start_, sample_host()); }

 private:
  HostSample start_;
};

}  // namespace gicomm::bench
