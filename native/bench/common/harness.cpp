#include "common/harness.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include "common/json.h"

namespace gicomm::bench {

// ---- Params ---------------------------------------------------------------------------------------
void Params::set(const std::string& key, Scalar v) {
  for (auto& kv : items_)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  items_.emplace_back(key, std::move(v));
}

bool Params::has(const std::string& key) const {
  for (const auto& kv : items_)
    if (kv.first == key) return true;
  return false;
}

static const Scalar* find_param(const std::vector<std::pair<std::string, Scalar>>& items, const std::string& key) {
  for (const auto& kv : items)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

long long Params::get_int(const std::string& key, long long fallback) const {
  const Scalar* v = find_param(items_, key);
  if (!v) return fallback;
  if (auto p = std::get_if<long long>(v)) return *p;
  if (auto p = std::get_if<double>(v)) return static_cast<long long>(*p);
  if (auto p = std::get_if<bool>(v)) return *p ? 1 : 0;
  if (auto p = std::get_if<std::string>(v)) return std::stoll(*p);
  return fallback;
}

double Params::get_double(const std::string& key, double fallback) const {
  const Scalar* v = find_param(items_, key);
  if (!v) return fallback;
  if (auto p = std::get_if<double>(v)) return *p;
  if (auto p = std::get_if<long long>(v)) return static_cast<double>(*p);
  if (auto p = std::get_if<std::string>(v)) return std::stod(*p);
  return fallback;
}

bool Params::get_bool(const std::string& key, bool fallback) const {
  const Scalar* v = find_param(items_, key);
  if (!v) return fallback;
  if (auto p = std::get_if<bool>(v)) return *p;
  if (auto p = std::get_if<long long>(v)) return *p != 0;
  if (auto p = std::get_if<std::string>(v)) return *p == "true" || *p == "1";
  return fallback;
}

std::string Params::get_string(const std::string& key, const std::string& fallback) const {
  const Scalar* v = find_param(items_, key);
  if (!v) return fallback;
  if (auto p = std::get_if<std::string>(v)) return *p;
  if (auto p = std::get_if<long long>(v)) return std::to_string(*p);
  if (auto p = std::get_if<bool>(v)) return *p ? "true" : "false";
  if (auto p = std::get_if<double>(v)) return json_number(*p);
  return fallback;
}

static std::string scalar_json(const Scalar& v) {
  if (std::holds_alternative<std::monostate>(v)) return "null";
  if (auto p = std::get_if<bool>(&v)) return *p ? "true" : "false";
  if (auto p = std::get_if<long long>(&v)) return std::to_string(*p);
  if (auto p = std::get_if<double>(&v)) return json_number(*p);
  return json_escape(std::get<std::string>(v));
}

std::string Params::to_json() const {
  std::string out = "{";
  for (size_t i = 0; i < items_.size(); ++i) {
    if (i) out += ", ";
    out += json_escape(items_[i].first) + ": " + scalar_json(items_[i].second);
  }
  return out + "}";
}

std::string Params::to_text() const {
  std::string out;
  for (const auto& kv : items_) {
    if (!out.empty()) out += ' ';
    std::string v = scalar_json(kv.second);
    if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
    out += kv.first + "=" + v;
  }
  return out;
}

// ---- statistics -------------------------------------------------------------------------------------
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

// ---- options ------------------------------------------------------------------------------------------
static Scalar parse_cli_scalar(const std::string& text) {
  if (text == "true") return true;
  if (text == "false") return false;
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(text.c_str(), &end, 10);
  if (errno == 0 && end && *end == '\0' && !text.empty()) return i;
  const double d = std::strtod(text.c_str(), &end);
  if (end && *end == '\0' && !text.empty()) return d;
  return text;
}

int parse_options(int argc, char** argv, Options* o, std::string* error) {
  auto need = [&](int& i, const char* flag) -> const char* {
    if (i + 1 >= argc) {
      *error = std::string("missing value for ") + flag;
      return nullptr;
    }
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = nullptr;
    auto to_int = [&](const char* s, int* dst) {
      char* end = nullptr;
      const long x = std::strtol(s, &end, 10);
      if (!end || *end != '\0') {
        *error = "not an integer for " + a + ": " + s;
        return false;
      }
      *dst = static_cast<int>(x);
      return true;
    };
    if (a == "--experiment") {
      if (!(v = need(i, "--experiment"))) return 2;
      o->experiment = v;
    } else if (a == "--points") {
      if (!(v = need(i, "--points"))) return 2;
      o->points_path = v;
    } else if (a == "--out") {
      if (!(v = need(i, "--out"))) return 2;
      o->out_path = v;
    } else if (a == "--campaign") {
      if (!(v = need(i, "--campaign"))) return 2;
      o->campaign = v;
    } else if (a == "--host") {
      if (!(v = need(i, "--host"))) return 2;
      o->host = v;
    } else if (a == "--platform") {
      if (!(v = need(i, "--platform"))) return 2;
      o->platform = v;
    } else if (a == "--provenance-id") {
      if (!(v = need(i, "--provenance-id"))) return 2;
      o->provenance_id = v;
    } else if (a == "--run-index") {
      if (!(v = need(i, "--run-index")) || !to_int(v, &o->run_index)) return 2;
    } else if (a == "--warmup") {
      if (!(v = need(i, "--warmup")) || !to_int(v, &o->warmup)) return 2;
    } else if (a == "--iters") {
      if (!(v = need(i, "--iters")) || !to_int(v, &o->iters)) return 2;
    } else if (a == "--timeout-ms") {
      if (!(v = need(i, "--timeout-ms")) || !to_int(v, &o->timeout_ms)) return 2;
    } else if (a == "--nic-backend") {
      if (!(v = need(i, "--nic-backend"))) return 2;
      o->nic_backend = v;
      static const std::set<std::string> ok = {"softnic-cpu", "softnic-gpu", "mlx5", "verbs", "nvlink", "none"};
      if (!ok.count(o->nic_backend)) {
        *error = "unknown --nic-backend " + o->nic_backend;
        return 2;
      }
    } else if (a == "--param") {
      if (!(v = need(i, "--param"))) return 2;
      const std::string kv = v;
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        *error = "--param wants key=value, got " + kv;
        return 2;
      }
      o->cli_params.set(kv.substr(0, eq), parse_cli_scalar(kv.substr(eq + 1)));
    } else {
      *error = "unknown argument " + a;
      return 2;
    }
  }
  if (o->experiment.empty() || o->out_path.empty() || o->campaign.empty() || o->host.empty() ||
      o->platform.empty() || o->provenance_id.empty()) {
    *error = "required: --experiment --out --campaign --host --platform --provenance-id (and --points or --param)";
    return 2;
  }
  for (char c : o->experiment)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      *error = "--experiment must match ^[a-z0-9_]+$";
      return 2;
    }
  if (o->points_path.empty() && o->cli_params.items().empty()) {
    *error = "give --points FILE or at least one --param key=value";
    return 2;
  }
  if (o->iters < 1 || o->warmup < 0 || o->timeout_ms < 1) {
    *error = "--iters >= 1, --warmup >= 0, --timeout-ms >= 1";
    return 2;
  }
  return 0;
}

// ---- points ---------------------------------------------------------------------------------------------
std::string point_id_of(const std::string& experiment, const Params& p) {
  std::vector<std::pair<std::string, std::string>> sorted;
  for (const auto& kv : p.items()) sorted.emplace_back(kv.first, scalar_json(kv.second));
  std::sort(sorted.begin(), sorted.end());
  std::string text = experiment;
  for (const auto& kv : sorted) text += "|" + kv.first + "=" + kv.second;
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s-%016llx", experiment.c_str(), static_cast<unsigned long long>(h));
  return buf;
}

std::vector<Point> load_points(const Options& o) {
  std::vector<Point> points;
  if (o.points_path.empty()) {
    Point p;
    p.params = o.cli_params;
    p.point_id = point_id_of(o.experiment, p.params);
    points.push_back(p);
    return points;
  }
  std::ifstream in(o.points_path);
  if (!in) throw std::runtime_error("cannot read points file " + o.points_path);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    JsonValue v;
    try {
      v = parse_json(line);
    } catch (const std::exception& e) {
      throw std::runtime_error(o.points_path + ":" + std::to_string(lineno) + ": " + e.what());
    }
    Point p;
    const JsonValue* params = v.find("params");
    if (params && params->type == JsonValue::Type::object) {
      for (const auto& kv : params->object) {
        const JsonValue& x = kv.second;
        switch (x.type) {
          case JsonValue::Type::boolean: p.params.set(kv.first, x.b); break;
          case JsonValue::Type::number:
            if (x.is_integer) {
              p.params.set(kv.first, x.integer);
            } else {
              p.params.set(kv.first, x.num);
            }
            break;
          case JsonValue::Type::string: p.params.set(kv.first, x.str); break;
          case JsonValue::Type::null: p.params.set(kv.first, std::monostate{}); break;
          default:
            throw std::runtime_error(o.points_path + ":" + std::to_string(lineno) + ": param " + kv.first +
                                     " is not a scalar");
        }
      }
    }
    // --param overrides apply to every point (hand use).
    for (const auto& kv : o.cli_params.items()) p.params.set(kv.first, kv.second);
    const JsonValue* id = v.find("point_id");
    p.point_id = (id && id->type == JsonValue::Type::string) ? id->str : point_id_of(o.experiment, p.params);
    points.push_back(std::move(p));
  }
  return points;
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
  size_t pos = 0;
  while (pos < whole) {
    const size_t nl = text.find('\n', pos);
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    try {
      const JsonValue v = parse_json(line);
      const JsonValue* id = v.find("point_id");
      if (id && id->type == JsonValue::Type::string && seen.insert(id->str).second) ids.push_back(id->str);
    } catch (const std::exception&) {
      // A malformed line is the reader's problem (records.py reports it); it marks nothing done.
    }
  }
  return ids;
}

// ---- records ----------------------------------------------------------------------------------------------
std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string record_to_json(const Record& r, const Options& o, const DriverInfo& info, const Point& p) {
  std::string s = "{\"schema_version\": 1";
  auto field = [&](const char* k, const std::string& json) { s += std::string(", \"") + k + "\": " + json; };
  field("campaign", json_escape(o.campaign));
  field("host", json_escape(o.host));
  field("platform", json_escape(o.platform));
  field("experiment", json_escape(r.experiment.empty() ? o.experiment : r.experiment));
  // A failed point's record names the transport the point asked for, when it says one.
  std::string transport = r.transport.empty() ? info.transport : r.transport;
  if (r.transport.empty() && r.status != "ok") transport = p.params.get_string("transport", transport);
  field("transport", json_escape(transport));
  const std::string nic = !r.nic_backend.empty() ? r.nic_backend : (!o.nic_backend.empty() ? o.nic_backend : info.nic_backend);
  field("nic_backend", json_escape(nic));
  field("point_id", json_escape(r.point_id.empty() ? p.point_id : r.point_id));
  field("params", (r.params ? *r.params : p.params).to_json());
  field("metric", json_escape(r.metric));
  field("unit", json_escape(r.unit));
  if (r.stats) {
    const Stats& st = *r.stats;
    s += ", \"stats\": {\"n\": " + std::to_string(st.n) + ", \"p50\": " + json_number(st.p50) +
         ", \"p90\": " + json_number(st.p90) + ", \"p99\": " + json_number(st.p99) + ", \"min\": " +
         json_number(st.min) + ", \"max\": " + json_number(st.max) + ", \"mean\": " + json_number(st.mean) +
         ", \"stddev\": " + json_number(st.stddev) + "}";
  }
  if (!r.samples.empty()) {
    std::string a = "[";
    for (size_t i = 0; i < r.samples.size(); ++i) a += (i ? ", " : "") + json_number(r.samples[i]);
    field("samples", a + "]");
  }
  field("sm_clock_mhz", r.sm_clock_mhz ? json_number(*r.sm_clock_mhz) : "null");
  if (r.cpu_clock_mhz) field("cpu_clock_mhz", json_number(*r.cpu_clock_mhz));
  if (!r.cpu_clock_state.empty()) field("cpu_clock_state", json_escape(r.cpu_clock_state));
  field("run_index", std::to_string(o.run_index));
  field("provenance_id", json_escape(o.provenance_id));
  field("status", json_escape(r.status));
  if (r.status != "ok") field("error", json_escape(r.error.empty() ? "unspecified failure" : r.error));
  field("timestamp", json_escape(utc_timestamp()));
  return s + "}";
}

void append_lines_atomically(const std::string& path, const std::string& lines) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  const ssize_t n = ::write(fd, lines.data(), lines.size());
  const bool ok = n == static_cast<ssize_t>(lines.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("short write or fsync failure on " + path);
}

// ---- the point loop --------------------------------------------------------------------------------------------
int run_driver(int argc, char** argv, const DriverInfo& info, const PointFn& fn) {
  Options o;
  std::string error;
  if (parse_options(argc, argv, &o, &error) != 0) {
    std::fprintf(stderr, "%s: %s\nusage: %s --experiment NAME --points POINTS.jsonl --out OUT.jsonl --campaign C "
                 "--host H --platform P --run-index N --provenance-id ID [--warmup W] [--iters N] [--timeout-ms T] "
                 "[--nic-backend B] [--param key=value ...]\n",
                 info.program.c_str(), error.c_str(), info.program.c_str());
    return 2;
  }
  std::vector<Point> points;
  try {
    points = load_points(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", info.program.c_str(), e.what());
    return 2;
  }
  std::set<std::string> done;
  try {
    for (auto& id : finished_points(o.out_path)) done.insert(id);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", info.program.c_str(), e.what());
    return 1;
  }
  const size_t total = points.size();
  size_t index = 0;
  for (const Point& p : points) {
    ++index;
    if (done.count(p.point_id)) {
      std::fprintf(stderr, "[gicomm] point %zu/%zu id=%s already recorded, skipped\n", index, total, p.point_id.c_str());
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Record> records;
    std::string summary;
    try {
      records = fn(p, o);
      for (const Record& r : records)
        if (r.stats && summary.empty()) summary = r.metric + " p50=" + json_number(r.stats->p50) + " " + r.unit;
    } catch (const HardwareMissing& e) {
      std::fprintf(stderr, "%s: %s\n", info.program.c_str(), e.what());
      return 3;
    } catch (const std::exception& e) {
      Record failed;
      failed.metric = "point";
      failed.unit = "none";
      failed.status = "failed";
      failed.error = e.what();
      records.assign(1, failed);
      summary = std::string("FAILED: ") + e.what();
    }
    std::string lines;
    try {
      for (const Record& r : records) lines += record_to_json(r, o, info, p) + "\n";
      if (!lines.empty()) append_lines_atomically(o.out_path, lines);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", info.program.c_str(), e.what());
      return 1;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "[gicomm] point %zu/%zu id=%s %s -> %s (%.1f s)\n", index, total, p.point_id.c_str(),
                 p.params.to_text().c_str(), summary.c_str(), secs);
  }
  return 0;
}

}  // namespace gicomm::bench
