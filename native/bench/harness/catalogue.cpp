// Reads the compiled-in declarations (catalogue.h) once, into ExperimentSpec.
#include "harness/catalogue.h"

#include <map>

#include "harness/json.h"
#include "harness/params.h"

namespace gicomm::bench {

namespace {

Scalar scalar_of(const Json& j) {
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<long long>();
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  return std::monostate{};
}

std::map<std::string, ExperimentSpec> parse_catalogue() {
  std::map<std::string, ExperimentSpec> out;
  const Json catalogue = Json::parse(kCatalogueJson);
  for (const auto& [name, e] : catalogue.items()) {
    ExperimentSpec spec;
    spec.name = name;
    spec.driver = e.at("driver").get<std::string>();
    spec.warmup = e.at("warmup").get<int>();
    spec.iters = e.at("iters").get<int>();
    for (const auto& [pname, d] : e.at("params").items()) {
      ParamSpec p;
      p.name = pname;
      p.type = d.value("type", std::string("string"));  // transport and nic_backend: names
      if (d.contains("values"))
        for (const Json& v : d["values"]) p.values.push_back(scalar_of(v));
      if (d.contains("min")) p.min = d["min"].get<double>();
      if (d.contains("max")) p.max = d["max"].get<double>();
      p.pow2 = d.value("pow2", false);
      if (d.contains("default")) p.default_value = scalar_of(d["default"]);
      p.derived = d.value("derived", std::string());
      if (d.contains("transports")) p.transports = d["transports"].get<std::vector<std::string>>();
      spec.params.push_back(std::move(p));
    }
    out.emplace(name, std::move(spec));
  }
  return out;
}

const std::map<std::string, ExperimentSpec>& catalogue() {
  static const std::map<std::string, ExperimentSpec> c = parse_catalogue();
  return c;
}

}  // namespace

const ExperimentSpec* find_experiment_spec(const std::string& name) {
  const auto it = catalogue().find(name);
  return it == catalogue().end() ? nullptr : &it->second;
}

std::vector<std::string> declared_experiments() {
  std::vector<std::string> out;
  for (const auto& kv : catalogue()) out.push_back(kv.first);
  return out;
}

}  // namespace gicomm::bench
