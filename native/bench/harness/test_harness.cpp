// The harness contract (native/bench/README.md): records per point with one append, failed-point
// records that name the failure, skip of finished points on rerun, a torn last line dropped, exit
// codes 0/2/3; points in the contract's shape (transport and NIC backend beside the params, which
// records never echo); every parameter checked against the experiment's declaration (unknown names,
// values, hostile numbers); UTF-8 text round-trips and anything else is refused with the key.
//
// Two stand-in experiments registered under declared names (their declarations are the real
// ones, compiled in from config/experiments): timer_selfcheck (injected_ns 100 measures, 200 fails
// the point, 300 finds the hardware missing) and engine_ceiling (reads its parameters typed).
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"
#include "harness/harness.h"
#include "harness/topology.h"

using namespace gicomm::bench;

namespace {

int calls = 0;
int seen_rank = -1;  // the launcher's rank as the experiment saw it

std::vector<Record> fake_timer(Run& r) {
  ++calls;
  seen_rank = launcher() ? launcher()->rank() : -1;
  const long long ns = r.param<long long>("injected_ns");
  if (ns == 200) throw PointFailure("QP 3: expected counter 7, last seen 5");
  if (ns == 300) throw HardwareMissing("no GPU visible");
  Record rec = Record::ok("issue_ns", "ns", compute_stats({3, 1, 2, 4, 5, 6, 7, 8, 9, 10}));
  rec.sm_clock_mhz = 1980.0;
  return {rec};
}
GICOMM_EXPERIMENT(timer_selfcheck, fake_timer);

std::vector<Record> fake_engine(Run& r) {
  ++calls;
  Record rec = Record::scalar("engine_wqe_rate", "Mmsg/s", r.derived<uint16_t>("qps", 8));
  rec.nic_backend = r.param<std::string>("engine") == "gpu" ? "softnic-gpu" : "softnic-cpu";
  return {rec};
}
GICOMM_EXPERIMENT(engine_ceiling, fake_engine);

std::string dir;

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

void write(const std::string& path, const std::string& text, bool append = false) {
  std::ofstream f(path, append ? std::ios::app : std::ios::trunc);
  f << text;
}

std::vector<std::string> common(const std::string& experiment, const std::string& out) {
  return {"--experiment", experiment, "--out", out, "--campaign", "c1", "--host", "h1", "--platform", "local",
          "--run-index", "0", "--provenance-id", "prov"};
}

int run(std::vector<std::string> args, std::string* err = nullptr) {
  std::vector<char*> argv;
  static std::string prog = "gicomm-bench-test";
  argv.push_back(&prog[0]);
  for (auto& a : args) argv.push_back(&a[0]);
  // Capture stderr: the one-line reasons are part of the contract.
  const std::string err_path = dir + "/stderr.txt";
  std::fflush(stderr);
  const int saved = dup(2);
  FILE* f = std::freopen(err_path.c_str(), "w", stderr);
  const int rc = run_driver(static_cast<int>(argv.size()), argv.data());
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  (void)f;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (err) *err = ss.str();
  return rc;
}

Json only_record(const std::string& out) {
  const auto lines = lines_of(out);
  REQUIRE(lines.size() == 1, "expected one record, got %zu", lines.size());
  return Json::parse(lines[0]);
}

void contract() {
  const std::string points = dir + "/points.jsonl", out = dir + "/out.jsonl";
  write(points,
        "{\"point_id\": \"a\", \"transport\": \"none\", \"nic_backend\": \"none\", \"params\": {\"injected_ns\": 100}}\n"
        "{\"point_id\": \"b\", \"params\": {\"injected_ns\": 200}}\n"
        "\n"
        "{\"point_id\": \"c\", \"params\": {\"injected_ns\": 1000}}\n");
  auto base = common("timer_selfcheck", out);
  base.insert(base.end(), {"--points", points});
  calls = 0;
  CHECK(run(base) == 0, "first run exit code");
  CHECK(calls == 3, "every point runs once");
  auto lines = lines_of(out);
  REQUIRE(lines.size() == 3, "one record per point");
  const Json a = Json::parse(lines[0]);
  CHECK(a["schema_version"] == kRecordSchemaVersion && a["status"] == "ok");
  CHECK(a["stats"]["p50"] == 5 && a["stats"]["n"] == 10 && a["stats"]["p99"] == 10 && a["stats"]["min"] == 1);
  CHECK(a["sm_clock_mhz"] == 1980 && a["params"]["injected_ns"] == 100);
  // The transport and NIC backend beside the params, never in them; declared defaults apply.
  CHECK(a["transport"] == "none" && a["nic_backend"] == "none" && !a["params"].contains("transport"));
  // The host's load over the point's window, on every record the runner writes (failed ones too).
  CHECK(a.contains("host_load") && a["host_load"]["ncpu"].get<int>() >= 1, "%s", lines[0].c_str());
  const Json b = Json::parse(lines[1]);
  CHECK(b["status"] == "failed" && b["error"].get<std::string>().find("QP 3") != std::string::npos &&
            !b.contains("stats"),
        "failed record names the failure");
  CHECK(b["transport"] == "none", "a failed point still names the transport it asked for");
  CHECK(b.contains("host_load"), "a failed point's record carries the host load too");
  // Rerun: nothing left to do.
  calls = 0;
  CHECK(run(base) == 0 && calls == 0, "rerun skips finished points");
  // A torn last line is dropped and its point measured again.
  write(out, "{\"point_id\": \"d\", \"params\": {", true);
  write(points, "{\"point_id\": \"d\", \"params\": {\"injected_ns\": 500}}\n", true);
  calls = 0;
  CHECK(run(base) == 0 && calls == 1, "torn point rerun");
  lines = lines_of(out);
  CHECK(lines.size() == 4, "torn line replaced by a whole record");
  for (auto& l : lines) CHECK(!Json::parse(l, nullptr, false).is_discarded(), "every line parses after a torn write");
  // Exit codes: bad arguments 2, missing hardware 3 (one line), an experiment this driver lacks 2.
  std::string err;
  CHECK(run({"--experiment", "BAD-NAME", "--out", out}) == 2, "bad args exit 2");
  auto hw = common("timer_selfcheck", dir + "/hw.jsonl");
  hw.insert(hw.end(), {"--param", "injected_ns=300"});
  CHECK(run(hw, &err) == 3 && err == "gicomm-bench-test: no GPU visible\n", "missing hardware: %s", err.c_str());
  auto other = common("gda_one_op", out);
  other.insert(other.end(), {"--param", "payload=inline"});
  CHECK(run(other, &err) == 2 && err.find("it measures: engine_ceiling, timer_selfcheck") !=
                                                        std::string::npos,
        "unknown experiment: %s", err.c_str());
  // --list names what the driver measures, and checks it against the declarations: this test's
  // stand-ins are declared for other drivers.
  CHECK(run({"--list"}, &err) == 1 &&
            err.find("gicomm-bench-test: measures engine_ceiling, whose YAML names driver gicomm-bench-engine") !=
                std::string::npos,
        "%s", err.c_str());
}

void shapes() {
  const std::string points = dir + "/shapes.jsonl", out = dir + "/shapes.out.jsonl";
  // The first points files carried transport and nic_backend inside params: read the same way,
  // and the record still does not echo them.
  write(points, "{\"point_id\": \"old\", \"params\": {\"transport\": \"none\", \"nic_backend\": \"none\", \"injected_ns\": 100}}\n");
  auto args = common("timer_selfcheck", out);
  args.insert(args.end(), {"--points", points});
  CHECK(run(args) == 0);
  const Json r = only_record(out);
  CHECK(r["transport"] == "none" && r["params"] == Json::parse("{\"injected_ns\": 100}"), "%s", r.dump().c_str());
  // Both places at once is ambiguous: refused with the line.
  write(points, "{\"point_id\": \"x\", \"transport\": \"none\", \"params\": {\"transport\": \"none\"}}\n");
  std::string err;
  CHECK(run(args, &err) == 2 && err.find("shapes.jsonl:1: 'transport' given twice") != std::string::npos, "%s",
        err.c_str());
  // --nic-backend may only confirm what the point says (one source of truth).
  std::remove(out.c_str());
  write(points, "{\"point_id\": \"y\", \"transport\": \"none\", \"params\": {\"injected_ns\": 100}}\n");
  auto flagged = args;
  flagged.insert(flagged.end(), {"--nic-backend", "softnic-cpu"});
  CHECK(run(flagged) == 0);
  const Json f = only_record(out);
  CHECK(f["status"] == "failed" && f["error"].get<std::string>().find("--nic-backend softnic-cpu is not this point's") !=
                                       std::string::npos,
        "%s", f.dump().c_str());
}

// A point whose parameter is bad is a failed record naming the parameter, the value and what is
// allowed; the driver goes on with the next point.
std::string bad_point(const std::string& experiment, const std::string& line) {
  const std::string points = dir + "/bad.jsonl", out = dir + "/bad.out.jsonl";
  std::remove(out.c_str());
  write(points, line + "\n");
  auto args = common(experiment, out);
  args.insert(args.end(), {"--points", points});
  calls = 0;
  CHECK(run(args) == 0, "a bad point is a failed record, exit 0");
  const Json r = only_record(out);
  CHECK(r["status"] == "failed" && calls == 0, "refused before measuring: %s", r.dump().c_str());
  return r["error"].get<std::string>();
}

void declarations() {
  auto has = [](const std::string& text, const char* want) {
    CHECK(text.find(want) != std::string::npos, "'%s' not in '%s'", want, text.c_str());
  };
  // Unknown names and values, with what is allowed.
  has(bad_point("timer_selfcheck", R"({"point_id": "p", "params": {"injected": 100}})"),
      "bad parameter: unknown parameter 'injected'; allowed: injected_ns, nic_backend, transport");
  has(bad_point("engine_ceiling", R"({"point_id": "p", "params": {"engine": "cpu", "payload": "inlin"}})"),
      "parameter 'payload': value 'inlin' is not allowed; allowed: 'inline', 'pointer'");
  // Hostile numbers: too big for the driver's integers, fractional, boolean, text (never "stoll").
  has(bad_point("engine_ceiling", R"({"point_id": "p", "params": {"qps": 4294967312}})"),
      "parameter 'qps': value 4294967312 is out of range; allowed: an integer from 1 to 4096");
  has(bad_point("engine_ceiling", R"({"point_id": "p", "params": {"depth": 4294968320}})"),
      "parameter 'depth': value 4294968320 is out of range");
  has(bad_point("engine_ceiling", R"({"point_id": "p", "params": {"qps": 16.7}})"),
      "parameter 'qps': value 16.7 has the wrong type; allowed: an integer from 1 to 4096");
  has(bad_point("engine_ceiling", R"({"point_id": "p", "params": {"qps": true}})"),
      "parameter 'qps': value true has the wrong type");
  has(bad_point("engine_ceiling", R"({"point_id": "p", "params": {"qps": "16"}})"),
      "parameter 'qps': value '16' has the wrong type");
  has(bad_point("engine_ceiling", R"({"point_id": "p", "params": {"qps": 99999999999999999999999}})"),
      "is out of range; allowed: an integer from 1 to 4096");
  has(bad_point("engine_ceiling", R"({"point_id": "p", "nic_backend": "rdma", "params": {}})"),
      "nic_backend 'rdma' is not a NIC backend; allowed: softnic-cpu");
  has(bad_point("engine_ceiling", R"({"point_id": "p", "transport": "mini-gda", "params": {}})"),
      "parameter 'transport': value 'mini-gda' is not allowed; allowed: 'softnic'");
  // A hand point (--param): typed reads, and the record names the backend the experiment derives.
  const std::string out = dir + "/fit.jsonl";
  auto args = common("engine_ceiling", out);
  args.insert(args.end(), {"--param", "qps=4000", "--param", "engine=gpu"});
  CHECK(run(args) == 0);
  const Json r = only_record(out);
  CHECK(r["status"] == "ok" && r["stats"]["p50"] == 4000 && r["nic_backend"] == "softnic-gpu" &&
            r["transport"] == "softnic",
        "%s", r.dump().c_str());
  // Declared defaults fill what a point does not name, and warmup/iters come from the YAML.
  Options o;
  std::string error;
  std::vector<std::string> a = common("engine_ceiling", out);
  a.insert(a.begin(), "prog");
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(&s[0]);
  argv.push_back(const_cast<char*>("--param"));
  argv.push_back(const_cast<char*>("engine=cpu"));
  CHECK(parse_options(static_cast<int>(argv.size()), argv.data(), &o, &error) == 0, "%s", error.c_str());
  const ExperimentSpec* spec = find_experiment_spec("engine_ceiling");
  REQUIRE(spec != nullptr);
  CHECK(o.warmup == spec->warmup && o.iters == spec->iters && spec->iters == 5, "iters %d", o.iters);
  Params p;
  CHECK(param_value<std::string>(*spec, p, "payload") == std::string("inline"));
  CHECK(!param_value<int>(*spec, p, "qps").has_value(), "qps is derived: no default");
  p.set("qps", 70000LL);
  bool threw = false;
  try {
    (void)param_value<uint16_t>(*spec, p, "qps");
  } catch (const PointFailure& e) {
    threw = std::string(e.what()) == "parameter 'qps': value 70000 is not the driver's unsigned integer";
  }
  CHECK(threw, "a value beyond the type read is refused by name");
}

void unicode() {
  // Valid UTF-8 round-trips: the host and an error that quotes a value.
  const std::string out = dir + "/utf8.jsonl", points = dir + "/utf8.points.jsonl";
  const std::string host = "h\xc3\xa9-\xf0\x9f\x9a\x80";  // hé-🚀
  auto args = common("timer_selfcheck", out);
  args[7] = host;
  args.insert(args.end(), {"--param", "injected_ns=100"});
  CHECK(run(args) == 0);
  CHECK(only_record(out)["host"] == host, "host round-trips");
  std::remove(out.c_str());
  const std::string rocket = "\xf0\x9f\x9a\x80";
  write(points, "{\"point_id\": \"u\", \"params\": {\"engine\": \"\\ud83d\\ude80\"}}\n");
  auto e = common("engine_ceiling", out);
  e.insert(e.end(), {"--points", points});
  CHECK(run(e) == 0);
  const auto lines = lines_of(out);
  REQUIRE(lines.size() == 1);
  CHECK(is_utf8(lines[0]), "the record is UTF-8");
  CHECK(Json::parse(lines[0])["error"].get<std::string>().find("value '" + rocket + "' is not allowed") !=
            std::string::npos,
        "%s", lines[0].c_str());
  // Text that is not UTF-8 is refused with the line and the key, and nothing is written.
  std::remove(out.c_str());
  write(points, "{\"point_id\": \"u\", \"params\": {\"engine\": \"cpu\", \"label\": \"\xf0\x9f\x9a\"}}\n");
  std::string err;
  CHECK(run(e, &err) == 2, "refused");
  CHECK(err.find("utf8.points.jsonl:1: text that is not valid UTF-8 in the value of 'label'") != std::string::npos,
        "%s", err.c_str());
  CHECK(lines_of(out).empty(), "nothing written");
  args[7] = "h\xff";
  CHECK(run(args, &err) == 2 && err.find("--host: the value is not valid UTF-8") != std::string::npos, "%s",
        err.c_str());
}

// The seam of a two-rank launcher: without one linked in, launch flags are refused; with one, it
// is made once from the flags; rank 0 measures and writes records, rank 1 serves each point rank 0
// announced and writes none.
struct FakeLauncher : Launcher {
  int r;
  explicit FakeLauncher(int rank) : r(rank) {}
  int rank() const override { return r; }
  int world() const override { return 2; }
  std::string peer_name() const override { return "rank " + std::to_string(1 - r); }
  std::vector<std::string> begin_run(const std::string&, int, const std::vector<std::string>& points) override {
    return points;
  }
  void begin_point(const std::string&) override {}
  void end_point(const std::string&) override {}
  void stop_after_point() override {}
  std::string serve_point(const Options&) override {
    ++served;
    return "served";
  }
  static inline int served = 0;
};

void launcher_seam() {
  const std::string out = dir + "/ranks.jsonl";
  auto args = common("timer_selfcheck", out);
  args.insert(args.end(), {"--param", "injected_ns=100", "--rank", "0", "--world-size", "2"});
  std::string err;
  CHECK(run(args, &err) == 2 && err.find("--rank: this driver runs in one process") != std::string::npos, "%s",
        err.c_str());
  register_launcher_factory([](const std::map<std::string, std::string>& flags, std::string* error) {
    if (!flags.count("rank")) {
      *error = "no --rank";
      return std::unique_ptr<Launcher>();
    }
    return std::unique_ptr<Launcher>(new FakeLauncher(std::stoi(flags.at("rank"))));
  });
  CHECK(run(args, &err) == 0 && seen_rank == 0 && lines_of(out).size() == 1, "rank %d: %s", seen_rank, err.c_str());
  const std::string out1 = dir + "/rank1.jsonl";
  auto args1 = common("timer_selfcheck", out1);
  args1.insert(args1.end(), {"--param", "injected_ns=100", "--rank", "1", "--world-size", "2"});
  const int before = calls;
  CHECK(run(args1, &err) == 0 && calls == before && FakeLauncher::served == 1 && lines_of(out1).empty(),
        "rank 1 measured (%d calls) or served %d points: %s", calls - before, FakeLauncher::served, err.c_str());
  args.resize(args.size() - 4);
  CHECK(run(args, &err) == 2 && err.find("no --rank") != std::string::npos, "%s", err.c_str());
  register_launcher_factory(nullptr);
  install_launcher(nullptr);
}

}  // namespace

int main() {
  char tmpl[] = "/tmp/gicomm-harness-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  dir = tmpl;
  contract();
  shapes();
  declarations();
  unicode();
  launcher_seam();
  std::string cmd = "rm -rf " + dir;
  if (std::system(cmd.c_str()) != 0) return 1;
  return check_result("harness");
}
