// What limits a software-NIC rate point: the engine that executes its WQEs and the shape of those
// WQEs. Every rate record on a softnic backend carries the engine's own ceiling for that shape,
// measured in the same run (harness/engine_ceiling.h), so the report can tell a point that shows
// the transport from one that shows the model NIC.
//
// The one place a point's shape is computed from its params: the payload (inline in the WQE or
// read through a pointer), its bytes, the point's own QP count, and, on the cpu engine, the
// engine's threads. The QPs are the point's exactly, not a class below them: how QPs share an
// engine's warps or threads decides its rate, and one QP more can make it slower (132 QPs on the
// same-GPU engine's 128 warps leave 4 warps serving two QPs each; a round of 132 ends with them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "gicomm/common/vocabulary.h"
#include "harness/params.h"

namespace gicomm::bench {

// Threads of the cpu engine behind mini-gda's softnic-cpu session (gda_config sets it).
constexpr uint32_t kGdaCpuEngineThreads = 2;
// SMs (engine blocks) the gpu engine reserves on the producer's own GPU (softnic-gpu-same).
constexpr int kSameGpuEngineBlocks = 16;
// The most QPs a ceiling is measured with: the gpu engine serves at most 528 (its measurement's
// memory), the cpu engine the softnic's QP table.
constexpr uint32_t kGpuEngineMaxQps = 528;
constexpr uint32_t kCpuEngineMaxQps = 4096;

struct EngineShape {
  NicBackend backend = NicBackend::softnic_cpu;  // softnic-cpu, softnic-gpu or softnic-gpu-same
  bool inline_payload = true;
  uint32_t bytes = 8;
  uint32_t qps = 1;             // the point's QPs (ceiling_qps)
  uint32_t engine_threads = 0;  // cpu engine threads; 0 on the gpu engine

  // "inline 64 B, 16 QPs" ("..., 2 engine threads" on the cpu engine): the record's
  // engine_ceiling_shape.
  std::string text() const;
  bool operator<(const EngineShape& o) const {
    return std::tie(backend, inline_payload, bytes, qps, engine_threads) <
           std::tie(o.backend, o.inline_payload, o.bytes, o.qps, o.engine_threads);
  }
};

// A software-NIC engine executes this backend's WQEs.
bool is_softnic_engine(NicBackend b);
// The metrics a software NIC's engine may cap (the report's rate metrics).
bool is_rate_metric(const std::string& metric);
// The QPs a ceiling for a point of `qps` QPs is measured with on `backend`'s engine: the same, within
// 1 and the engine's most.
uint32_t ceiling_qps(uint64_t qps, NicBackend backend);

// The shape of the rate records of a point of experiment `e` (its params `p`, transport and NIC
// backend as resolved), or nullopt where the point has no rate record on a software NIC.
std::optional<EngineShape> engine_shape_of(const ExperimentSpec& e, const Params& p, std::optional<Transport> t,
                                           std::optional<NicBackend> b);

}  // namespace gicomm::bench
