#include "harness/host_load.h"

#include <time.h>

#include <fstream>
#include <sstream>

namespace gicomm::bench {

namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double clock_s(clockid_t id) {
  timespec ts{};
  if (clock_gettime(id, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

std::optional<CpuJiffies> parse_proc_stat(const std::string& text) {
  std::istringstream lines(text);
  std::optional<CpuJiffies> out;
  int ncpu = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("cpu", 0) != 0) continue;
    if (line.size() > 3 && line[3] != ' ') {
      ++ncpu;  // cpuN
      continue;
    }
    // cpu  user nice system idle iowait irq softirq steal [guest guest_nice]
    std::istringstream f(line.substr(3));
    unsigned long long v[8] = {};
    for (auto& x : v)
      if (!(f >> x)) return std::nullopt;
    CpuJiffies c;
    for (auto x : v) c.total += x;
    c.busy = c.total - v[3] - v[4];  // all but idle and iowait
    out = c;
  }
  if (!out || ncpu == 0) return std::nullopt;
  out->ncpu = ncpu;
  return out;
}

std::optional<double> parse_loadavg(const std::string& text) {
  std::istringstream f(text);
  double v = 0;
  if (!(f >> v) || v < 0) return std::nullopt;
  return v;
}

HostSample sample_host() {
  HostSample s;
  s.cpu = parse_proc_stat(read_text("/proc/stat"));
  s.loadavg_1m = parse_loadavg(read_text("/proc/loadavg"));
  s.self_cpu_s = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  s.wall_s = clock_s(CLOCK_MONOTONIC);
  return s;
}

std::optional<HostLoad> host_load_between(const HostSample& start, const HostSample& end) {
  if (!start.cpu || !end.cpu || !end.loadavg_1m) return std::nullopt;
  const double window = end.wall_s - start.wall_s;
  if (window <= 0 || end.cpu->total < start.cpu->total || end.cpu->busy < start.cpu->busy) return std::nullopt;
  HostLoad h;
  h.loadavg_1m = *end.loadavg_1m;
  h.ncpu = end.cpu->ncpu;
  h.window_s = window;
  h.self_cpus = (end.self_cpu_s - start.self_cpu_s) / window;
  const auto total = end.cpu->total - start.cpu->total;
  if (total >= 2ull * static_cast<unsigned long long>(h.ncpu))
    h.cpu_busy = static_cast<double>(end.cpu->busy - start.cpu->busy) / static_cast<double>(total);
  return h;
}

}  // namespace gicomm::bench
