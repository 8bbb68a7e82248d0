// Minimal JSON for the bench harness: parses points files and --out lines (objects, arrays,
// strings, numbers, booleans, null) and escapes strings for the record writer.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gicomm::bench {

struct JsonValue {
  enum class Type { null, boolean, number, string, object, array };
  Type type = Type::null;
  bool b = false;
  double num = 0;
  bool is_integer = false;  // the literal had no fraction or exponent
  long long integer = 0;
  std::string str;
  std::vector<std::pair<std::string, JsonValue>> object;  // insertion order kept
  std::vector<JsonValue> array;

  const JsonValue* find(const std::string& key) const {
    for (const auto& kv : object)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
};

// Throws std::runtime_error with the offset on malformed input.
JsonValue parse_json(const std::string& text);
std::string json_escape(const std::string& s);  // with the surrounding quotes
std::string json_number(double v);              // finite numbers only (throws otherwise)

}  // namespace gicomm::bench
