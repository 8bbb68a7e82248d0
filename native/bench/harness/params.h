// A point's parameters: their values (Params, as the points file gave them) and the declarations
// they are checked against (ParamSpec: each experiment's YAML `params`, compiled into the drivers;
// workflow/gicomm/params.py applies the same rules when the pipeline loads). An experiment reads
// its parameters through typed getters that return the declared default for a parameter the point
// does not name, and refuse a value that does not fit the type the experiment asks for.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "harness/errors.h"

namespace gicomm::bench {

// One scalar parameter value.
using Scalar = std::variant<std::monostate, bool, long long, double, std::string>;
std::string scalar_text(const Scalar& v);  // 8, 16.7, true, 'inline' (as messages quote values)

class Params {
 public:
  void set(const std::string& key, Scalar v);
  bool has(const std::string& key) const;
  const Scalar* find(const std::string& key) const;
  // Untyped reads for code outside the experiments (library knobs); a value of another type is a
  // PointFailure naming the parameter.
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

struct ParamSpec {
  std::string name;
  std::string type;  // integer | number | boolean | string
  std::vector<Scalar> values;  // the allowed values; empty: any of the type
  std::optional<double> min, max;
  bool pow2 = false;
  std::optional<Scalar> default_value;
  std::string derived;  // how the experiment picks the value when a point names none
  std::vector<std::string> transports;  // the transports it applies to; empty: all
  std::string allowed() const;  // in words
  // "" or why `v` is not allowed, naming the parameter, the value and what is allowed.
  std::string problem(const Scalar& v) const;
};

// An experiment as its YAML declares it: the driver that serves it, the default loop counts and
// its parameters (transport and nic_backend among them).
struct ExperimentSpec {
  std::string name, driver;
  int warmup = 0, iters = 1;
  std::vector<ParamSpec> params;
  const ParamSpec* find(const std::string& name) const;
};

// The declaration of `name` (the catalogue compiled from config/experiments), or nullptr.
const ExperimentSpec* find_experiment_spec(const std::string& name);
// Every declared experiment's name.
std::vector<std::string> declared_experiments();

// Every reason the parameters of one point (of `transport`) are not allowed: unknown names, bad
// values, a parameter given for a transport it does not apply to.
std::vector<std::string> point_problems(const ExperimentSpec& e, const Params& p, const std::string& transport);

// The value of declared parameter `name` as T: the point's own, else the declared default. With
// a derived default and no value: std::nullopt (the experiment computes it).
template <class T>
std::optional<T> param_value(const ExperimentSpec& e, const Params& p, const std::string& name);

// ---- implementation of the typed read ---------------------------------------------------------------
[[noreturn]] void param_misuse(const std::string& experiment, const std::string& name, const std::string& why);
[[noreturn]] void param_does_not_fit(const std::string& name, const Scalar& v, const char* type);

template <class T>
std::optional<T> param_value(const ExperimentSpec& e, const Params& p, const std::string& name) {
  const ParamSpec* spec = e.find(name);
  if (!spec) param_misuse(e.name, name, "is not declared in config/experiments/" + e.name + ".yaml");
  const Scalar* v = p.find(name);
  if (!v) {
    if (!spec->default_value) return std::nullopt;
    v = &*spec->default_value;
  }
  if constexpr (std::is_same_v<T, bool>) {
    if (auto b = std::get_if<bool>(v)) return *b;
    param_does_not_fit(name, *v, "a boolean");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (auto s = std::get_if<std::string>(v)) return *s;
    param_does_not_fit(name, *v, "a string");
  } else if constexpr (std::is_integral_v<T>) {
    const long long* i = std::get_if<long long>(v);
    if (!i) param_does_not_fit(name, *v, "an integer");
    using Lim = std::numeric_limits<T>;
    if constexpr (std::is_signed_v<T>) {
      if (*i < static_cast<long long>(Lim::min()) || *i > static_cast<long long>(Lim::max()))
        param_does_not_fit(name, *v, "the driver's integer");
    } else {
      if (*i < 0 || static_cast<unsigned long long>(*i) > static_cast<unsigned long long>(Lim::max()))
        param_does_not_fit(name, *v, "the driver's unsigned integer");
    }
    return static_cast<T>(*i);
  } else {
    static_assert(std::is_floating_point_v<T>, "parameters are bool, std::string, integers or floating point");
    if (auto d = std::get_if<double>(v)) return static_cast<T>(*d);
    if (auto i = std::get_if<long long>(v)) return static_cast<T>(*i);
    param_does_not_fit(name, *v, "a number");
  }
}

}  // namespace gicomm::bench
