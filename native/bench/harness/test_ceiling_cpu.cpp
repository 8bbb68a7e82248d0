// The cpu engine's ceiling measurer (harness/ceiling_cpu.cpp), its behaviour, not its speed: method
// steady places the engine threads and the polling thread where a mini-proxy run puts the engine
// and its first worker, times only the middle half of each round (the clock starts after the
// engine has completed WQEs of the round and stops before it completed them all; whole rounds on
// a host with too few cpus and for rounds too short), and its ceiling is the best round; method window (the earlier one) is unpinned and times doorbell to last CQE;
// bad plans are refused naming the field, its value and what is allowed; an engine thread that
// cannot be placed fails the start, naming the cpu.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "check.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/topology.h"
#include "gicomm/softnic/softnic.h"
#include "harness/engine_ceiling.h"
#include "harness/errors.h"

using namespace gicomm;
using namespace gicomm::bench;

namespace {

EngineShape shape(bool inline_payload, uint32_t bytes, uint32_t qps, uint32_t threads) {
  EngineShape s;
  s.backend = NicBackend::softnic_cpu;
  s.inline_payload = inline_payload;
  s.bytes = bytes;
  s.qps = qps;
  s.engine_threads = threads;
  return s;
}

CeilingPlan plan(uint32_t depth, int rounds, CeilingMethod method) {
  CeilingPlan p;
  p.depth = depth;
  p.warmup = 1;
  p.rounds = rounds;
  p.timeout_ms = 10000;  // a busy CI host
  p.method = method;
  return p;
}

void steady() {
  const size_t cpus = proxy::allowed_cpus().size();
  for (const EngineShape& sh : {shape(true, 8, 2, 2), shape(false, 512, 2, 2), shape(true, 220, 1, 1),
                                shape(false, 4096, 1, 1)}) {
    const CeilingSamples s = measure_engine_ceiling(sh, plan(1024, 3, CeilingMethod::steady));
    const std::string text = sh.text();
    const char* name = text.c_str();
    CHECK(s.wqe_rate_mps.size() == 3 && s.timed.size() == 3, "%s: %zu samples", name, s.wqe_rate_mps.size());
    // An engine thread and the polling thread per cpu, else whole rounds (a 2-cpu CI host).
    CHECK(s.whole_rounds.empty() == (cpus >= sh.engine_threads + 1), "%s: %zu cpus", name, cpus);
    for (const CeilingSamples::Span& t : s.timed) {
      CHECK(t.of == uint64_t(sh.qps) * 1024, "%s: a round of %llu WQEs", name, (unsigned long long)t.of);
      if (!s.whole_rounds.empty()) {
        CHECK(t.from == 0 && t.to == t.of, "%s: whole rounds", name);
        continue;
      }
      // Started after a quarter of the round, stopped after three quarters but before the end.
      CHECK(t.from >= t.of / 4 && t.to >= t.of - t.of / 4 && t.to < t.of && t.from < t.to,
            "%s: timed from %llu to %llu of %llu WQEs", name, (unsigned long long)t.from, (unsigned long long)t.to,
            (unsigned long long)t.of);
    }
    for (double r : s.wqe_rate_mps) CHECK(r > 0, "%s: a rate of %g", name, r);
    CHECK(s.best_round && ceiling_of(s) == compute_stats(s.wqe_rate_mps).max, "%s: the best round", name);
    // The placement a mini-proxy run gives its engine (ProxyRig: engine_cpus_beside of its pool).
    const proxy::PoolConfig pool;
    CHECK(s.engine_cpus == proxy::engine_cpus_beside(pool, sh.engine_threads), "%s: engine placement", name);
    CHECK(s.poller_cpu == proxy::worker_cpu(pool, 0), "%s: polling on cpu %d", name, s.poller_cpu);
    std::printf("  %s: %.1f Mmsg/s (%s)\n", name, ceiling_of(s), describe_measurement(s).c_str());
  }
}

void short_rounds() {
  // A round of fewer than kSteadyMinWqes WQEs is over before its middle can be seen: timed whole.
  const CeilingSamples s = measure_engine_ceiling(shape(true, 8, 2, 1), plan(64, 2, CeilingMethod::steady));
  CHECK(s.whole_rounds == "rounds of fewer than 1024 WQEs", "'%s'", s.whole_rounds.c_str());
  for (const CeilingSamples::Span& t : s.timed) CHECK(t.from == 0 && t.to == t.of && t.of == 128, "whole rounds");
  CHECK(s.best_round && s.wqe_rate_mps.size() == 2);
}

void window() {
  const CeilingSamples s = measure_engine_ceiling(shape(true, 8, 2, 2), plan(256, 3, CeilingMethod::window));
  CHECK(s.wqe_rate_mps.size() == 3 && !s.best_round, "the median of 3 rounds");
  CHECK(s.engine_cpus.empty() && s.poller_cpu == -1, "unpinned");
  for (const CeilingSamples::Span& t : s.timed) CHECK(t.from == 0 && t.to == t.of && t.of == 512, "doorbell to last CQE");
}

void refused(const EngineShape& sh, const CeilingPlan& p, const std::string& want) {
  try {
    measure_engine_ceiling(sh, p);
  } catch (const PointFailure& e) {
    CHECK(std::string(e.what()).find(want) != std::string::npos, "'%s' lacks '%s'", e.what(), want.c_str());
    return;
  }
  CHECK(false, "%s: measured, expected '%s'", sh.text().c_str(), want.c_str());
}

void bad_plans() {
  refused(shape(true, 8, 2, 2), plan(0, 3, CeilingMethod::steady),
          "bad parameter: engine ceiling: depth must be in 1..32768 for WQEs of 1 WQEBBs (an SQ holds at most 32768), not 0");
  refused(shape(true, 220, 1, 1), plan(8193, 3, CeilingMethod::steady), "depth must be in 1..8192 for WQEs of 4 WQEBBs");
  refused(shape(true, 8, 1, 1), plan(1024, 0, CeilingMethod::steady), "rounds (timed rounds) must be at least 1, not 0");
  refused(shape(true, 8, 0, 1), plan(1024, 3, CeilingMethod::steady), "qps must be in 1..4096, not 0");
  CeilingPlan p = plan(1024, 3, CeilingMethod::steady);
  p.signal_every = 0;
  refused(shape(true, 8, 1, 1), p, "signal_every must be at least 1, not 0");
}

void placement_errors() {
  softnic::SoftNic nic;
  bool threw = false;
  try {
    softnic::CpuEngine e(nic, 1, {-1});
  } catch (const std::invalid_argument& e) {
    threw = std::string(e.what()).find("no cpu -1") != std::string::npos;
  }
  CHECK(threw, "a negative cpu is refused");
  softnic::CpuEngine e(nic, 2, {1000});  // below CPU_SETSIZE, but no such cpu here
  threw = false;
  try {
    e.start();
  } catch (const std::runtime_error& x) {
    threw = std::string(x.what()).find("cpu engine thread 0 cannot run on cpu 1000") != std::string::npos;
  }
  CHECK(threw, "an engine thread that cannot be placed fails the start");
}

}  // namespace

int main() {
  steady();
  short_rounds();
  window();
  bad_plans();
  placement_errors();
  return gicomm::test::check_result("test_bench_ceiling_cpu");
}
