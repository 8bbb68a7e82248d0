#include "harness/engine_ceiling.h"

#include <algorithm>
#include <cstdio>
#include <map>

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
  std::optional<double> mps;
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

CeilingPlan short_plan(const EngineShape& shape, uint32_t timeout_ms) {
  const uint64_t per_round = std::min<uint64_t>(32768, (uint64_t(64) << 20) / std::max(1u, shape.bytes));
  CeilingPlan p;
  p.depth = static_cast<uint32_t>(std::clamp<uint64_t>(per_round / shape.qps, 16, 4096));
  p.warmup = 1;
  p.rounds = 3;
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
    m.mps = compute_stats(s.wqe_rate_mps).p50;
  } catch (const std::exception& e) {
    m.error = e.what();
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
      std::fprintf(stderr, "[gicomm] engine ceiling %s, %s: %.2f Mmsg/s\n", name_of(shape->backend),
                   shape->text().c_str(), *m.mps);
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
