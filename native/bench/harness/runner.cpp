#include "harness/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>

#include "harness/engine_ceiling.h"
#include "harness/json.h"
#include "harness/topology.h"

namespace gicomm::bench {

namespace {

std::map<std::string, ExperimentFn>& registry() {
  static std::map<std::string, ExperimentFn> r;
  return r;
}

std::string program_of(const char* argv0) {
  const std::string s = argv0 ? argv0 : "gicomm-bench";
  const size_t slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The point's transport and NIC backend: its own names, else the declared defaults, else (NIC
// backend) the transport's default from the vocabulary; nullopt where the experiment derives them.
// "" or why the point cannot run.
std::string resolve(const ExperimentSpec& e, const Point& p, std::optional<Transport>* t, std::optional<NicBackend>* b) {
  const ParamSpec* ts = e.find("transport");
  const ParamSpec* bs = e.find("nic_backend");
  const std::string tn = !p.transport.empty() ? p.transport
                         : ts && ts->default_value ? std::get<std::string>(*ts->default_value)
                                                   : "";
  if (!tn.empty()) {
    *t = transport_named(tn);
    if (!*t) return "transport '" + tn + "' is not a transport; allowed: " + names_of(kTransports);
    if (ts && !ts->problem(tn).empty()) return ts->problem(tn);
  }
  std::string bn = !p.nic_backend.empty() ? p.nic_backend
                   : bs && bs->default_value ? std::get<std::string>(*bs->default_value)
                                             : "";
  if (bn.empty() && *t && !(bs && !bs->derived.empty())) bn = name_of(default_backend(**t));
  if (!bn.empty()) {
    *b = nic_backend_named(bn);
    if (!*b) return "nic_backend '" + bn + "' is not a NIC backend; allowed: " + names_of(kNicBackends);
    if (bs && !bs->problem(bn).empty()) return bs->problem(bn);
  }
  return "";
}

// Prints the experiments this driver measures; exit 1 when they and the declarations disagree (an
// experiment whose YAML names another driver, or one naming this driver that it does not measure).
int list_experiments(const std::string& program) {
  int rc = 0;
  for (const auto& name : registered_experiments()) {
    const ExperimentSpec* spec = find_experiment_spec(name);
    std::printf("%s\n", name.c_str());
    if (!spec || spec->driver != program) {
      std::fprintf(stderr, "%s: measures %s, whose YAML %s\n", program.c_str(), name.c_str(),
                   spec ? ("names driver " + spec->driver).c_str() : "does not exist");
      rc = 1;
    }
  }
  for (const std::string& name : declared_experiments())
    if (find_experiment_spec(name)->driver == program && !registry().count(name)) {
      std::fprintf(stderr, "%s: experiment %s names this driver, which does not measure it\n", program.c_str(),
                   name.c_str());
      rc = 1;
    }
  return rc;
}

Run*& current() {
  static Run* r = nullptr;
  return r;
}

// Rank 1 of a two-rank run: serves each point rank 0 measures; writes no records.
int serve_points(const std::string& program, const Options& o, Launcher& peer, const std::vector<std::string>& ids) {
  size_t index = 0;
  for (const std::string& id : ids) {
    ++index;
    try {
      peer.begin_point(id);
      const std::string line = peer.serve_point(o);
      std::fprintf(stderr, "[gicomm] rank %d served point %zu/%zu id=%s: %s\n", peer.rank(), index, ids.size(),
                   id.c_str(), line.c_str());
    } catch (const PeerStopped& e) {
      std::fprintf(stderr, "%s: rank %d, point %s: %s\n", program.c_str(), peer.rank(), id.c_str(), e.what());
      return 3;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: rank %d, point %s: %s\n", program.c_str(), peer.rank(), id.c_str(), e.what());
      return 1;
    }
  }
  return 0;
}

}  // namespace

Run* current_run() { return current(); }

Registration::Registration(const char* name, ExperimentFn fn) { registry()[name] = std::move(fn); }

std::vector<std::string> registered_experiments() {
  std::vector<std::string> out;
  for (const auto& kv : registry()) out.push_back(kv.first);
  return out;
}

NicBackend Run::nic() const {
  if (!nic_backend) param_misuse(spec.name, "nic_backend", "is derived by the experiment: it has no resolved value");
  return *nic_backend;
}

int run_driver(int argc, char** argv) {
  const std::string program = program_of(argc > 0 ? argv[0] : nullptr);
  Options o;
  std::string error;
  if (parse_options(argc, argv, &o, &error) != 0) {
    std::fprintf(stderr, "%s: %s\n%s\n", program.c_str(), error.c_str(), usage(program).c_str());
    return 2;
  }
  if (o.list) return list_experiments(program);
  const auto fn = registry().find(o.experiment);
  if (fn == registry().end()) {
    std::fprintf(stderr, "%s: does not measure experiment %s; it measures: %s\n", program.c_str(), o.experiment.c_str(),
                 join(registered_experiments()).c_str());
    return 2;
  }
  const ExperimentSpec* spec = find_experiment_spec(o.experiment);
  if (!spec) {
    std::fprintf(stderr, "%s: experiment %s has no declaration compiled in (config/experiments/%s.yaml): rebuild\n",
                 program.c_str(), o.experiment.c_str(), o.experiment.c_str());
    return 2;
  }
  if (LauncherFactory make = launcher_factory()) {
    std::string why;
    std::unique_ptr<Launcher> l = make(o.launch_flags, &why);
    if (!why.empty()) {
      std::fprintf(stderr, "%s: %s\n", program.c_str(), why.c_str());
      return 2;
    }
    install_launcher(std::move(l));
  } else if (!o.launch_flags.empty()) {
    std::fprintf(stderr, "%s: --%s: this driver runs in one process (no two-rank launcher is linked in)\n",
                 program.c_str(), o.launch_flags.begin()->first.c_str());
    return 2;
  }
  std::vector<Point> points;
  std::set<std::string> done;
  try {
    points = load_points(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return 2;
  }
  try {
    for (auto& id : finished_points(o.out_path)) done.insert(id);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return 1;
  }
  const DriverInfo info{program, "", ""};
  Launcher* const peer = launcher();
  std::vector<const Point*> todo;
  for (const Point& p : points)
    if (!done.count(p.point_id)) todo.push_back(&p);
  if (peer) {
    // Rank 0 says which points it will measure (what its --out has not recorded yet); rank 1,
    // which writes no records, serves exactly those.
    std::vector<std::string> ids;
    if (peer->rank() == 0) {
      for (const Point* p : todo) ids.push_back(p->point_id);
    } else {
      for (const Point& p : points) ids.push_back(p.point_id);
    }
    try {
      ids = peer->begin_run(o.experiment, o.run_index, ids);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
      return 1;
    }
    if (peer->rank() != 0) return serve_points(program, o, *peer, ids);
  }
  // The software NIC's ceiling of each distinct WQE shape of the points to measure, once, before a
  // transport holds an engine (harness/engine_ceiling.h); rank 1 measures nothing.
  for (const Point* given : todo) {
    std::optional<Transport> transport;
    std::optional<NicBackend> backend;
    if (!resolve(*spec, *given, &transport, &backend).empty()) continue;
    prepare_engine_ceiling(Run(*given, o, *spec, transport, backend));
  }
  size_t index = points.size() - todo.size();
  for (const Point& given : points)
    if (done.count(given.point_id))
      std::fprintf(stderr, "[gicomm] point id=%s already recorded, skipped\n", given.point_id.c_str());
  for (const Point* todo_point : todo) {
    const Point& given = *todo_point;
    ++index;
    const auto t0 = std::chrono::steady_clock::now();
    if (peer) {
      try {
        peer->begin_point(given.point_id);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: point %s: %s\n", program.c_str(), given.point_id.c_str(), e.what());
        return 1;
      }
    }
    std::optional<Transport> transport;
    std::optional<NicBackend> backend;
    std::string bad = resolve(*spec, given, &transport, &backend);
    if (bad.empty() && !o.nic_backend.empty() && (!backend || o.nic_backend != name_of(*backend)))
      bad = "--nic-backend " + o.nic_backend + " is not this point's NIC backend (" +
            (backend ? name_of(*backend) : "derived by the experiment") + "): a points file names each point's own";
    if (bad.empty()) bad = join(point_problems(*spec, given.params, transport ? name_of(*transport) : ""));
    // Records carry the resolved transport and backend (the experiment may name what it measured).
    Point p = given;
    if (transport) p.transport = name_of(*transport);
    if (backend) p.nic_backend = name_of(*backend);
    Run run(p, o, *spec, transport, backend);
    // Provenance every record of the point carries (schema version 2): the factory sets the
    // topology of a NIC path (two-rank or loopback); a point without one is single-process, even
    // in a two-rank run (its peer only waits).
    std::vector<Record> records;
    std::string summary, failure;
    int missing_rc = 0;
    // A cpu engine's ceiling measured again now, outside the point's load window (engine_ceiling.h).
    if (bad.empty()) refresh_engine_ceiling(run);
    const HostLoadWindow load_window;  // every record of the point carries the host's load over it
    current() = &run;
    try {
      if (!bad.empty()) throw PointFailure("bad parameter: " + bad);
      records = fn->second(run);
      attach_engine_ceiling(run, records);
    } catch (const HardwareMissing& e) {
      std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
      failure = e.what();
      missing_rc = 3;
    } catch (const std::exception& e) {
      records.assign(1, Record::failed("point", "none", e.what()));
      failure = e.what();
    }
    current() = nullptr;
    const std::optional<HostLoad> point_load = load_window.finish();
    for (Record& r : records) r.host_load = point_load;
    if (missing_rc && peer) peer->stop_after_point();
    // The NIC path is finished (the peer released, counters checked) even when the point failed.
    try {
      if (run.link) {
        run.link->finish(&records, failure);
      } else if (peer) {
        peer->end_point(failure);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: point %s: %s\n", program.c_str(), p.point_id.c_str(), e.what());
      return 1;
    }
    run.link.reset();
    if (missing_rc) return missing_rc;
    for (const Record& r : records) {
      if (r.stats && summary.empty()) summary = r.metric + " p50=" + json_number(r.stats->p50) + " " + r.unit;
      if (r.status != "ok" && summary.empty()) summary = "FAILED: " + r.error;
    }
    std::string lines;
    try {
      for (Record& r : records) {
        if (r.rdma_provider.empty()) r.rdma_provider = run.rdma_provider;
        if (r.doorbell_target.empty()) r.doorbell_target = run.doorbell_target;
        if (r.topology.empty()) r.topology = run.topology;
        lines += record_to_json(r, o, info, p) + "\n";
      }
      if (!lines.empty()) append_lines_atomically(o.out_path, lines);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: point %s: %s\n", program.c_str(), p.point_id.c_str(), e.what());
      return 1;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "[gicomm] point %zu/%zu id=%s %s -> %s (%.1f s)\n", index, points.size(), p.point_id.c_str(),
                 p.params.to_text().c_str(), summary.c_str(), secs);
  }
  return 0;
}

}  // namespace gicomm::bench
