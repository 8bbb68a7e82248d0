// The shared benchmark harness (native/bench/README.md is the contract): command line, points
// file, the point loop with skip-finished and failed-point records, statistics, and the JSONL
// record writer (one write() + fsync() per point).
//
// A driver is a main() that calls run_driver():
//
//   int main(int argc, char** argv) {
//     gicomm::bench::DriverInfo info{"gicomm-bench-gda", "mini-gda", "softnic-gpu"};
//     return gicomm::bench::run_driver(argc, argv, info, [](const Point& p, const Options& o) {
//       std::vector<double> ns = measure(p.params.get_int("threads", 1), o.iters);
//       Record r = Record::ok("issue_ns", "ns", compute_stats(ns));
//       r.sm_clock_mhz = measured_mhz;
//       return std::vector<Record>{r};
//     });
//   }
//
// A point that cannot be measured throws PointFailure (a failed record is written, naming what
// failed, and the loop goes on); missing hardware throws HardwareMissing (one line on stderr,
// exit 3). Records inherit experiment/campaign/host/... from the options and the point's params
// and point_id unless the driver sets them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace gicomm::bench {

// One scalar sweep parameter value.
using Scalar = std::variant<std::monostate, bool, long long, double, std::string>;

class Params {
 public:
  void set(const std::string& key, Scalar v);
  bool has(const std::string& key) const;
  long long get_int(const std::string& key, long long fallback) const;
  double get_double(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  const std::vector<std::pair<std::string, Scalar>>& items() const { return items_; }
  std::string to_json() const;
  std::string to_text() const;  // "k=v k=v" for progress lines

 private:
  std::vector<std::pair<std::string, Scalar>> items_;
};

struct Point {
  std::string point_id;
  Params params;
};

struct Options {
  std::string experiment, points_path, out_path, campaign, host, platform, provenance_id;
  int run_index = 0;
  int warmup = 10;
  int iters = 1000;
  int timeout_ms = 2000;
  std::string nic_backend;  // empty: the driver's default
  Params cli_params;        // --param key=value (a single point for hand use)
};

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
  // Empty: taken from the driver / options / point.
  std::string transport, nic_backend, experiment, point_id;
  std::optional<Params> params;

  static Record ok(std::string metric, std::string unit, const Stats& s) {
    Record r;
    r.metric = std::move(metric);
    r.unit = std::move(unit);
    r.stats = s;
    return r;
  }
};

struct DriverInfo {
  std::string program;            // gicomm-bench-<family>
  std::string transport;          // default transport of its records
  std::string nic_backend;        // default --nic-backend
};

// Thrown by a point function: the point is recorded as failed with this message.
struct PointFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Thrown when the hardware the driver needs is absent: exit 3 with this one-line reason.
struct HardwareMissing : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using PointFn = std::function<std::vector<Record>(const Point&, const Options&)>;

// Parses the command line, runs every unfinished point, writes records. Returns the exit code:
// 0 all points ran (some may have failed), 2 bad arguments, 3 hardware missing, 1 other errors.
int run_driver(int argc, char** argv, const DriverInfo& info, const PointFn& fn);

// Building blocks (exposed for tests and for drivers with their own loop).
int parse_options(int argc, char** argv, Options* out, std::string* error);
std::vector<Point> load_points(const Options& o);  // throws std::runtime_error
std::string point_id_of(const std::string& experiment, const Params& p);
// Reads `path`, drops a torn last line (truncating the file), returns the finished point ids.
std::vector<std::string> finished_points(const std::string& path);
std::string record_to_json(const Record& r, const Options& o, const DriverInfo& info, const Point& p);
// Appends whole lines with one write() and fsync().
void append_lines_atomically(const std::string& path, const std::string& lines);
std::string utc_timestamp();

}  // namespace gicomm::bench
