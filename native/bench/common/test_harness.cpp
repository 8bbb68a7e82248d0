// The harness contract: records per point with one append, failed-point records that name the
// failure, skip of finished points on rerun, a torn last line dropped, exit codes 0/2/3.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/harness.h"
#include "common/json.h"

using namespace gicomm::bench;

static int failures = 0;
#define CHECK(c, msg)                                              \
  do {                                                             \
    if (!(c)) {                                                    \
      ++failures;                                                  \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, msg); \
    }                                                              \
  } while (0)

static std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

static int run(std::vector<std::string> args, int* calls) {
  std::vector<char*> argv;
  static std::string prog = "gicomm-bench-test";
  argv.push_back(&prog[0]);
  for (auto& a : args) argv.push_back(&a[0]);
  DriverInfo info{"gicomm-bench-test", "mini-gda", "softnic-cpu"};
  return run_driver(static_cast<int>(argv.size()), argv.data(), info, [calls](const Point& p, const Options&) {
    ++*calls;
    if (p.params.get_int("fail", 0)) throw PointFailure("QP 3: expected counter 7, last seen 5");
    if (p.params.get_int("nohw", 0)) throw HardwareMissing("no GPU visible");
    std::vector<double> v = {3, 1, 2, 4, 5, 6, 7, 8, 9, 10};
    Record r = Record::ok("issue_ns", "ns", compute_stats(v));
    r.sm_clock_mhz = 1980.0;
    return std::vector<Record>{r};
  });
}

int main() {
  char dir[] = "/tmp/gicomm-harness-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  const std::string points = std::string(dir) + "/points.jsonl", out = std::string(dir) + "/out.jsonl";
  {
    std::ofstream p(points);
    p << "{\"point_id\": \"a\", \"params\": {\"threads\": 1, \"variant\": \"gpu_fence\"}}\n"
      << "{\"point_id\": \"b\", \"params\": {\"fail\": 1}}\n"
      << "\n"
      << "{\"point_id\": \"c\", \"params\": {\"x\": 2.5, \"flag\": true}}\n";
  }
  const std::vector<std::string> base = {"--experiment", "test_exp", "--points", points, "--out", out, "--campaign",
                                         "c1", "--host", "h1", "--platform", "local", "--run-index", "0",
                                         "--provenance-id", "prov"};
  int calls = 0;
  CHECK(run(base, &calls) == 0, "first run exit code");
  CHECK(calls == 3, "every point runs once");
  auto lines = lines_of(out);
  CHECK(lines.size() == 3, "one record per point");
  const JsonValue a = parse_json(lines[0]);
  CHECK(a.find("schema_version")->integer == 1 && a.find("status")->str == "ok", "ok record");
  CHECK(a.find("stats")->find("p50")->num == 5 && a.find("stats")->find("n")->integer == 10, "stats p50/n");
  CHECK(a.find("stats")->find("p99")->num == 10 && a.find("stats")->find("min")->num == 1, "stats p99/min");
  CHECK(a.find("sm_clock_mhz")->num == 1980 && a.find("params")->find("variant")->str == "gpu_fence", "fields");
  CHECK(a.find("nic_backend")->str == "softnic-cpu" && a.find("transport")->str == "mini-gda", "defaults");
  const JsonValue b = parse_json(lines[1]);
  CHECK(b.find("status")->str == "failed" && b.find("error")->str.find("QP 3") != std::string::npos &&
            b.find("stats") == nullptr,
        "failed record names the failure");
  // Rerun: nothing left to do.
  calls = 0;
  CHECK(run(base, &calls) == 0 && calls == 0, "rerun skips finished points");
  // A torn last line is dropped and its point measured again.
  {
    std::ofstream t(out, std::ios::app);
    t << "{\"point_id\": \"d\", \"params\": {";
  }
  {
    std::ofstream p(points, std::ios::app);
    p << "{\"point_id\": \"d\", \"params\": {\"k\": 1}}\n";
  }
  calls = 0;
  CHECK(run(base, &calls) == 0 && calls == 1, "torn point rerun");
  lines = lines_of(out);
  CHECK(lines.size() == 4, "torn line replaced by a whole record");
  for (auto& l : lines) {
    try {
      parse_json(l);
    } catch (...) {
      CHECK(false, "every line parses after a torn write");
    }
  }
  // Exit codes: bad arguments 2, missing hardware 3.
  calls = 0;
  CHECK(run({"--experiment", "BAD-NAME", "--out", out}, &calls) == 2, "bad args exit 2");
  std::vector<std::string> hw = {"--experiment", "test_exp", "--param", "nohw=1", "--out", out, "--campaign", "c",
                                 "--host", "h", "--platform", "p", "--provenance-id", "x"};
  CHECK(run(hw, &calls) == 3, "missing hardware exit 3");
  // --param points get a stable id.
  Params p1, p2;
  p1.set("a", 1LL);
  p1.set("b", std::string("x"));
  p2.set("b", std::string("x"));
  p2.set("a", 1LL);
  CHECK(point_id_of("e", p1) == point_id_of("e", p2), "point id independent of param order");
  std::remove(points.c_str());
  std::remove(out.c_str());
  rmdir(dir);
  if (failures) return 1;
  std::printf("harness: ok\n");
  return 0;
}
