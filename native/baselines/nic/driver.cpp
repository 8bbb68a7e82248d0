// gicomm-bench-baselines: the library baselines over a NIC (experiment library_baselines;
// native/bench/README.md contract). One dispatcher, host code only, so it builds (and says why a
// point cannot run) everywhere:
//
//   nvshmem-ibgda, nvshmem-ibrc    -> gicomm-bench-baselines-nvshmem (the NVSHMEM dissection
//                                     kernels with the NIC transport chosen through NVSHMEM's env)
//   nccl-gin-gdaki, nccl-gin-proxy -> gicomm-bench-baselines-nccl-gin (NCCL device API GIN, backend
//                                     chosen through NCCL_GIN_TYPE)
//   mscclpp-port, uccl-ep, deepep-v1, fabric-lib
//                                  -> python -m gicomm.baselines.upstream_run (the upstream test
//                                     program of the prepared source, its output parsed to records)
//
// Before any of them runs, every point's library knobs are checked (a bad value is a failed record
// naming the key, the value and what is allowed) and the NIC is looked for the way the pipeline's
// probe does it (/sys/class/infiniband); a point whose hardware or harness is missing becomes a
// `skipped` record, "not measurable on this host: <why>". Points of one transport and one set of
// knob values run in one harness process (the libraries read their env once, at init).
//
// Environment (all optional): GICOMM_SYSFS_ROOT (default /sys; tests point it at a fake tree),
// GICOMM_REPO (the repository whose workflow/ holds the Python runner; default: this build's
// source tree), GICOMM_PYTHON (default: the python3 found when native/ was configured).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "harness/harness.h"
#include "nic/knobs.h"
#include "support/process.h"
#include "support/ranks.h"

#ifndef GICOMM_REPO_DIR
#define GICOMM_REPO_DIR ""
#endif
#ifndef GICOMM_PYTHON_DEFAULT
#define GICOMM_PYTHON_DEFAULT "python3"
#endif

namespace {

namespace gb = gicomm::baselines;
namespace gn = gicomm::baselines::nic;
using gicomm::bench::Point;

// The experiment's headline metrics: what a skipped or failed point is reported under.
const std::vector<std::string> kMetrics = {"issue_ns", "completion_ns", "rtt_ns", "msg_rate"};

struct Native {
  const char* transport;
  const char* program;
  bool needs_mlx5;  // GPU-initiated doorbells: an mlx5 (ConnectX) device
  const char* why_not_built;
};

const Native kNative[] = {
    {"nvshmem-ibgda", "gicomm-bench-baselines-nvshmem", true,
     "gicomm-bench-baselines-nvshmem was not built: CUDA and NVSHMEM (include/nvshmem.h, lib/libnvshmem_device.a, "
     "lib/libnvshmem_host.so[.3]) were not found when native/ was configured (pip install nvidia-nvshmem-cu13, or "
     "set GICOMM_NVSHMEM_ROOT)"},
    {"nvshmem-ibrc", "gicomm-bench-baselines-nvshmem", false,
     "gicomm-bench-baselines-nvshmem was not built: CUDA and NVSHMEM (include/nvshmem.h, lib/libnvshmem_device.a, "
     "lib/libnvshmem_host.so[.3]) were not found when native/ was configured (pip install nvidia-nvshmem-cu13, or "
     "set GICOMM_NVSHMEM_ROOT)"},
    {"nccl-gin-gdaki", "gicomm-bench-baselines-nccl-gin", true,
     "gicomm-bench-baselines-nccl-gin was not built: CUDA and NCCL >= 2.28.7 with the GIN device API "
     "(include/nccl_device/gin.h, lib/libnccl.so[.2]) were not found when native/ was configured (pip install "
     "nvidia-nccl-cu13, or set GICOMM_NCCL_ROOT)"},
    {"nccl-gin-proxy", "gicomm-bench-baselines-nccl-gin", false,
     "gicomm-bench-baselines-nccl-gin was not built: CUDA and NCCL >= 2.28.7 with the GIN device API "
     "(include/nccl_device/gin.h, lib/libnccl.so[.2]) were not found when native/ was configured (pip install "
     "nvidia-nccl-cu13, or set GICOMM_NCCL_ROOT)"},
};
const char* const kUpstream[] = {"mscclpp-port", "uccl-ep", "deepep-v1", "fabric-lib"};

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// The contract's arguments without --points/--param (the dispatcher hands each harness its own
// points file, where --param overrides are already applied).
std::vector<std::string> base_args(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--points" || a == "--param") && i + 1 < argc) {
      ++i;
      continue;
    }
    out.push_back(a);
  }
  return out;
}

std::string point_line(const Point& p) { return gicomm::bench::point_to_json(p) + "\n"; }

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::string p_transport(const Point& p) { return p.transport; }

void record_all(const gb::RankContext& ctx, const std::vector<Point>& points, const std::string& status,
                const std::string& why) {
  const auto finished = gicomm::bench::finished_points(ctx.options.out_path);
  for (const Point& p : points) {
    if (std::find(finished.begin(), finished.end(), p.point_id) != finished.end()) continue;
    gb::write_point(ctx, p, gb::status_records(kMetrics, status, why));
    std::fprintf(stderr, "[gicomm] gicomm-bench-baselines point id=%s %s -> %s: %s\n", p.point_id.c_str(),
                 p.params.to_text().c_str(), status.c_str(), why.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  gb::RankContext ctx;
  ctx.info = gicomm::bench::DriverInfo{"gicomm-bench-baselines", "", "mlx5"};
  std::string error;
  if (gicomm::bench::parse_options(argc, argv, &ctx.options, &error) != 0) {
    std::fprintf(stderr, "gicomm-bench-baselines: %s\n", error.c_str());
    return 2;
  }
  std::vector<Point> all;
  try {
    all = gicomm::bench::load_points(ctx.options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gicomm-bench-baselines: %s\n", e.what());
    return 2;
  }
  std::vector<std::string> known;
  for (const Native& n : kNative) known.push_back(n.transport);
  for (const char* t : kUpstream) known.push_back(t);

  // Points nobody serves.
  for (const Point& p : all) {
    const std::string t = p_transport(p);
    if (std::find(known.begin(), known.end(), t) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : " | ") + k;
    record_all(ctx, {p}, "failed", "unknown transport '" + t + "' (" + list + ")");
  }

  const gn::NicScan nics = gn::scan_nics(env_or("GICOMM_SYSFS_ROOT", "/sys"));
  const std::string dir = gb::self_dir();
  std::string tmpdir;
  {
    const char* t = std::getenv("TMPDIR");
    std::string pattern = std::string(t && *t ? t : "/tmp") + "/gicomm-baselines-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) {
      std::fprintf(stderr, "gicomm-bench-baselines: mkdtemp %s: %s\n", pattern.c_str(), std::strerror(errno));
      return 1;
    }
    tmpdir = buf.data();
  }

  // ---- the native harnesses: NVSHMEM IBGDA/IBRC and NCCL GIN ----------------------------------------
  int group_no = 0;
  for (const Native& n : kNative) {
    const auto todo = gb::select_points(all, {n.transport}, ctx.options.out_path);
    if (todo.empty()) continue;
    // Group by the env the knobs give; a bad knob fails its point here.
    std::map<std::map<std::string, std::string>, std::vector<Point>> groups;
    for (const Point& p : todo) {
      std::map<std::string, std::string> env;
      const std::string bad = gn::knob_env(p.params, n.transport, &env);
      if (!bad.empty()) {
        record_all(ctx, {p}, "failed", bad);
        continue;
      }
      groups[env].push_back(p);
    }
    if (groups.empty()) continue;
    std::string missing = gn::nic_unmet(nics, n.needs_mlx5, n.transport);
    const std::string program = dir + "/" + n.program;
    if (missing.empty() && access(program.c_str(), X_OK) != 0) missing = n.why_not_built;
    if (!missing.empty()) {
      for (const auto& g : groups) record_all(ctx, g.second, "skipped", "not measurable on this host: " + missing);
      continue;
    }
    for (const auto& g : groups) {
      const std::string points_file = tmpdir + "/group" + std::to_string(group_no++) + ".points.jsonl";
      std::string text;
      for (const Point& p : g.second) text += point_line(p);
      try {
        write_file(points_file, text);
      } catch (const std::exception& e) {
        record_all(ctx, g.second, "failed", e.what());
        continue;
      }
      std::vector<std::string> args = {program};
      for (const auto& a : base_args(argc, argv)) args.push_back(a);
      args.push_back("--points");
      args.push_back(points_file);
      std::string env_text;
      for (const auto& kv : g.first) env_text += " " + kv.first + "=" + kv.second;
      std::fprintf(stderr, "[gicomm] gicomm-bench-baselines: %s, %zu point(s)%s%s\n", n.program, g.second.size(),
                   env_text.empty() ? "" : ", env:", env_text.c_str());
      const std::string ended = gb::run_child(args, g.first, 180.0 + 60.0 * static_cast<double>(g.second.size()));
      ::unlink(points_file.c_str());
      record_all(ctx, g.second, "failed",
                 ended.empty() ? std::string(n.program) + " ended without recording this point"
                               : std::string(n.program) + " " + ended);
    }
  }

  // ---- the upstream programs (MSCCL++, UCCL-EP, DeepEP, fabric-lib) ---------------------------------
  std::vector<std::string> upstream(std::begin(kUpstream), std::end(kUpstream));
  const auto todo = gb::select_points(all, upstream, ctx.options.out_path);
  if (!todo.empty()) {
    const std::string repo = env_or("GICOMM_REPO", GICOMM_REPO_DIR);
    const std::string python = env_or("GICOMM_PYTHON", GICOMM_PYTHON_DEFAULT);
    std::string points_file = tmpdir + "/upstream.points.jsonl";
    std::string text;
    for (const Point& p : todo) text += point_line(p);
    try {
      write_file(points_file, text);
    } catch (const std::exception& e) {
      record_all(ctx, todo, "failed", e.what());
      points_file.clear();
    }
    if (!points_file.empty()) {
      std::vector<std::string> args = {python, "-m", "gicomm.baselines.upstream_run"};
      for (const auto& a : base_args(argc, argv)) args.push_back(a);
      args.push_back("--points");
      args.push_back(points_file);
      const std::string old = env_or("PYTHONPATH", "");
      std::map<std::string, std::string> env = {
          {"PYTHONPATH", repo + "/workflow" + (old.empty() ? "" : ":" + old)}, {"GICOMM_REPO", repo}};
      // Each upstream program has its own timeout inside the runner; this only catches a wedge.
      const std::string ended = gb::run_child(args, env, 300.0 + 900.0 * static_cast<double>(todo.size()), true,
                                          tmpdir + "/upstream.stderr");
      ::unlink(points_file.c_str());
      if (ended.rfind("exited with code 127", 0) == 0)
        record_all(ctx, todo, "skipped",
                   "not measurable on this host: the upstream runner (" + python +
                       " -m gicomm.baselines.upstream_run) could not be started");
      else
        record_all(ctx, todo, "failed",
                   ended.empty() ? "the upstream runner ended without recording this point"
                                 : "the upstream runner (" + python + " -m gicomm.baselines.upstream_run) " + ended);
    }
  }
  if (!tmpdir.empty()) ::rmdir(tmpdir.c_str());
  return 0;
}
