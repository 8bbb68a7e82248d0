// The host side of the mini-proxy experiments: what a run observes about its worker cores (their
// CPUs and clock frequencies, carried in the records' params) and the check of the bytes that
// landed in the destination.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/params.h"

namespace gicomm::proxy_bench {

struct CpuClock {
  std::optional<double> mhz;  // mean over the worker cores
  std::string source;         // scaling_cur_freq / proc_cpuinfo / the reason it is unknown
  double min = 0, max = 0;
  std::string per_core;       // "2100,2100,...": one value per worker, in worker order
};
CpuClock read_worker_clocks(const std::vector<int>& cpus);

// The mean clock over the timed launches of a rate point (the first launch's reading otherwise).
struct CpuClockMean {
  double sum = 0;
  int n = 0;
  void add(const CpuClock& k) {
    if (k.mhz) {
      sum += *k.mhz;
      ++n;
    }
  }
  void apply(CpuClock* c) const {
    if (c->mhz && n) c->mhz = sum / n;
  }
};

// worker_cpus, cpu_clock_source and (where known) cpu_mhz_per_worker, cpu_mhz_min, cpu_mhz_max.
void note_cpus(bench::Params* params, const std::vector<int>& cpus, const CpuClock& clk);

// Every destination word holds the value of the last request aimed at it after `sent` requests
// per ring; fails the point naming the ring, the word, what it holds and what was expected.
void check_payload(const uint64_t* remote, uint32_t rings, uint32_t window, uint64_t sent);

}  // namespace gicomm::proxy_bench
