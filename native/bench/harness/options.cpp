#include "harness/options.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "gicomm/common/vocabulary.h"
#include "harness/json.h"

namespace gicomm::bench {

namespace {

// A --param value: a JSON number or true/false when it reads as one, else the text itself.
Scalar parse_cli_scalar(const std::string& text) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer() && !j.is_number_unsigned()) return j.get<long long>();
  if (j.is_number_unsigned())
    return j.get<unsigned long long>() <= LLONG_MAX ? Scalar(static_cast<long long>(j.get<unsigned long long>()))
                                                    : Scalar(j.get<double>());
  if (j.is_number()) return j.get<double>();
  return text;
}

}  // namespace

std::string usage(const std::string& program) {
  return "usage: " + program +
         " --experiment NAME (--points POINTS.jsonl | --param key=value ... [--transport T] [--nic-backend B]) "
         "--out OUT.jsonl --campaign C --host H --platform P --provenance-id ID [--run-index N] [--warmup W] "
         "[--iters N] [--timeout-ms T] [--nic-device D] [--nic-port N] [--gid-index N] [--topology loopback] "
         "[--rank R --world-size 2 [--rendezvous HOST[:PORT]] [--rendezvous-port P] [--peer-timeout-ms T]]\n       " +
         program + " --list";
}

int parse_options(int argc, char** argv, Options* o, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--list") {
      o->list = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      *error = "unexpected argument '" + a + "'";
      return 2;
    }
    if (i + 1 >= argc) {
      *error = "missing value for " + a;
      return 2;
    }
    const std::string v = argv[++i];
    if (!is_utf8(v)) {
      *error = a + ": the value is not valid UTF-8";
      return 2;
    }
    auto to_int = [&](int* dst, long lo) {
      char* end = nullptr;
      errno = 0;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno == ERANGE || x < lo || x > INT_MAX) {
        *error = a + " " + v + ": allowed: an integer from " + std::to_string(lo) + " to " + std::to_string(INT_MAX);
        return false;
      }
      *dst = static_cast<int>(x);
      return true;
    };
    if (a == "--experiment") {
      o->experiment = v;
    } else if (a == "--points") {
      o->points_path = v;
    } else if (a == "--out") {
      o->out_path = v;
    } else if (a == "--campaign") {
      o->campaign = v;
    } else if (a == "--host") {
      o->host = v;
    } else if (a == "--platform") {
      o->platform = v;
    } else if (a == "--provenance-id") {
      o->provenance_id = v;
    } else if (a == "--run-index") {
      if (!to_int(&o->run_index, 0)) return 2;
    } else if (a == "--warmup") {
      if (!to_int(&o->warmup, 0)) return 2;
    } else if (a == "--iters") {
      if (!to_int(&o->iters, 1)) return 2;
    } else if (a == "--timeout-ms") {
      if (!to_int(&o->timeout_ms, 1)) return 2;
    } else if (a == "--transport") {
      if (!transport_named(v)) {
        *error = "--transport " + v + ": allowed: " + names_of(kTransports);
        return 2;
      }
      o->transport = v;
    } else if (a == "--nic-backend") {
      if (!nic_backend_named(v)) {
        *error = "--nic-backend " + v + ": allowed: " + names_of(kNicBackends);
        return 2;
      }
      o->nic_backend = v;
    } else if (a == "--nic-device") {
      o->nic_device = v;
    } else if (a == "--nic-port") {
      if (!to_int(&o->nic_port, 1)) return 2;
    } else if (a == "--gid-index") {
      if (!to_int(&o->gid_index, 0)) return 2;
    } else if (a == "--topology") {
      if (v != "loopback") {
        *error = "--topology " + v + ": allowed: loopback (two ranks come from the launcher: --rank, srun, mpirun)";
        return 2;
      }
      o->topology = v;
    } else if (a == "--rank" || a == "--world-size" || a == "--rendezvous" || a == "--rendezvous-port" ||
               a == "--peer-timeout-ms") {
      o->launch_flags[a.substr(2)] = v;
    } else if (a == "--param") {
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) {
        *error = "--param wants key=value, got " + v;
        return 2;
      }
      o->cli_params.set(v.substr(0, eq), parse_cli_scalar(v.substr(eq + 1)));
    } else {
      *error = "unknown argument " + a;
      return 2;
    }
  }
  if (o->list) return 0;
  if (o->experiment.empty() || o->out_path.empty() || o->campaign.empty() || o->host.empty() ||
      o->platform.empty() || o->provenance_id.empty()) {
    *error = "required: --experiment --out --campaign --host --platform --provenance-id (and --points or --param)";
    return 2;
  }
  for (char c : o->experiment)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      *error = "--experiment " + o->experiment + ": must match ^[a-z0-9_]+$";
      return 2;
    }
  if (o->points_path.empty() && o->cli_params.items().empty() && o->transport.empty() && o->nic_backend.empty()) {
    *error = "give --points FILE or the point itself (--param key=value, --transport, --nic-backend)";
    return 2;
  }
  if (!o->points_path.empty() && (!o->cli_params.items().empty() || !o->transport.empty())) {
    *error = "--param and --transport describe a point of their own: not with --points (the file names each point)";
    return 2;
  }
  if (const ExperimentSpec* spec = find_experiment_spec(o->experiment)) {
    if (o->warmup < 0) o->warmup = spec->warmup;
    if (o->iters < 0) o->iters = spec->iters;
  }
  return 0;
}

}  // namespace gicomm::bench
