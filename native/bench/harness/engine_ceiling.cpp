#include "harness/engine_ceiling.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "gicomm/mlx5/wqe.h"
#include "harness/errors.h"
#include "harness/runner.h"

namespace gicomm::bench {

namespace {

CeilingMeasurer& measurer(EngineKind k) {
  static CeilingMeasurer cpu = nullptr, gpu = nullptr;
  return k == EngineKind::cpu ? cpu : gpu;
}

// What this process measured per shape: the ceiling, or why there is none; said on stderr once,
// with the first point that uses it (a point whose hardware is missing says only that).
struct Measured {
  std::optional<double> mps;  // the best of this process's measurements of the shape
  std::string how;            // describe_measurement of the first
  std::string error;
  bool said = false;
};
std::map<EngineShape, Measured>& measured() {
  static std::map<EngineShape, Measured> m;
  return m;
}

std::optional<EngineShape> shape_of(const Run& run) {
  return engine_shape_of(run.spec, run.point.params, run.transport, run.nic_backend);
}

}  // namespace

void register_ceiling_measurer(EngineKind kind, CeilingMeasurer m) { measurer(kind) = m; }

CeilingSamples measure_engine_ceiling(const EngineShape& shape, const CeilingPlan& plan) {
  const EngineKind kind = shape.backend == NicBackend::softnic_cpu ? EngineKind::cpu : EngineKind::gpu;
  const CeilingMeasurer m = measurer(kind);
  if (!m)
    throw HardwareMissing(std::string("this driver has no ") + (kind == EngineKind::cpu ? "cpu" : "gpu") +
                          " engine ceiling measurer linked in" +
                          (kind == EngineKind::gpu ? " (a build without CUDA)" : ""));
  return m(shape, plan);
}

double ceiling_of(const CeilingSamples& s) {
  const Stats st = compute_stats(s.wqe_rate_mps);
  return s.best_round ? st.max : st.p50;
}

std::string describe_measurement(const CeilingSamples& s) {
  std::string d = std::string(s.best_round ? "best of " : "median of ") + std::to_string(s.wqe_rate_mps.size()) +
                  (s.wqe_rate_mps.size() == 1 ? " round" : " rounds");
  if (s.best_round) {
    std::string cpus;
    for (int c : s.engine_cpus) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
    d += cpus.empty() ? ", engine threads unpinned" : ", engine threads on cpus " + cpus;
    d += s.poller_cpu >= 0 ? ", polling on cpu " + std::to_string(s.poller_cpu) : ", polling unpinned";
    if (!s.whole_rounds.empty()) d += "; whole rounds timed: " + s.whole_rounds;
  }
  return d;
}

void say_ceiling(const EngineShape& shape, double mps, const std::string& how) {
  std::fprintf(stderr, "[gicomm] engine ceiling %s, %s: %.2f Mmsg/s (%s)\n", name_of(shape.backend),
               shape.text().c_str(), mps, how.c_str());
}

uint32_t wqebbs_per_wqe(const EngineShape& shape) {
  if (!shape.inline_payload || shape.bytes == 8) return 1;
  return mlx5::wqebbs_of_ds(2 + mlx5::inline_seg_ds(shape.bytes));
}

void check_plan(const CeilingPlan& p, uint32_t wqebbs) {
  auto bad = [](const std::string& what) { throw PointFailure("bad parameter: engine ceiling: " + what); };
  const uint32_t max_depth = kMaxSqWqebbs / std::max(1u, wqebbs);
  if (p.depth < 1 || p.depth > max_depth)
    bad("depth must be in 1.." + std::to_string(max_depth) + " for WQEs of " + std::to_string(wqebbs) +
        " WQEBBs (an SQ holds at most " + std::to_string(kMaxSqWqebbs) + "), not " + std::to_string(p.depth));
  if (p.rounds < 1) bad("rounds (timed rounds) must be at least 1, not " + std::to_string(p.rounds));
  if (p.warmup < 0) bad("warmup must be at least 0, not " + std::to_string(p.warmup));
  if (p.signal_every < 1) bad("signal_every must be at least 1, not " + std::to_string(p.signal_every));
  if (p.timeout_ms < 1) bad("timeout_ms must be at least 1, not " + std::to_string(p.timeout_ms));
}

CeilingPlan short_plan(const EngineShape& shape, uint32_t timeout_ms) {
  const bool cpu = shape.backend == NicBackend::softnic_cpu;
  // A gpu-engine round gives each QP at least 64 passes of 32 WQEs where the payload allows (at
  // most 1.1 M WQEs, about a millisecond): the one-doorbell round's ramp held the ceiling below
  // mini-gda's own rate on the H200 with fewer (528 QPs: 1185 MWQE/s with 62 WQEs per QP, 1192-1204
  // with 256, against 1246-1253 Mmsg/s).
  const uint64_t wqes = cpu ? 32768 : std::max<uint64_t>(32768, uint64_t(2048) * shape.qps);
  const uint64_t per_round = std::min<uint64_t>(wqes, (uint64_t(64) << 20) / std::max(1u, shape.bytes));
  CeilingPlan p;
  // The cpu engine's rounds are long enough that their middle half is thousands of WQEs.
  const uint64_t max_depth = cpu ? kMaxSqWqebbs / wqebbs_per_wqe(shape) : 4096;
  p.depth = static_cast<uint32_t>(std::clamp<uint64_t>(per_round / shape.qps, 16, max_depth));
  p.warmup = 1;
  p.rounds = cpu ? 5 : 3;
  p.timeout_ms = timeout_ms;
  return p;
}

void prepare_engine_ceiling(const Run& run) {
  std::optional<EngineShape> shape;
  try {
    shape = shape_of(run);
  } catch (const std::exception&) {
    return;  // a bad parameter: the point fails on its own, naming it
  }
  if (!shape || measured().count(*shape)) return;
  Measured& m = measured()[*shape];
  try {
    const CeilingSamples s = measure_engine_ceiling(*shape, short_plan(*shape, run.options.timeout_ms));
    m.mps = ceiling_of(s);
    m.how = describe_measurement(s);
  } catch (const std::exception& e) {
    m.error = e.what();
  }
}

void refresh_engine_ceiling(const Run& run) {
  std::optional<EngineShape> shape;
  try {
    shape = shape_of(run);
  } catch (const std::exception&) {
    return;
  }
  if (!shape || shape->backend != NicBackend::softnic_cpu) return;
  const auto it = measured().find(*shape);
  if (it == measured().end() || !it->second.mps) return;  // a failed measurement says why on its own
  Measured& m = it->second;
  if (!m.said) {
    m.said = true;
    say_ceiling(*shape, *m.mps, m.how);
  }
  const char* point = run.point.point_id.c_str();
  try {
    const double again = ceiling_of(measure_engine_ceiling(*shape, short_plan(*shape, run.options.timeout_ms)));
    m.mps = std::max(*m.mps, again);
    std::fprintf(stderr, "[gicomm] engine ceiling %s, %s, again before point %s: %.2f Mmsg/s; the best so far %.2f\n",
                 name_of(shape->backend), shape->text().c_str(), point, again, *m.mps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[gicomm] engine ceiling %s, %s, again before point %s: failed (%s); the best so far %.2f\n",
                 name_of(shape->backend), shape->text().c_str(), point, e.what(), *m.mps);
  }
}

void attach_engine_ceiling(const Run& run, std::vector<Record>& records) {
  std::optional<EngineShape> shape;
  try {
    shape = shape_of(run);
  } catch (const std::exception&) {
    return;
  }
  if (!shape) return;
  const auto it = measured().find(*shape);
  if (it == measured().end()) return;
  Measured& m = it->second;
  if (!m.said) {
    m.said = true;
    if (m.mps)
      say_ceiling(*shape, *m.mps, m.how);
    else
      std::fprintf(stderr, "[gicomm] engine ceiling %s, %s not measured: %s\n", name_of(shape->backend),
                   shape->text().c_str(), m.error.c_str());
  }
  if (!m.mps) return;
  for (Record& r : records) {
    if (r.status != "ok" || !is_rate_metric(r.metric)) continue;
    r.engine_ceiling = *m.mps;
    r.engine_ceiling_shape = shape->text();
  }
}

}  // namespace gicomm::bench
