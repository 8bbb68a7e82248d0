#include "harness/params.h"

#include <algorithm>
#include <cmath>

#include "harness/json.h"

namespace gicomm::bench {

namespace {

// The shortest text that reads back as `v` (integers without a fraction).
std::string number_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e18) return std::to_string(static_cast<long long>(v));
  return Json(v).dump();
}

Json scalar_json(const Scalar& v) {
  if (auto b = std::get_if<bool>(&v)) return *b;
  if (auto i = std::get_if<long long>(&v)) return *i;
  if (auto d = std::get_if<double>(&v)) return json_number_value(*d);
  if (auto s = std::get_if<std::string>(&v)) return *s;
  return nullptr;
}

bool same(const Scalar& a, const Scalar& b) { return a.index() == b.index() && a == b; }

}  // namespace

std::string scalar_text(const Scalar& v) {
  if (auto b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (auto i = std::get_if<long long>(&v)) return std::to_string(*i);
  if (auto d = std::get_if<double>(&v)) return number_text(*d);
  if (auto s = std::get_if<std::string>(&v)) return "'" + *s + "'";
  return "null";
}

// ---- Params -------------------------------------------------------------------------------------------
void Params::set(const std::string& key, Scalar v) {
  for (auto& kv : items_)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  items_.emplace_back(key, std::move(v));
}

bool Params::has(const std::string& key) const { return find(key) != nullptr; }

const Scalar* Params::find(const std::string& key) const {
  for (const auto& kv : items_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

long long Params::get_int(const std::string& key, long long fallback) const {
  const Scalar* v = find(key);
  if (!v) return fallback;
  if (auto p = std::get_if<long long>(v)) return *p;
  throw PointFailure("parameter '" + key + "': value " + scalar_text(*v) + " is not an integer");
}

double Params::get_double(const std::string& key, double fallback) const {
  const Scalar* v = find(key);
  if (!v) return fallback;
  if (auto p = std::get_if<double>(v)) return *p;
  if (auto p = std::get_if<long long>(v)) return static_cast<double>(*p);
  throw PointFailure("parameter '" + key + "': value " + scalar_text(*v) + " is not a number");
}

bool Params::get_bool(const std::string& key, bool fallback) const {
  const Scalar* v = find(key);
  if (!v) return fallback;
  if (auto p = std::get_if<bool>(v)) return *p;
  throw PointFailure("parameter '" + key + "': value " + scalar_text(*v) + " is not true or false");
}

std::string Params::get_string(const std::string& key, const std::string& fallback) const {
  const Scalar* v = find(key);
  if (!v) return fallback;
  if (auto p = std::get_if<std::string>(v)) return *p;
  throw PointFailure("parameter '" + key + "': value " + scalar_text(*v) + " is not a string");
}

std::string Params::to_json() const {
  Json o = Json::object();
  for (const auto& kv : items_) o[kv.first] = scalar_json(kv.second);
  return dump(o);
}

std::string Params::to_text() const {
  std::string out;
  for (const auto& kv : items_) {
    std::string v = scalar_text(kv.second);
    if (std::holds_alternative<std::string>(kv.second)) v = v.substr(1, v.size() - 2);
    out += (out.empty() ? "" : " ") + kv.first + "=" + v;
  }
  return out;
}

// ---- declarations -------------------------------------------------------------------------------------
std::string ParamSpec::allowed() const {
  if (!values.empty()) {
    std::string out;
    for (const Scalar& v : values) out += (out.empty() ? "" : ", ") + scalar_text(v);
    return out;
  }
  std::string text = type == "integer" ? "an integer" : type == "number" ? "a number"
                   : type == "boolean" ? "true or false" : "a string";
  if (pow2) text = "a power of two";
  if (min && max) {
    text += " from " + number_text(*min) + " to " + number_text(*max);
  } else if (min) {
    text += " of at least " + number_text(*min);
  } else if (max) {
    text += " of at most " + number_text(*max);
  }
  return text;
}

std::string ParamSpec::problem(const Scalar& v) const {
  const std::string bad = "parameter '" + name + "': value " + scalar_text(v);
  const long long* i = std::get_if<long long>(&v);
  const double* d = std::get_if<double>(&v);
  // A JSON integer beyond 64 bits arrives as a double: refuse it as out of range, not as a type.
  const bool huge = type == "integer" && d && std::isfinite(*d) && *d == std::floor(*d) && std::fabs(*d) >= 9.2e18;
  bool typed = false;
  if (type == "integer") typed = i != nullptr || huge;
  if (type == "number") typed = i != nullptr || (d != nullptr && std::isfinite(*d));
  if (type == "boolean") typed = std::holds_alternative<bool>(v);
  if (type == "string") typed = std::holds_alternative<std::string>(v);
  if (!typed) return bad + " has the wrong type; allowed: " + allowed();
  if (!values.empty() && std::none_of(values.begin(), values.end(), [&](const Scalar& a) { return same(a, v); }))
    return bad + " is not allowed; allowed: " + allowed();
  if (huge) return bad + " is out of range; allowed: " + allowed();
  if (i || d) {
    const double x = i ? static_cast<double>(*i) : *d;
    // Compare integers exactly where a double would round (values near 2^63).
    const bool below = i ? (min && static_cast<long double>(*i) < static_cast<long double>(*min)) : (min && x < *min);
    const bool above = i ? (max && static_cast<long double>(*i) > static_cast<long double>(*max)) : (max && x > *max);
    if (below || above) return bad + " is out of range; allowed: " + allowed();
    if (pow2 && i && (*i <= 0 || (*i & (*i - 1)))) return bad + " is not a power of two; allowed: " + allowed();
  }
  return "";
}

const ParamSpec* ExperimentSpec::find(const std::string& n) const {
  for (const ParamSpec& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

std::vector<std::string> point_problems(const ExperimentSpec& e, const Params& p, const std::string& transport) {
  std::vector<std::string> out;
  for (const auto& kv : p.items()) {
    const ParamSpec* spec = e.find(kv.first);
    if (!spec || kv.first == "transport" || kv.first == "nic_backend") {
      std::vector<std::string> names;
      for (const ParamSpec& s : e.params) names.push_back(s.name);
      std::sort(names.begin(), names.end());
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      out.push_back(spec ? "parameter '" + kv.first + "' belongs beside the params, not in them"
                         : "unknown parameter '" + kv.first + "'; allowed: " + list);
      continue;
    }
    const std::string why = spec->problem(kv.second);
    if (!why.empty()) {
      out.push_back(why);
      continue;
    }
    if (!spec->transports.empty() &&
        std::find(spec->transports.begin(), spec->transports.end(), transport) == spec->transports.end()) {
      std::string list;
      for (const auto& t : spec->transports) list += (list.empty() ? "" : ", ") + t;
      out.push_back("parameter '" + kv.first + "' applies to transport " + list + " only, not to " +
                    (transport.empty() ? std::string("this point's") : transport));
    }
  }
  return out;
}

void param_misuse(const std::string& experiment, const std::string& name, const std::string& why) {
  throw std::logic_error("experiment " + experiment + " reads parameter '" + name + "', which " + why);
}

void param_does_not_fit(const std::string& name, const Scalar& v, const char* type) {
  throw PointFailure("parameter '" + name + "': value " + scalar_text(v) + " is not " + type);
}

}  // namespace gicomm::bench
