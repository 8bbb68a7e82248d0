// Records (workflow/schemas/record.schema.yaml), one JSON object per line: statistics of the
// samples, the record writer, the atomic append of a point's lines, and the finished points of an
// output file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/host_load.h"
#include "harness/params.h"

namespace gicomm::bench {

// The record schema version this harness writes. Version 2 carries the transport and the NIC
// backend beside the params (never in them) and the optional provenance fields below
// (workflow/gicomm/records.py reads both versions).
constexpr int kRecordSchemaVersion = 2;

struct Stats {
  long long n = 0;
  double p50 = 0, p90 = 0, p99 = 0, min = 0, max = 0, mean = 0, stddev = 0;
};
// Percentiles by nearest rank on the sorted samples. Throws on an empty input.
Stats compute_stats(std::vector<double> samples);

struct Record {
  std::string metric, unit;
  std::string status = "ok";
  std::string error;
  std::optional<Stats> stats;
  std::vector<double> samples;  // only where a figure shows a distribution
  std::optional<double> sm_clock_mhz;
  std::optional<double> cpu_clock_mhz;
  std::string cpu_clock_state;  // "", "cold" or "warm"
  // Empty: the point's (resolved) transport and NIC backend, the run's experiment and point id.
  std::string transport, nic_backend, experiment, point_id;
  std::optional<Params> params;  // empty: the point's params
  // Where the work went (schema version 2): "emulated" or "system rdma-core <version>" (absent
  // for softnic and NVLink), "uar-iomem" | "pinned-host" | "gpu-memory" ..., "loopback" |
  // "two-rank" | "single-process". Set by the transport factory when it knows them.
  std::string rdma_provider, doorbell_target, topology;
  // The software NIC engine's ceiling (Mmsg/s) for this rate point's WQE shape, measured in the
  // same run, and the shape in words (harness/engine_ceiling.h); absent elsewhere.
  std::optional<double> engine_ceiling;
  std::string engine_ceiling_shape;
  // NIC points (mlx5, verbs): the port-counter path proof and the peer rank's provenance, as JSON
  // objects (harness/nic_path.cpp); empty: absent.
  std::string path_check, peer;
  // The floor this latency stands on, timed in the same point (harness/floor.h): an id of
  // config/floors.yaml and its p50; empty: the tidy table joins it from the floors experiment.
  std::string floor;
  std::optional<double> floor_ns;
  // What else kept the host busy over the point's window (harness/host_load.h); absent where
  // /proc cannot be read.
  std::optional<HostLoad> host_load;

  static Record ok(std::string metric, std::string unit, const Stats& s) {
    Record r;
    r.metric = std::move(metric);
    r.unit = std::move(unit);
    r.stats = s;
    return r;
  }
  // A scalar as a record (statistics of one sample).
  static Record scalar(std::string metric, std::string unit, double v) {
    return ok(std::move(metric), std::move(unit), compute_stats({v}));
  }
  static Record failed(std::string metric, std::string unit, std::string why) {
    Record r;
    r.metric = std::move(metric);
    r.unit = std::move(unit);
    r.status = "failed";
    r.error = std::move(why);
    return r;
  }
};

struct Options;
struct Point;

// The program and the record identity of points that name no transport or NIC backend (baseline
// harnesses with a loop of their own; the runner's points always name theirs).
struct DriverInfo {
  std::string program;      // gicomm-bench-<family>
  std::string transport;
  std::string nic_backend;
};

// One record as a JSON line (no newline): the run's identity from the options, the point's id,
// transport, NIC backend and params unless the record sets its own.
std::string record_to_json(const Record& r, const Options& o, const DriverInfo& info, const Point& p);
// Appends whole lines with one write() and fsync().
void append_lines_atomically(const std::string& path, const std::string& lines);
// Reads `path`, drops a torn last line (truncating the file), returns the finished point ids.
std::vector<std::string> finished_points(const std::string& path);
std::string utc_timestamp();

}  // namespace gicomm::bench
