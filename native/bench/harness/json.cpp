#include "harness/json.h"

#include <cmath>
#include <stdexcept>

namespace gicomm::bench {

Json json_number_value(double v) {
  if (!std::isfinite(v)) throw std::runtime_error("non-finite number in a record");
  if (v == std::floor(v) && std::fabs(v) < 1e15) return Json(static_cast<long long>(v));
  return Json(v);
}

std::string dump(const Json& j) {
  if (j.is_object()) {
    std::string out = "{";
    for (auto it = j.begin(); it != j.end(); ++it)
      out += (it == j.begin() ? "" : ", ") + json_escape(it.key()) + ": " + dump(it.value());
    return out + "}";
  }
  if (j.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + dump(j[i]);
    return out + "]";
  }
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string json_number(double v) { return json_number_value(v).dump(); }

std::string json_escape(const std::string& s) { return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string json_error_text(const std::exception& e) {
  const std::string w = e.what();
  const size_t close = w.find("] ");
  return w.rfind("[json.exception.", 0) == 0 && close != std::string::npos ? w.substr(close + 2) : w;
}

bool is_utf8(const std::string& s) {
  try {
    (void)Json(s).dump();  // the strict writer refuses ill-formed UTF-8
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

}  // namespace gicomm::bench
