// The host-load reader: /proc/stat and /proc/loadavg parsed as the kernel writes them, the busy
// fraction and this process's share over a window (a spinning thread shows as about one CPU), no
// value where nothing can be known, and the record field every point carries.
#include <chrono>
#include <cmath>

#include "check.h"
#include "harness/host_load.h"
#include "harness/json.h"
#include "harness/options.h"
#include "harness/points.h"
#include "harness/record.h"

using namespace gicomm::bench;

namespace {

const char* kStat =
    "cpu  100 5 50 800 20 3 2 10 7 0\n"
    "cpu0 50 2 25 400 10 1 1 5 3 0\n"
    "cpu1 50 3 25 400 10 2 1 5 4 0\n"
    "intr 12345 0 0\n"
    "ctxt 999\n";

void parses_proc_stat() {
  const auto c = parse_proc_stat(kStat);
  REQUIRE(c.has_value());
  // total: user..steal (guest already inside user); busy: total - idle - iowait.
  CHECK(c->total == 100 + 5 + 50 + 800 + 20 + 3 + 2 + 10, "total %llu", c->total);
  CHECK(c->busy == 100 + 5 + 50 + 3 + 2 + 10, "busy %llu", c->busy);
  CHECK(c->ncpu == 2, "ncpu %d", c->ncpu);
  CHECK(!parse_proc_stat("").has_value());
  CHECK(!parse_proc_stat("cpu  1 2 3\ncpu0 1 2 3\n").has_value(), "a short cpu line is refused");
  CHECK(!parse_proc_stat("cpu  1 2 3 4 5 6 7 8\n").has_value(), "no cpuN line: the CPU count is unknown");
}

void parses_loadavg() {
  const auto l = parse_loadavg("3.25 2.10 1.00 4/512 12345\n");
  REQUIRE(l.has_value());
  CHECK(std::fabs(*l - 3.25) < 1e-12, "%g", *l);
  CHECK(!parse_loadavg("").has_value());
  CHECK(!parse_loadavg("x 1 2").has_value());
}

void computes_the_window() {
  HostSample a, b;
  a.cpu = CpuJiffies{100, 1000, 4};
  b.cpu = CpuJiffies{400, 1400, 4};  // 300 of 400 jiffies busy
  a.loadavg_1m = 1.0;
  b.loadavg_1m = 2.5;
  a.self_cpu_s = 1.0;
  b.self_cpu_s = 3.0;  // 2 CPU-s over 1 s: two CPUs of this process
  a.wall_s = 10.0;
  b.wall_s = 11.0;
  const auto h = host_load_between(a, b);
  REQUIRE(h.has_value());
  REQUIRE(h->cpu_busy.has_value());
  CHECK(std::fabs(*h->cpu_busy - 0.75) < 1e-12, "cpu_busy %g", *h->cpu_busy);
  CHECK(std::fabs(h->self_cpus - 2.0) < 1e-12, "self_cpus %g", h->self_cpus);
  CHECK(h->ncpu == 4 && h->loadavg_1m == 2.5 && h->window_s == 1.0);
  HostSample no_proc = b;
  no_proc.cpu.reset();
  CHECK(!host_load_between(a, no_proc).has_value(), "no /proc/stat: no value");
  HostSample short_window = a;
  short_window.cpu->total += 7;  // under two ticks per CPU
  short_window.wall_s = 10.005;
  const auto s = host_load_between(a, short_window);
  REQUIRE(s.has_value(), "a short window still has the load average and the CPU count");
  CHECK(!s->cpu_busy.has_value(), "under two ticks per CPU: the busy fraction is unknown, not zero");
  CHECK(s->loadavg_1m == 1.0 && s->ncpu == 4);
  CHECK(!host_load_between(b, a).has_value(), "a window that runs backwards has no value");
}

// On this host: a thread spinning for 300 ms is at most one CPU of this process (less when other
// work shares the cores), and the host is at least that busy.
void measures_this_host() {
  const HostLoadWindow w;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile unsigned long long spins = 0;
  while (std::chrono::steady_clock::now() < until) spins = spins + 1;
  const auto h = w.finish();
  REQUIRE(h.has_value(), "this test runs on Linux: /proc/stat and /proc/loadavg are readable");
  CHECK(h->ncpu >= 1 && h->window_s >= 0.3, "ncpu %d window %g", h->ncpu, h->window_s);
  CHECK(h->self_cpus > 0.0 && h->self_cpus < 1.1, "one spinning thread: self_cpus %g", h->self_cpus);
  REQUIRE(h->cpu_busy.has_value(), "300 ms is 30 ticks: the busy fraction is known");
  // Jiffies are 10 ms ticks: allow a tick per CPU of slack against the process's own clock.
  CHECK(*h->cpu_busy * h->ncpu >= h->self_cpus - 0.05 * h->ncpu, "host busy %g x %d below this process %g",
        *h->cpu_busy, h->ncpu, h->self_cpus);
  CHECK(*h->cpu_busy <= 1.0 && h->loadavg_1m >= 0);
}

void records_carry_it() {
  Record r = Record::scalar("issue_ns", "ns", 700);
  r.host_load = HostLoad{3.5, 0.625, 1.0, 8, 0.25};
  Options o;
  o.campaign = "c";
  o.host = "h";
  o.platform = "local";
  o.experiment = "one_op";
  o.provenance_id = "p";
  Point p;
  p.point_id = "x";
  const Json j = Json::parse(record_to_json(r, o, DriverInfo{"gicomm-bench-test", "t", "none"}, p));
  REQUIRE(j.contains("host_load"), "%s", dump(j).c_str());
  const Json& h = j["host_load"];
  CHECK(h["loadavg_1m"].get<double>() == 3.5 && h["cpu_busy"].get<double>() == 0.625);
  r.host_load->cpu_busy.reset();
  CHECK(Json::parse(record_to_json(r, o, DriverInfo{"gicomm-bench-test", "t", "none"}, p))["host_load"]["cpu_busy"]
            .is_null(),
        "an unknown busy fraction is null");
  CHECK(h["self_cpus"].get<double>() == 1.0 && h["ncpu"].get<int>() == 8 && h["window_s"].get<double>() == 0.25);
  Record none = Record::scalar("issue_ns", "ns", 700);
  CHECK(!Json::parse(record_to_json(none, o, DriverInfo{"gicomm-bench-test", "t", "none"}, p)).contains("host_load"),
        "no reading: no field");
}

}  // namespace

int main() {
  parses_proc_stat();
  parses_loadavg();
  computes_the_window();
  measures_this_host();
  records_carry_it();
  return gicomm::test::check_result("bench_host_load");
}
