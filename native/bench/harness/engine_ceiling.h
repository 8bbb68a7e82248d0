// The software NIC engine's own ceiling for one WQE shape, measured in the run it is used in:
//  - the measurement (measure_engine_ceiling): every QP's window of RDMA writes of the shape is
//    written before the clock starts and each QP's doorbell is rung once. The gpu engine's
//    measurer (harness/ceiling_gpu.cu: on the peer GPU for softnic-gpu, on kSameGpuEngineBlocks SMs
//    of GPU 0 for softnic-gpu-same) signals every WQE and times a round until every QP's CQE names
//    its last WQE, rate = WQEs / round time (Mmsg/s), the ceiling the median round; the cpu
//    engine's (harness/ceiling_cpu.cpp) places the engine as a mini-proxy run does, times the
//    middle half of each round and takes the best round (CeilingMethod). A driver links the
//    measurers its experiments need and they register themselves.
//  - the runner's hook: before the first point, the ceiling of each distinct shape of the run's
//    points (harness/engine_shape.h) is measured once, while no transport holds an engine; a cpu
//    engine shape is measured again before each of its points, and the best so far kept (its
//    measurement takes milliseconds, so a busy spell of the cpus its threads are pinned to can
//    hold every round of one down; interference only ever slows a round). Every rate record of a
//    softnic point then carries `engine_ceiling` (ceiling_of, Mmsg/s; the best so far) and
//    `engine_ceiling_shape`. A shape whose measurement fails leaves its records without the field
//    (the reason goes to stderr with the first point of that shape), so the report says the
//    ceiling was not measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/engine_shape.h"
#include "harness/record.h"

namespace gicomm::bench {

class Run;

// The largest SQ the softnic creates (WQEBBs): a round's window of one QP fits it.
constexpr uint32_t kMaxSqWqebbs = 32768;

// The fewest WQEs (qps x depth) of a round whose middle half method steady times (smaller
// rounds are timed whole).
constexpr uint64_t kSteadyMinWqes = 1024;

// How the cpu engine's rounds are run and timed (harness/ceiling_cpu.cpp); the gpu engine's
// measurer has one method.
enum class CeilingMethod {
  steady,  // placed as a mini-proxy run places the engine, one CQE per signal_every WQEs, the
           // middle half of each round timed, the best round
  window,  // the earlier method, kept for comparison: unpinned, every WQE signaled, doorbell to
           // last CQE, the median round
};

struct CeilingPlan {
  uint32_t depth = 1024;  // WQEs per QP per round (one doorbell)
  int warmup = 1;         // untimed rounds (the gpu engine's measurer always runs one)
  int rounds = 3;         // timed rounds, one sample each
  uint32_t timeout_ms = 2000;
  int engine_warps_per_block = 0;  // gpu engine; 0: the engine's own default (the experiment passes its parameter)
  CeilingMethod method = CeilingMethod::steady;  // cpu engine
  uint32_t signal_every = 16;  // cpu engine, steady: a mini-proxy worker's chain (its batch, at most 16)
};

struct CeilingSamples {
  std::vector<double> wqe_rate_mps;  // one per timed round
  std::optional<double> sm_clock_mhz;
  bool best_round = false;       // the ceiling is the best round (else the median)
  std::vector<int> engine_cpus;  // cpu engine: where its threads ran (empty: unpinned)
  int poller_cpu = -1;           // cpu engine: where the WQEs were written and the CQs polled (-1: unpinned)
  std::string whole_rounds;      // cpu engine, steady: why whole rounds were timed ("": the middle)
  // cpu engine, per timed round: the WQEs completed when its clock started and stopped, of all.
  struct Span {
    uint64_t from = 0, to = 0, of = 0;
  };
  std::vector<Span> timed;
};

// The ceiling of a measurement: its best round or its median round, as the measurer says.
double ceiling_of(const CeilingSamples& s);
// "best of 5 rounds, engine threads on cpus 15,14, polling on cpu 0" (or "median of 3 rounds"):
// how a measurement was made, for the driver's stderr line.
std::string describe_measurement(const CeilingSamples& s);
// The driver's stderr line for a measured ceiling: "[gicomm] engine ceiling <backend>, <shape>:
// <mps> Mmsg/s (<how>)".
void say_ceiling(const EngineShape& shape, double mps, const std::string& how);
// WQEBBs of one WQE of `shape` (1 for pointer and 8-byte inline writes, up to 4 for 220 B inline).
uint32_t wqebbs_per_wqe(const EngineShape& shape);
// Refuses a plan no measurer can run (PointFailure "bad parameter: ..." naming the field and its
// value): depth 0 or above what an SQ of 32768 WQEBBs holds of `wqebbs`-WQEBB WQEs, no timed round,
// negative warmup, signal_every 0, timeout 0.
void check_plan(const CeilingPlan& plan, uint32_t wqebbs);

// A measurer for one engine kind; throws HardwareMissing when the host lacks what it needs, and
// PointFailure (naming the QP and what was seen) when the engine misbehaves.
using CeilingMeasurer = CeilingSamples (*)(const EngineShape& shape, const CeilingPlan& plan);
enum class EngineKind { cpu, gpu };
void register_ceiling_measurer(EngineKind kind, CeilingMeasurer m);
struct CeilingMeasurerRegistration {
  CeilingMeasurerRegistration(EngineKind kind, CeilingMeasurer m) { register_ceiling_measurer(kind, m); }
};

// Measures `shape` on its backend's engine; HardwareMissing when this driver has no measurer for it.
CeilingSamples measure_engine_ceiling(const EngineShape& shape, const CeilingPlan& plan);

// The plan of the hook's short measurement of `shape`: at most 32768 WQEs and 64 MiB of payload
// per round; on the gpu engines 16..4096 WQEs per QP, one untimed and three timed rounds; on the
// cpu engine 16..(32768 / WQEBBs per WQE) WQEs per QP, one untimed and five timed rounds, method
// steady.
CeilingPlan short_plan(const EngineShape& shape, uint32_t timeout_ms);

// The runner's hook. prepare: measures the shape of `run`'s point if not yet measured in this
// process (nothing for a point without a softnic rate record). refresh, right before the point
// runs (no transport holds an engine): a cpu engine shape measured before is measured again and
// the better kept (a failed remeasurement keeps the one before, saying so). attach: gives every
// rate record of the point the ceiling of its shape.
void prepare_engine_ceiling(const Run& run);
void refresh_engine_ceiling(const Run& run);
void attach_engine_ceiling(const Run& run, std::vector<Record>& records);

}  // namespace gicomm::bench
