// The point loop every driver shares (native/bench/README.md is the contract): command line,
// points, resolution of each point's transport and NIC backend, the check of its parameters
// against the experiment's declarations, skip of finished points, failed-point records, the
// record append, exit codes. An experiment is one function registered under its name:
//
//   std::vector<Record> measure(Run& r) {
//     const auto qps = r.param<uint32_t>("qps");       // declared, checked, defaulted
//     ...
//     return {Record::ok("engine_wqe_rate", "Mmsg/s", compute_stats(rates))};
//   }
//   GICOMM_EXPERIMENT(engine_ceiling, measure);
//
// A driver is the harness's main (main.cpp) linked with the files of its experiments.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gicomm/common/vocabulary.h"
#include "harness/errors.h"
#include "harness/options.h"
#include "harness/params.h"
#include "harness/points.h"
#include "harness/record.h"
#include "harness/topology.h"

namespace gicomm::bench {

// One point being measured: its parameters read through the declarations, its transport and NIC
// backend resolved, the run's loop counts and timeout.
class Run {
 public:
  Run(const Point& p, const Options& o, const ExperimentSpec& e, std::optional<Transport> t,
      std::optional<NicBackend> b)
      : point(p), options(o), spec(e), transport(t), nic_backend(b) {}

  // The value of a parameter with a declared default (the point's own, else the default).
  template <class T>
  T param(const std::string& name) const {
    const std::optional<T> v = param_value<T>(spec, point.params, name);
    if (!v) param_misuse(spec.name, name, "has no default (it is derived): read it with derived()");
    return *v;
  }
  // The value of a parameter declared `derived`: the point's own, else `computed`.
  template <class T>
  T derived(const std::string& name, T computed) const {
    const std::optional<T> v = param_value<T>(spec, point.params, name);
    return v ? *v : computed;
  }
  bool has(const std::string& name) const { return point.params.has(name); }

  NicBackend nic() const;  // the resolved NIC backend (throws when the experiment derives it)
  int warmup() const { return options.warmup; }
  int iters() const { return options.iters; }
  uint64_t timeout_ns() const { return uint64_t(options.timeout_ms) * 1000000ull; }

  const Point& point;
  const Options& options;
  const ExperimentSpec& spec;
  const std::optional<Transport> transport;     // nullopt: the experiment derives it
  const std::optional<NicBackend> nic_backend;  // nullopt: the experiment derives it
  // Provenance the transport factory fills when it knows it; every record of the point inherits
  // it (record fields rdma_provider, doorbell_target, topology).
  std::string rdma_provider, doorbell_target, topology = "single-process";
  // The point's NIC path, when the transport factory made one (finished by the runner).
  std::unique_ptr<PointLink> link;
};

// The point being measured (nullptr between points): the transport factory reads the run's NIC
// options and installs the point's link through it.
Run* current_run();

using ExperimentFn = std::function<std::vector<Record>(Run&)>;

// Registers an experiment of this driver (GICOMM_EXPERIMENT does it at static initialization).
struct Registration {
  Registration(const char* name, ExperimentFn fn);
};
#define GICOMM_EXPERIMENT(name, fn) \
  static const ::gicomm::bench::Registration gicomm_experiment_registration_##name(#name, fn)

// The registered experiments' names, sorted.
std::vector<std::string> registered_experiments();

// Runs the driver: parses the command line, runs every unfinished point of the experiment named
// by --experiment, writes records. Returns the exit code: 0 every point ran (some may have
// failed), 2 bad arguments or points file, 3 hardware missing, 1 other errors.
int run_driver(int argc, char** argv);

}  // namespace gicomm::bench
