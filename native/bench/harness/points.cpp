#include "harness/points.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <fstream>
#include <regex>
#include <stdexcept>

#include "harness/json.h"

namespace gicomm::bench {

namespace {

Scalar scalar_of(const Json& v, const std::string& where, const std::string& key) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_unsigned() && v.get<unsigned long long>() > LLONG_MAX) return v.get<double>();
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_number_float()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  throw std::runtime_error(where + ": parameter '" + key + "' is " + (v.is_null() ? "null" : "not a scalar") +
                           "; a parameter is a number, a string or true/false");
}

// The key whose value holds byte `at` of a line that failed to parse (for a UTF-8 error).
std::string key_before(const std::string& line, size_t at) {
  static const std::regex key(R"re("([A-Za-z0-9_]+)"\s*:)re");
  std::string found;
  const std::string head = line.substr(0, std::min(at, line.size()));
  for (std::sregex_iterator it(head.begin(), head.end(), key), end; it != end; ++it)
    found = (*it)[1];
  return found;
}

// transport / nic_backend: beside params, or (first points files) inside them; never both.
std::string first_class(const Json& line, const std::string& key, const std::string& where) {
  const bool outside = line.contains(key), inside = line.contains("params") && line["params"].is_object() &&
                                                     line["params"].contains(key);
  if (outside && inside) throw std::runtime_error(where + ": '" + key + "' given twice (beside params and in them)");
  const Json* v = outside ? &line[key] : inside ? &line["params"][key] : nullptr;
  if (!v) return "";
  if (!v->is_string()) throw std::runtime_error(where + ": '" + key + "' is not a string");
  return v->get<std::string>();
}

}  // namespace

std::string point_to_json(const Point& p) {
  Json j = Json::object();
  j["point_id"] = p.point_id;
  if (!p.transport.empty()) j["transport"] = p.transport;
  if (!p.nic_backend.empty()) j["nic_backend"] = p.nic_backend;
  j["params"] = Json::parse(p.params.to_json());
  return dump(j);
}

std::string point_id_of(const std::string& experiment, const Point& p) {
  std::vector<std::pair<std::string, std::string>> sorted;
  for (const auto& kv : p.params.items()) sorted.emplace_back(kv.first, scalar_text(kv.second));
  if (!p.transport.empty()) sorted.emplace_back("transport", p.transport);
  if (!p.nic_backend.empty()) sorted.emplace_back("nic_backend", p.nic_backend);
  std::sort(sorted.begin(), sorted.end());
  std::string text = experiment;
  for (const auto& kv : sorted) text += "|" + kv.first + "=" + kv.second;
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "-%016llx", static_cast<unsigned long long>(h));
  return experiment + buf;
}

std::vector<Point> load_points(const Options& o) {
  std::vector<Point> points;
  if (o.points_path.empty()) {
    Point p;
    p.params = o.cli_params;
    p.transport = o.transport;
    p.nic_backend = o.nic_backend;
    for (const char* key : {"transport", "nic_backend"})
      if (p.params.has(key)) throw std::runtime_error(std::string("give ") + key + " as --" + (key[0] == 't' ? "transport" : "nic-backend") + ", not --param");
    for (const auto& kv : p.params.items())
      if (!is_utf8(kv.first)) throw std::runtime_error("--param: a key is not valid UTF-8");
    p.point_id = point_id_of(o.experiment, p);
    points.push_back(p);
    return points;
  }
  std::ifstream in(o.points_path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read points file " + o.points_path);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    const std::string where = o.points_path + ":" + std::to_string(lineno);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json v;
    try {
      v = Json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      std::string why = json_error_text(e);
      if (!is_utf8(line)) {
        const std::string key = key_before(line, e.byte ? e.byte - 1 : 0);
        why = "text that is not valid UTF-8" + (key.empty() ? std::string() : " in the value of '" + key + "'") +
              " (byte " + std::to_string(e.byte) + "): refused, a point is UTF-8 text";
      }
      throw std::runtime_error(where + ": " + why);
    }
    if (!v.is_object()) throw std::runtime_error(where + ": expected a JSON object");
    Point p;
    p.transport = first_class(v, "transport", where);
    p.nic_backend = first_class(v, "nic_backend", where);
    if (v.contains("params")) {
      if (!v["params"].is_object()) throw std::runtime_error(where + ": 'params' is not an object");
      for (const auto& [key, value] : v["params"].items())
        if (key != "transport" && key != "nic_backend") p.params.set(key, scalar_of(value, where, key));
    }
    if (v.contains("point_id") && !v["point_id"].is_string())
      throw std::runtime_error(where + ": 'point_id' is not a string");
    p.point_id = v.contains("point_id") ? v["point_id"].get<std::string>() : point_id_of(o.experiment, p);
    points.push_back(std::move(p));
  }
  return points;
}

}  // namespace gicomm::bench
