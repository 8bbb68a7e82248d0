// JSON for the harness: nlohmann::json (Debian nlohmann-json3-dev), insertion-ordered, so records
// keep their fields and params in the order they were written. Strings are UTF-8: the parser
// refuses ill-formed UTF-8 and the writer never emits it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gicomm::bench {

using Json = nlohmann::ordered_json;

// JSON text in the style of Python's json.dumps (", " and ": " between items), as every record
// writer of gicomm writes it; never ill-formed UTF-8 (`replace` guards what a library message
// might carry: every string was checked where it entered).
std::string dump(const Json& j);

// A record number: an integer when the value is one (|v| < 1e15), else the shortest text that
// reads back as the same double. Throws on NaN and infinities (a record never holds them).
Json json_number_value(double v);
// The same, as JSON text (for progress lines and hand-built lines).
std::string json_number(double v);
// A string as a JSON string literal, quotes included.
std::string json_escape(const std::string& s);
// The message of a nlohmann exception without its "[json.exception.parse_error.101] " prefix.
std::string json_error_text(const std::exception& e);
// Whether `s` is well-formed UTF-8 (what every string entering a record must be).
bool is_utf8(const std::string& s);

}  // namespace gicomm::bench
