#include "proxy/workers.h"

#include <algorithm>
#include <sstream>

#include "gicomm/proxy/topology.h"
#include "proxy/producers.h"

namespace gicomm::proxy_bench {

CpuClock read_worker_clocks(const std::vector<int>& cpus) {
  CpuClock c;
  double sum = 0;
  int n = 0;
  for (int cpu : cpus) {
    if (cpu < 0) {
      c.source = "workers not pinned";
      return c;
    }
    const proxy::CpuFreq f = proxy::read_cpu_mhz(cpu);
    if (!f.ok) {
      c.source = f.source;
      return c;
    }
    c.source = f.source;
    c.per_core += (n ? "," : "") + std::to_string(static_cast<long>(f.mhz + 0.5));
    c.min = n ? std::min(c.min, f.mhz) : f.mhz;
    c.max = n ? std::max(c.max, f.mhz) : f.mhz;
    sum += f.mhz;
    ++n;
  }
  if (n) c.mhz = sum / n;
  return c;
}

void note_cpus(bench::Params* params, const std::vector<int>& cpus, const CpuClock& clk) {
  std::string list;
  for (int cpu : cpus) list += (list.empty() ? "" : ",") + std::to_string(cpu);
  params->set("worker_cpus", list);
  params->set("cpu_clock_source", clk.source);
  if (clk.mhz) {
    params->set("cpu_mhz_per_worker", clk.per_core);
    params->set("cpu_mhz_min", clk.min);
    params->set("cpu_mhz_max", clk.max);
  }
}

void check_payload(const uint64_t* remote, uint32_t rings, uint32_t window, uint64_t sent) {
  for (uint32_t r = 0; r < rings; ++r) {
    for (uint32_t w = 0; w < window; ++w) {
      uint64_t want = 0;
      if (sent > w) {
        const uint64_t last = w + (sent - 1 - w) / window * window;
        want = payload_value(r, last);
      }
      const uint64_t got = remote[size_t(r) * window + w];  // NOLINT: host view of mapped memory
      if (got != want) {
        std::ostringstream m;
        m << "payload check: ring " << r << " word " << w << " holds 0x" << std::hex << got << ", expected 0x" << want;
        throw bench::PointFailure(m.str());
      }
    }
  }
}

}  // namespace gicomm::proxy_bench
