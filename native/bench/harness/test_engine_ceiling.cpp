// The engine ceiling's host side (harness/engine_shape.h, harness/engine_ceiling.h): the WQE
// shape each rate experiment's point maps to, from the real declarations (config/experiments,
// compiled in), and the runner's hook: one measurement per distinct shape per run, before the
// first point, and a cpu engine shape's again before each of its points (the best so far kept); every ok rate record of a softnic point carries engine_ceiling (the median round,
// Mmsg/s) and engine_ceiling_shape; other metrics, other backends and failed measurements carry
// nothing. A stand-in measurer (registered for both engine kinds) counts its calls; a stand-in
// gda_msg_rate returns a msg_rate and an issue_ns record.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "check.h"
#include "harness/engine_ceiling.h"
#include "harness/harness.h"

using namespace gicomm;
using namespace gicomm::bench;

namespace {

// ---- the shape mapping ---------------------------------------------------------------------------
Params params(const std::vector<std::pair<std::string, Scalar>>& kv) {
  Params p;
  for (const auto& [k, v] : kv) p.set(k, v);
  return p;
}

std::optional<EngineShape> shape(const std::string& experiment, const Params& p, std::optional<Transport> t,
                                 NicBackend b) {
  const ExperimentSpec* e = find_experiment_spec(experiment);
  REQUIRE(e != nullptr, "no declaration of %s compiled in", experiment.c_str());
  return engine_shape_of(*e, p, t, b);
}

std::string text(const std::optional<EngineShape>& s) { return s ? s->text() : "none"; }

void shapes() {
  const auto gda = Transport::mini_gda, proxy = Transport::mini_proxy;
  // gda_msg_rate: 8-byte writes, the point's payload, its own QPs (not a power of two below them).
  CHECK(text(shape("gda_msg_rate", {}, gda, NicBackend::softnic_gpu)) == "inline 8 B, 1 QP", "defaults");
  CHECK(text(shape("gda_msg_rate", params({{"qps", 132LL}, {"payload", std::string("pointer")}}), gda,
                   NicBackend::softnic_gpu)) == "pointer 8 B, 132 QPs");
  CHECK(text(shape("gda_msg_rate", params({{"qps", 528LL}}), gda, NicBackend::softnic_gpu_same)) ==
        "inline 8 B, 528 QPs");
  CHECK(text(shape("gda_msg_rate", params({{"qps", 16LL}}), gda, NicBackend::softnic_cpu)) ==
        "inline 8 B, 16 QPs, 2 engine threads", "mini-gda's cpu engine runs 2 threads");
  // inline_payload: its size and payload, 16 QPs by default.
  CHECK(text(shape("inline_payload", params({{"size", 64LL}}), gda, NicBackend::softnic_gpu)) == "inline 64 B, 16 QPs");
  CHECK(text(shape("inline_payload", params({{"size", 220LL}, {"payload", std::string("pointer")}}), gda,
                   NicBackend::softnic_gpu_same)) == "pointer 220 B, 16 QPs");
  CHECK(!shape("inline_payload", params({{"size", 221LL}}), gda, NicBackend::softnic_gpu), "no inline WQE above 220 B");
  // goodput: pointer writes of `size`; mini-gda's QPs are its CTAs, mini-proxy's its workers.
  CHECK(text(shape("goodput", params({{"size", 4096LL}, {"ctas", 16LL}}), gda, NicBackend::softnic_gpu)) ==
        "pointer 4096 B, 16 QPs");
  CHECK(text(shape("goodput", params({{"size", 65536LL}, {"ctas", 16LL}}), proxy, NicBackend::softnic_cpu)) ==
        "pointer 65536 B, 2 QPs, 2 engine threads", "workers derived min(2, ctas)");
  CHECK(text(shape("goodput", params({{"size", 8LL}, {"ctas", 1LL}}), proxy, NicBackend::softnic_cpu)) ==
        "pointer 8 B, 1 QP, 1 engine thread");
  CHECK(text(shape("goodput", params({{"size", 512LL}, {"ctas", 16LL}, {"workers", 4LL}}), proxy,
                   NicBackend::softnic_cpu)) == "pointer 512 B, 4 QPs, 4 engine threads");
  // connection_scaling: 8 B inline, larger by pointer; every active connection is a QP.
  CHECK(text(shape("connection_scaling", params({{"active_qps", 4096LL}}), gda, NicBackend::softnic_cpu)) ==
        "inline 8 B, 4096 QPs, 2 engine threads");
  CHECK(text(shape("connection_scaling", params({{"active_qps", 32768LL}, {"size", 512LL}}), gda,
                   NicBackend::softnic_gpu)) == "pointer 512 B, 528 QPs", "the gpu engine's most");
  // proxy_msg_rate (proxy_one_op's parameters): rate mode only; a QP and engine threads per worker.
  CHECK(text(shape("proxy_msg_rate", params({{"mode", std::string("rate")}, {"workers", 8LL}}), proxy,
                   NicBackend::softnic_cpu)) == "inline 8 B, 8 QPs, 8 engine threads");
  CHECK(text(shape("proxy_msg_rate", params({{"mode", std::string("rate")}, {"workers", 4LL}, {"nic_threads", 1LL}}),
                   proxy, NicBackend::softnic_cpu)) == "inline 8 B, 4 QPs, 1 engine thread");
  CHECK(!shape("proxy_one_op", params({{"mode", std::string("issue")}}), proxy, NicBackend::softnic_cpu),
        "one-op modes have no rate record");
  // loaded_rtt and proxy_loaded_probe: 8-byte inline puts on the probe's, the responder's and (reserved)
  // every bulk CTA's QP; mini-proxy one QP and engine thread per worker.
  CHECK(text(shape("loaded_rtt", params({{"bulk_ctas", 16LL}}), gda, NicBackend::softnic_gpu)) == "inline 8 B, 18 QPs",
        "18 QPs");
  CHECK(text(shape("loaded_rtt", params({{"bulk_ctas", 64LL}, {"queue", std::string("shared")}}), gda,
                   NicBackend::softnic_gpu)) == "inline 8 B, 2 QPs");
  CHECK(text(shape("proxy_loaded_probe", params({{"workers", 1LL}}), proxy, NicBackend::softnic_cpu)) ==
        "inline 8 B, 1 QP, 1 engine thread");
  // soak: the rings target (mini-proxy's 8-byte writes); the engine target's atomics are not a shape.
  CHECK(text(shape("soak", params({{"target", std::string("rings")}, {"workers", 2LL}}), proxy,
                   NicBackend::softnic_cpu)) == "inline 8 B, 2 QPs, 1 engine thread");
  CHECK(!shape("soak", params({{"target", std::string("engine")}}), Transport::softnic, NicBackend::softnic_cpu));
  // Not a software NIC, or no rate record: no shape.
  for (NicBackend b : {NicBackend::mlx5, NicBackend::verbs, NicBackend::nvlink, NicBackend::none})
    CHECK(!shape("gda_msg_rate", {}, gda, b), "backend %s carries no engine ceiling", name_of(b));
  CHECK(!shape("gda_one_op", {}, gda, NicBackend::softnic_gpu), "no rate metric");
  CHECK(!shape("engine_ceiling", {}, Transport::softnic, NicBackend::softnic_cpu), "the ceiling itself");
  // The point's QPs, within the engine's most.
  const auto gpu = NicBackend::softnic_gpu_same, cpu = NicBackend::softnic_cpu;
  CHECK(ceiling_qps(0, gpu) == 1 && ceiling_qps(3, gpu) == 3 && ceiling_qps(132, gpu) == 132 &&
        ceiling_qps(528, gpu) == 528 && ceiling_qps(529, gpu) == 528 && ceiling_qps(528, cpu) == 528 &&
        ceiling_qps(100000, cpu) == 4096);
  CHECK(is_rate_metric("msg_rate") && is_rate_metric("goodput_gbps") && is_rate_metric("bulk_msg_rate") &&
        !is_rate_metric("issue_ns") && !is_rate_metric("engine_wqe_rate"));
  // The hook's short plan: at most 32768 WQEs (the gpu engine: 256 a QP when more) and 64 MiB a round.
  EngineShape big;
  big.inline_payload = false;
  big.bytes = 65536;
  big.qps = 16;
  CHECK(short_plan(big, 2000).depth == 64, "64 MiB / 64 KiB / 16 QPs, got %u", short_plan(big, 2000).depth);
  EngineShape one;
  one.backend = NicBackend::softnic_gpu;
  CHECK(short_plan(one, 2000).depth == 4096 && short_plan(one, 2000).rounds == 3, "the gpu engine's plan");
  one.qps = 528;  // many QPs: 2048 WQEs each, not 32768 / 528 = 62
  CHECK(short_plan(one, 2000).depth == 2048, "8 B x 528 QPs: depth %u", short_plan(one, 2000).depth);
  one.inline_payload = false;
  one.bytes = 4096;  // the payload's 64 MiB bound stays: 16384 / 528 = 31
  CHECK(short_plan(one, 2000).depth == 31, "4 KiB x 528 QPs: depth %u", short_plan(one, 2000).depth);
  one = EngineShape{};
  one.backend = NicBackend::softnic_gpu;
  // The cpu engine's: rounds up to a full SQ (32768 WQEBBs), five timed rounds, method steady.
  EngineShape two = one;
  two.backend = NicBackend::softnic_cpu;
  two.qps = 2;
  two.engine_threads = 2;
  CeilingPlan p = short_plan(two, 2000);
  CHECK(p.depth == 16384 && p.rounds == 5 && p.warmup == 1 && p.method == CeilingMethod::steady && p.signal_every == 16,
        "8 B x 2 QPs: depth %u rounds %d", p.depth, p.rounds);
  two.bytes = 220;
  CHECK(short_plan(two, 2000).depth == 8192, "inline 220 B is 4 WQEBBs: 8192 WQEs fill the SQ");
  two.qps = 1;
  CHECK(short_plan(two, 2000).depth == 8192 && wqebbs_per_wqe(two) == 4);
  two.inline_payload = false;
  two.bytes = 65536;
  two.qps = 2;
  CHECK(short_plan(two, 2000).depth == 512 && wqebbs_per_wqe(two) == 1, "64 MiB of 64 KiB writes over 2 QPs");
  // The ceiling: the best round where the measurer says so, else the median.
  CeilingSamples s;
  s.wqe_rate_mps = {3.0, 9.0, 5.0};
  CHECK(ceiling_of(s) == 5.0, "median");
  s.best_round = true;
  CHECK(ceiling_of(s) == 9.0, "best round");
}

// ---- bad plans are refused, naming the field, its value and what is allowed -------------------
void bad_plans() {
  auto refused = [](const CeilingPlan& p, uint32_t wqebbs, const std::string& want) {
    try {
      check_plan(p, wqebbs);
    } catch (const PointFailure& e) {
      CHECK(std::string(e.what()).find(want) != std::string::npos, "'%s' lacks '%s'", e.what(), want.c_str());
      return;
    }
    CHECK(false, "plan accepted, expected '%s'", want.c_str());
  };
  CeilingPlan p;
  check_plan(p, 1);  // the default plan runs
  p.depth = 0;
  refused(p, 1, "depth must be in 1..32768 for WQEs of 1 WQEBBs (an SQ holds at most 32768), not 0");
  p.depth = 8193;
  refused(p, 4, "depth must be in 1..8192 for WQEs of 4 WQEBBs");
  p = CeilingPlan{};
  p.rounds = 0;
  refused(p, 1, "rounds (timed rounds) must be at least 1, not 0");
  p = CeilingPlan{};
  p.warmup = -1;
  refused(p, 1, "warmup must be at least 0, not -1");
  p = CeilingPlan{};
  p.signal_every = 0;
  refused(p, 1, "signal_every must be at least 1, not 0");
  p = CeilingPlan{};
  p.timeout_ms = 0;
  refused(p, 1, "timeout_ms must be at least 1, not 0");
}

// ---- the runner's hook ---------------------------------------------------------------------------
std::map<std::string, int> measured;  // shape text -> calls
bool fail_pointer = false;
// The cpu engine's measurements scaled in turn (then 1): a host's busy spell, and its end.
std::vector<double> cpu_scales;
bool fail_cpu_again = false;

CeilingSamples fake_measurer(const EngineShape& s, const CeilingPlan&) {
  const int call = ++measured[s.text()];
  if (fail_pointer && !s.inline_payload) throw PointFailure("QP 2: no CQE");
  double scale = 1.0;
  if (s.backend == NicBackend::softnic_cpu) {
    if (fail_cpu_again && call > 1) throw PointFailure("QP 0: no CQE");
    if (!cpu_scales.empty()) {
      scale = cpu_scales.front();
      cpu_scales.erase(cpu_scales.begin());
    }
  }
  // 10, 30, 20 Mmsg/s per 1 QP class step: the median is 20 * qps.
  CeilingSamples out;
  out.wqe_rate_mps = {10.0 * s.qps * scale, 30.0 * s.qps * scale, 20.0 * s.qps * scale};
  return out;
}
const CeilingMeasurerRegistration cpu(EngineKind::cpu, fake_measurer);
const CeilingMeasurerRegistration gpu(EngineKind::gpu, fake_measurer);

std::vector<Record> fake_rate(Run& r) {
  (void)r;
  std::vector<Record> out = {Record::scalar("msg_rate", "Mmsg/s", 7.0), Record::scalar("issue_ns", "ns", 100.0)};
  return out;
}
GICOMM_EXPERIMENT(gda_msg_rate, fake_rate);

std::vector<Json> records_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<Json> out;
  for (std::string l; std::getline(in, l);) out.push_back(Json::parse(l));
  return out;
}

int run(const std::string& points, const std::string& out) {
  static std::string prog = "gicomm-bench-test";
  std::vector<std::string> args = {"--experiment", "gda_msg_rate", "--points", points, "--out", out, "--campaign",
                                   "c", "--host", "h", "--platform", "local", "--provenance-id", "p"};
  std::vector<char*> argv = {&prog[0]};
  for (auto& a : args) argv.push_back(&a[0]);
  return run_driver(static_cast<int>(argv.size()), argv.data());
}

void hook(const std::string& dir) {
  const std::string points = dir + "/points.jsonl", out = dir + "/out.jsonl";
  std::ofstream(points) << "{\"point_id\": \"a\", \"nic_backend\": \"softnic-gpu\", \"params\": {\"qps\": 64}}\n"
                           "{\"point_id\": \"b\", \"nic_backend\": \"softnic-gpu\", \"params\": {\"qps\": 64, \"batch\": 16}}\n"
                           "{\"point_id\": \"c\", \"nic_backend\": \"softnic-cpu\", \"params\": {\"qps\": 1}}\n"
                           "{\"point_id\": \"d\", \"nic_backend\": \"mlx5\", \"params\": {\"qps\": 64}}\n"
                           "{\"point_id\": \"e\", \"nic_backend\": \"softnic-gpu\", \"params\": {\"qps\": 4, "
                           "\"payload\": \"pointer\"}}\n";
  fail_pointer = true;
  CHECK(run(points, out) == 0, "run");
  // One measurement per distinct shape (a and b differ only in batch: one shape), and the cpu engine's
  // again right before its point.
  CHECK(measured.size() == 3 && measured["inline 8 B, 64 QPs"] == 1 && measured["inline 8 B, 1 QP, 2 engine threads"] == 2 &&
            measured["pointer 8 B, 4 QPs"] == 1,
        "measured %zu shapes", measured.size());
  const auto recs = records_of(out);
  REQUIRE(recs.size() == 10, "two records per point, got %zu", recs.size());
  std::map<std::string, Json> rate, issue;
  for (const Json& r : recs) (r["metric"] == "msg_rate" ? rate : issue)[r["point_id"].get<std::string>()] = r;
  CHECK(rate["a"]["engine_ceiling"] == 1280 && rate["a"]["engine_ceiling_shape"] == "inline 8 B, 64 QPs",
        "a: %s", rate["a"].dump().c_str());
  CHECK(rate["b"]["engine_ceiling"] == 1280, "b shares a's shape");
  CHECK(rate["c"]["engine_ceiling"] == 20 && rate["c"]["engine_ceiling_shape"] == "inline 8 B, 1 QP, 2 engine threads");
  CHECK(!rate["d"].contains("engine_ceiling") && !rate["d"].contains("engine_ceiling_shape"), "mlx5 carries none");
  CHECK(!rate["e"].contains("engine_ceiling"), "a failed measurement leaves the field out");
  for (const auto& [id, r] : issue) CHECK(!r.contains("engine_ceiling"), "%s: issue_ns is not a rate", id.c_str());
  // A rerun measures nothing for finished points.
  measured.clear();
  CHECK(run(points, out) == 0 && measured.empty(), "finished points need no ceiling");
}

// The cpu engine's ceiling is the best so far: a measurement held down at the run's start gives
// way to the one before the point; a lower one later does not replace it; a failed one keeps it.
// (Shapes this process has not measured yet: a driver measures each once per process.)
std::map<std::string, double> cpu_ceilings(const std::string& dir, int qps) {
  const std::string points = dir + "/cpu-points.jsonl", out = dir + "/cpu-out.jsonl";
  std::ofstream f(points);
  for (const char* id : {"c1", "c2", "c3"})
    f << "{\"point_id\": \"" << id << "\", \"nic_backend\": \"softnic-cpu\", \"params\": {\"qps\": " << qps << "}}\n";
  f.close();
  measured.clear();
  CHECK(run(points, out) == 0, "run (qps %d)", qps);
  std::map<std::string, double> ceiling;
  for (const Json& r : records_of(out))
    if (r["metric"] == "msg_rate") ceiling[r["point_id"].get<std::string>()] = r["engine_ceiling"].get<double>();
  std::remove(points.c_str());
  std::remove(out.c_str());
  return ceiling;
}

void cpu_best_so_far(const std::string& dir) {
  cpu_scales = {0.5, 1.0, 0.25, 1.5};  // the run's start 20; before c1 40, c2 10, c3 60
  auto c = cpu_ceilings(dir, 2);
  CHECK(measured.size() == 1 && measured.begin()->second == 4, "%s measured %d times",
        measured.begin()->first.c_str(), measured.begin()->second);
  CHECK(c["c1"] == 40 && c["c2"] == 40 && c["c3"] == 60, "ceilings %g %g %g", c["c1"], c["c2"], c["c3"]);
  fail_cpu_again = true;  // the start 320 (16 QPs); every remeasurement fails
  c = cpu_ceilings(dir, 16);
  fail_cpu_again = false;
  CHECK(measured.size() == 1 && measured.begin()->second == 4, "%s measured %d times",
        measured.begin()->first.c_str(), measured.begin()->second);
  CHECK(c.size() == 3 && c["c1"] == 320 && c["c2"] == 320 && c["c3"] == 320, "ceilings %g %g %g", c["c1"], c["c2"],
        c["c3"]);
}

}  // namespace

int main() {
  shapes();
  bad_plans();
  char tmpl[] = "/tmp/gicomm-ceiling-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  REQUIRE(dir != nullptr, "mkdtemp");
  hook(dir);
  cpu_best_so_far(dir);
  std::remove((std::string(dir) + "/points.jsonl").c_str());
  std::remove((std::string(dir) + "/out.jsonl").c_str());
  rmdir(dir);
  return gicomm::test::check_result("test_bench_engine_ceiling");
}
