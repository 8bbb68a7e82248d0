#include "harness/engine_shape.h"

#include <algorithm>

namespace gicomm::bench {

namespace {

constexpr uint32_t kMaxInlineBytes = 220;  // mlx5::kMaxInlineRc: four WQEBBs

template <class T>
T value_or(const ExperimentSpec& e, const Params& p, const std::string& name, T fallback) {
  if (!e.find(name)) return fallback;
  const std::optional<T> v = param_value<T>(e, p, name);
  return v ? *v : fallback;
}

}  // namespace

std::string EngineShape::text() const {
  std::string s = std::string(inline_payload ? "inline " : "pointer ") + std::to_string(bytes) + " B, " +
                  std::to_string(qps) + (qps == 1 ? " QP" : " QPs");
  if (engine_threads) s += ", " + std::to_string(engine_threads) + (engine_threads == 1 ? " engine thread" : " engine threads");
  return s;
}

bool is_softnic_engine(NicBackend b) {
  return b == NicBackend::softnic_cpu || b == NicBackend::softnic_gpu || b == NicBackend::softnic_gpu_same;
}

bool is_rate_metric(const std::string& m) {
  return m == "msg_rate" || m == "bulk_msg_rate" || m == "probe_msg_rate" || m == "goodput_gbps";
}

uint32_t ceiling_qps(uint64_t qps, NicBackend backend) {
  const uint32_t most = backend == NicBackend::softnic_cpu ? kCpuEngineMaxQps : kGpuEngineMaxQps;
  return static_cast<uint32_t>(std::clamp<uint64_t>(qps, 1, most));
}

std::optional<EngineShape> engine_shape_of(const ExperimentSpec& e, const Params& p, std::optional<Transport> t,
                                           std::optional<NicBackend> b) {
  if (!b || !is_softnic_engine(*b)) return std::nullopt;
  EngineShape s;
  s.backend = *b;
  uint64_t qps = 1;
  uint32_t threads = kGdaCpuEngineThreads;  // mini-gda's cpu engine
  const std::string& x = e.name;
  if (x == "gda_msg_rate" || x == "inline_payload") {
    s.inline_payload = value_or<std::string>(e, p, "payload", "inline") == "inline";
    s.bytes = value_or<uint32_t>(e, p, "size", 8);
    qps = value_or<uint32_t>(e, p, "qps", 1);
  } else if (x == "connection_scaling") {
    s.bytes = value_or<uint32_t>(e, p, "size", 8);
    s.inline_payload = s.bytes == 8;  // 8 B inline, larger writes by pointer
    qps = value_or<uint32_t>(e, p, "active_qps", 64);
  } else if (x == "goodput") {
    s.inline_payload = false;
    s.bytes = value_or<uint32_t>(e, p, "size", 8);
    const uint32_t ctas = value_or<uint32_t>(e, p, "ctas", 16);
    qps = ctas;
    if (t == Transport::mini_proxy) {  // one QP per worker, an engine thread per worker
      qps = value_or<uint32_t>(e, p, "workers", std::min(2u, ctas));
      threads = static_cast<uint32_t>(qps);
    }
  } else if (x == "proxy_msg_rate" || x == "proxy_one_op") {
    if (value_or<std::string>(e, p, "mode", "issue") != "rate") return std::nullopt;
    const uint32_t workers = value_or<uint32_t>(e, p, "workers", 1);
    qps = workers;  // each worker posts 8-byte inline writes on its own QP
    threads = value_or<uint32_t>(e, p, "nic_threads", workers);
  } else if (x == "loaded_rtt" || x == "proxy_loaded_probe") {
    // 8-byte inline puts. mini-gda: the probe's QP, the responder's, and one per bulk CTA when the
    // queue is reserved; mini-proxy: one QP and one engine thread per worker.
    const uint32_t bulk = value_or<uint32_t>(e, p, "bulk_ctas", 0);
    if (t == Transport::mini_proxy) {
      qps = value_or<uint32_t>(e, p, "workers", 2);
      threads = static_cast<uint32_t>(qps);
    } else {
      qps = 2 + (value_or<std::string>(e, p, "queue", "reserved") == "reserved" ? bulk : 0);
    }
  } else if (x == "soak") {
    // target rings: mini-proxy's workers post 8-byte inline writes, one QP each; target engine
    // executes atomics, a shape the ceiling does not measure.
    if (value_or<std::string>(e, p, "target", "engine") != "rings") return std::nullopt;
    qps = value_or<uint32_t>(e, p, "workers", 1);
    threads = value_or<uint32_t>(e, p, "engine_threads", 1);
  } else {
    return std::nullopt;
  }
  if (s.bytes < 1 || (s.inline_payload && s.bytes > kMaxInlineBytes)) return std::nullopt;
  s.qps = ceiling_qps(qps, s.backend);
  s.engine_threads = s.backend == NicBackend::softnic_cpu ? std::max(1u, threads) : 0;
  return s;
}

}  // namespace gicomm::bench
