#include "harness/record.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include "harness/json.h"
#include "harness/options.h"
#include "harness/points.h"

namespace gicomm::bench {

Stats compute_stats(std::vector<double> v) {
  if (v.empty()) throw std::runtime_error("stats: no samples");
  std::sort(v.begin(), v.end());
  Stats s;
  s.n = static_cast<long long>(v.size());
  auto rank = [&](double q) {
    size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    if (k == 0) k = 1;
    return v[std::min(k, v.size()) - 1];
  };
  s.p50 = rank(0.50);
  s.p90 = rank(0.90);
  s.p99 = rank(0.99);
  s.min = v.front();
  s.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(var / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

std::string utc_timestamp() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string record_to_json(const Record& r, const Options& o, const DriverInfo& info, const Point& p) {
  Json j = Json::object();
  j["schema_version"] = kRecordSchemaVersion;
  j["campaign"] = o.campaign;
  j["host"] = o.host;
  j["platform"] = o.platform;
  j["experiment"] = r.experiment.empty() ? o.experiment : r.experiment;
  j["transport"] = !r.transport.empty() ? r.transport : !p.transport.empty() ? p.transport : info.transport;
  j["nic_backend"] = !r.nic_backend.empty() ? r.nic_backend : !p.nic_backend.empty() ? p.nic_backend : info.nic_backend;
  j["point_id"] = r.point_id.empty() ? p.point_id : r.point_id;
  j["params"] = Json::parse((r.params ? *r.params : p.params).to_json());
  j["metric"] = r.metric;
  j["unit"] = r.unit;
  if (r.stats) {
    const Stats& s = *r.stats;
    j["stats"] = {{"n", s.n},
                  {"p50", json_number_value(s.p50)},
                  {"p90", json_number_value(s.p90)},
                  {"p99", json_number_value(s.p99)},
                  {"min", json_number_value(s.min)},
                  {"max", json_number_value(s.max)},
                  {"mean", json_number_value(s.mean)},
                  {"stddev", json_number_value(s.stddev)}};
  }
  if (!r.samples.empty()) {
    Json a = Json::array();
    for (double x : r.samples) a.push_back(json_number_value(x));
    j["samples"] = a;
  }
  j["sm_clock_mhz"] = r.sm_clock_mhz ? json_number_value(*r.sm_clock_mhz) : Json(nullptr);
  if (r.cpu_clock_mhz) j["cpu_clock_mhz"] = json_number_value(*r.cpu_clock_mhz);
  if (!r.cpu_clock_state.empty()) j["cpu_clock_state"] = r.cpu_clock_state;
  if (kRecordSchemaVersion >= 2) {
    if (!r.rdma_provider.empty()) j["rdma_provider"] = r.rdma_provider;
    if (!r.doorbell_target.empty()) j["doorbell_target"] = r.doorbell_target;
    if (!r.topology.empty()) j["topology"] = r.topology;
  }
  if (r.engine_ceiling) j["engine_ceiling"] = json_number_value(*r.engine_ceiling);
  if (!r.engine_ceiling_shape.empty()) j["engine_ceiling_shape"] = r.engine_ceiling_shape;
  if (!r.path_check.empty()) j["path_check"] = Json::parse(r.path_check);
  if (!r.peer.empty()) j["peer"] = Json::parse(r.peer);
  if (!r.floor.empty()) j["floor"] = r.floor;
  if (r.floor_ns) j["floor_ns"] = json_number_value(*r.floor_ns);
  if (r.host_load) {
    const HostLoad& h = *r.host_load;
    j["host_load"] = {{"loadavg_1m", json_number_value(h.loadavg_1m)},
                      {"cpu_busy", h.cpu_busy ? json_number_value(*h.cpu_busy) : Json(nullptr)},
                      {"self_cpus", json_number_value(h.self_cpus)},
                      {"ncpu", h.ncpu},
                      {"window_s", json_number_value(h.window_s)}};
  }
  j["run_index"] = o.run_index;
  j["provenance_id"] = o.provenance_id;
  j["status"] = r.status;
  if (r.status != "ok") j["error"] = r.error.empty() ? "unspecified failure" : r.error;
  j["timestamp"] = utc_timestamp();
  return dump(j);
}

void append_lines_atomically(const std::string& path, const std::string& lines) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  const ssize_t n = ::write(fd, lines.data(), lines.size());
  const bool ok = n == static_cast<ssize_t>(lines.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("short write or fsync failure on " + path);
}

std::vector<std::string> finished_points(const std::string& path) {
  std::vector<std::string> ids;
  std::ifstream in(path, std::ios::binary);
  if (!in) return ids;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const size_t last_nl = text.rfind('\n');
  const size_t whole = last_nl == std::string::npos ? 0 : last_nl + 1;
  if (whole != text.size()) {
    // A torn last line (killed mid-write before fsync): drop it so appends start on a fresh line.
    if (::truncate(path.c_str(), static_cast<off_t>(whole)) != 0)
      throw std::runtime_error("cannot truncate torn line of " + path);
  }
  std::set<std::string> seen;
  std::istringstream lines(text.substr(0, whole));
  for (std::string line; std::getline(lines, line);) {
    // A malformed line is the reader's problem (records.py reports it); it marks nothing done.
    const Json v = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (v.is_object() && v.contains("point_id") && v["point_id"].is_string()) {
      const std::string id = v["point_id"].get<std::string>();
      if (seen.insert(id).second) ids.push_back(id);
    }
  }
  return ids;
}

}  // namespace gicomm::bench
