// gicomm-pair-check: the first thing to run on two nodes. Both ranks start from the launcher
// (srun, mpirun or explicit flags), meet over the out-of-band exchange, connect one RC QP per
// worker between their RDMA ports, and rank 0's mini-proxy workers (fed by CPU producer threads)
// RDMA-write into rank 1's buffer. Both ranks read every port's counters before and after; the
// check passes only when the configured port of each rank moved at least the traffic sent (rank
// 0) or received (rank 1), and rank 1 finds the data. Each rank prints one JSON line with both
// sides' provenance (host, NIC, firmware, GID) and verdicts; exit 0 when all checks pass.
//
//   srun -N2 -n2 --ntasks-per-node=1 gicomm-pair-check --device mlx5_0
//   gicomm-pair-check --rank 0 --world-size 2 --rendezvous-port 17600 --device rxe0 --gid-index 1 &
//   gicomm-pair-check --rank 1 --world-size 2 --rendezvous-port 17600 --device rxe1 --gid-index 1
//
// Options (defaults in brackets):
//   launch         --rank, --world-size, --rendezvous HOST[:PORT], --rendezvous-port (gicomm/net/launcher.h)
//   --nic verbs|none    none: only the launcher and the exchange (no RDMA) [verbs]
//   --device NAME       the RDMA device this rank is configured to use [the first one]
//   --port N, --gid-index N  [1, 0; Soft-RoCE needs --gid-index 1]
//   --messages N, --bytes S  RDMA writes rank 0 sends and their size (8: inline) [4096, 8]
//   --workers W, --batch B   mini-proxy workers (one QP each) and WRs chained per post [2, 8]
//   --experiment E, --point-id P, --run R   what both ranks must agree on [-, -, 0]
//   --timeout-ms T      connecting and each exchange [60000]
//   --work-timeout-ms T how long rank 1 waits for rank 0's traffic [300000]
//   --sysfs DIR         where /sys is (tests) [/sys]
//   --print-launch      print how the launch resolved (rank, world, rank 0's host and port, each
//                       rank's host) as one JSON line and exit: a dry run of the launcher
// Test-only options that make a rank misbehave on purpose:
//   --traffic-device NAME  send over another device than --device (the path check must fail)
//   --build-id X           claim another build (the peer must refuse it)
// Exit: 0 all checks passed, 1 a check or the exchange failed (the reason is printed), 2 bad
// arguments, 3 no RDMA device or no rdma-core in this build.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gicomm/net/counters.h"
#include "gicomm/net/launcher.h"
#include "gicomm/net/oob.h"

#if defined(GICOMM_PAIR_CHECK_WITH_VERBS)
#include "gicomm/proxy/pool.h"
#include "gicomm/verbs/verbs_backend.h"
#endif

using namespace gicomm;

namespace {

struct Args {
  net::LaunchFlags launch;
  std::string nic = "verbs", device, traffic_device, sysfs = "/sys";
  int port = 1, gid_index = 0;
  long messages = 4096, bytes = 8, workers = 2, batch = 8;
  net::Identity id;
  int timeout_ms = 60000, work_timeout_ms = 300000;
  bool print_launch = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "gicomm-pair-check: %s (see the header of native/src/net/pair_check.cpp)\n", why.c_str());
  std::exit(2);
}

long to_long(const std::string& key, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || x < lo || x > hi)
    usage("--" + key + " '" + v + "' is not an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  return x;
}

Args parse(int argc, char** argv) {
  Args a;
  a.id.experiment = "-";
  a.id.point = "-";
  for (int i = 1; i < argc; ++i) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0) usage("unexpected argument '" + key + "'");
    key = key.substr(2);
    if (key == "print-launch") {
      a.print_launch = true;
      continue;
    }
    if (i + 1 >= argc) usage("--" + key + " needs a value");
    const std::string v = argv[++i];
    std::string err;
    if (net::parse_launch_flag(key, v, &a.launch, &err)) {
      if (!err.empty()) usage(err);
    } else if (key == "nic") {
      if (v != "verbs" && v != "none") usage("--nic '" + v + "' is not one of verbs, none");
      a.nic = v;
    } else if (key == "device") {
      a.device = v;
    } else if (key == "traffic-device") {
      a.traffic_device = v;
    } else if (key == "sysfs") {
      a.sysfs = v;
    } else if (key == "port") {
      a.port = static_cast<int>(to_long(key, v, 1, 255));
    } else if (key == "gid-index") {
      a.gid_index = static_cast<int>(to_long(key, v, 0, 255));
    } else if (key == "messages") {
      a.messages = to_long(key, v, 1, 1L << 30);
    } else if (key == "bytes") {
      a.bytes = to_long(key, v, 8, 65536);
    } else if (key == "workers") {
      a.workers = to_long(key, v, 1, 8);
    } else if (key == "batch") {
      a.batch = to_long(key, v, 1, 16);
    } else if (key == "experiment") {
      a.id.experiment = v;
    } else if (key == "point-id") {
      a.id.point = v;
    } else if (key == "run") {
      a.id.run = static_cast<int>(to_long(key, v, 0, 1 << 20));
    } else if (key == "build-id") {
      a.id.build = v;
    } else if (key == "timeout-ms") {
      a.timeout_ms = static_cast<int>(to_long(key, v, 100, 86400000));
    } else if (key == "work-timeout-ms") {
      a.work_timeout_ms = static_cast<int>(to_long(key, v, 100, 86400000));
    } else {
      usage("unknown option --" + key);
    }
  }
  if (a.bytes % 8) usage("--bytes " + std::to_string(a.bytes) + " is not a multiple of 8");
  return a;
}

// The JSON line each rank prints; fields are appended as raw JSON values.
struct Report {
  std::string fields;
  void add(const std::string& key, const std::string& json) { fields += (fields.empty() ? "" : ",") + net::json_string(key) + ":" + json; }
  void text(const std::string& key, const std::string& v) { add(key, net::json_string(v)); }
  std::string line() const { return "{" + fields + "}"; }
};

int finish(Report& r, bool ok, const std::string& reason) {
  r.add("ok", ok ? "true" : "false");
  if (!ok) r.text("reason", reason);
  std::printf("%s\n", r.line().c_str());
  std::fflush(stdout);
  if (!ok) std::fprintf(stderr, "gicomm-pair-check: %s\n", reason.c_str());
  return ok ? 0 : 1;
}

#if defined(GICOMM_PAIR_CHECK_WITH_VERBS)
// Rank 0's traffic: one ring and one CPU producer thread per worker, `messages` descriptors in all.
// Slot k of ring r lands at word (r * kSlots + k) * stride of the peer's buffer.
constexpr uint32_t kSlots = 64;
constexpr uint32_t kRingCapacity = 256;

uint64_t inline_value(uint32_t ring, uint64_t i) { return (uint64_t(ring + 1) << 40) | (i + 1); }

bool send_traffic(proxy::Backend& backend, const Args& a, std::string* error) {
  const uint32_t rings = static_cast<uint32_t>(a.workers);
  const uint32_t stride = static_cast<uint32_t>(a.bytes / 8);
  std::vector<proxy::Desc> slots(size_t(rings) * kRingCapacity);
  std::vector<proxy::RingCounters> counters(rings);
  std::vector<proxy::RingView> views(rings);
  for (uint32_t r = 0; r < rings; ++r) {
    counters[r] = proxy::RingCounters{};
    views[r] = proxy::RingView{slots.data() + size_t(r) * kRingCapacity, &counters[r].head, &counters[r].done,
                               &counters[r].tail, kRingCapacity, r};
  }
  proxy::PoolConfig pc;
  pc.workers = rings;
  pc.batch = static_cast<uint32_t>(a.batch);
  pc.numa_node = -1;           // a check, not a measurement: no pinning
  pc.yield_when_idle = true;   // ranks may share cores with the kernel's RDMA work (Soft-RoCE)
  pc.stall_timeout_ns = uint64_t(a.work_timeout_ms) * 1000000ull;
  auto pool = proxy::WorkerPool::create(pc, views, backend, nullptr, error);
  if (!pool || !pool->start(false, error)) return false;
  std::vector<uint64_t> expected(rings);
  std::vector<std::thread> producers;
  std::vector<std::string> perr(rings);
  for (uint32_t r = 0; r < rings; ++r) {
    expected[r] = uint64_t(a.messages) / rings + (r < uint64_t(a.messages) % rings ? 1 : 0);
    producers.emplace_back([&, r] {
      proxy::TunedProducer tp{0, 0};
      for (uint64_t i = 0; i < expected[r]; ++i) {
        const uint32_t slot = (r * kSlots + uint32_t(i % kSlots)) * stride;
        const bool inl = a.bytes == 8;
        const uint64_t value = inl ? inline_value(r, i) : (uint64_t(a.bytes) << 40) | (uint64_t(r) * a.bytes);
        const uint32_t info = proxy::make_info(inl ? proxy::Op::write_inline : proxy::Op::write, slot, false);
        proxy::WaitError we{};
        if (proxy::enqueue_tuned(views[r], tp, value, info, pc.stall_timeout_ns, &we) == ~0ull) {
          perr[r] = "producer of ring " + std::to_string(r) + " found its ring full for too long";
          return;
        }
      }
    });
  }
  for (auto& t : producers) t.join();
  for (const auto& e : perr)
    if (!e.empty()) {
      *error = e;
      pool->stop(nullptr, pc.stall_timeout_ns, error);
      return false;
    }
  return pool->stop(&expected, pc.stall_timeout_ns, error);
}

// Rank 1: what rank 0's writes must have left in the buffer.
std::string check_data(const std::vector<uint64_t>& buf, const Args& a) {
  const uint32_t rings = static_cast<uint32_t>(a.workers);
  const uint32_t stride = static_cast<uint32_t>(a.bytes / 8);
  for (uint32_t r = 0; r < rings; ++r) {
    const uint64_t n = uint64_t(a.messages) / rings + (r < uint64_t(a.messages) % rings ? 1 : 0);
    for (uint32_t k = 0; k < kSlots && k < n; ++k) {
      const size_t at = size_t(r * kSlots + k) * stride;
      if (a.bytes == 8) {
        const uint64_t last = n - 1 - ((n - 1 - k) % kSlots);  // the last i with i % kSlots == k
        if (buf[at] != inline_value(r, last))
          return "word " + std::to_string(at) + " holds " + std::to_string(buf[at]) + ", expected " +
                 std::to_string(inline_value(r, last));
      } else {
        for (uint32_t w = 0; w < stride; ++w)
          if (buf[at + w] != (uint64_t(r) << 32 | w))
            return "word " + std::to_string(at + w) + " of a " + std::to_string(a.bytes) + " B write is wrong";
      }
    }
  }
  return "";
}

int run_verbs(const Args& a, net::OobSession& s, Report& rep) {
  const int rank = s.rank();
  const uint32_t stride = static_cast<uint32_t>(a.bytes / 8);
  std::vector<uint64_t> dest(size_t(a.workers) * kSlots * stride, 0);  // rank 1: rank 0 writes here
  std::vector<uint64_t> src(size_t(a.workers) * stride);                // rank 0: pointer writes read here
  for (long r = 0; r < a.workers; ++r)
    for (uint32_t w = 0; w < stride; ++w) src[size_t(r) * stride + w] = uint64_t(r) << 32 | w;
  verbs::VerbsConfig vc;
  vc.device = a.traffic_device.empty() ? a.device : a.traffic_device;
  vc.port = a.port;
  vc.gid_index = a.gid_index;
  if (rank == 1) {
    vc.remote = dest.data();
    vc.remote_bytes = dest.size() * 8;
  } else {
    vc.local = src.data();
    vc.local_bytes = src.size() * 8;
  }
  std::string err;
  auto ep = verbs::VerbsEndpoint::open(vc, static_cast<uint32_t>(a.workers), &err);
  net::Message mine, theirs;
  if (ep) net::put_endpoint(ep->local(), &mine);
  mine.set("status", ep ? "ok" : err);
  // Even a rank that cannot open its device takes part in the exchange, so the peer learns why.
  if (!s.exchange("endpoint", mine, &theirs, a.timeout_ms, &err)) return finish(rep, false, err);
  if (!ep) {
    std::fprintf(stderr, "gicomm-pair-check: %s\n", mine.get("status").c_str());
    return 3;
  }
  if (theirs.get("status") != "ok")
    return finish(rep, false, s.peer_name() + " could not open its device: " + theirs.get("status"));
  net::Endpoint peer;
  if (!net::get_endpoint(theirs, &peer, &err)) return finish(rep, false, s.peer_name() + " sent a bad " + err);
  const std::string configured = a.device.empty() ? ep->local().device : a.device;
  const net::NicInfo nic = net::describe_nic(a.sysfs, configured, a.port, a.gid_index);
  rep.add("nic", net::to_json(nic));
  rep.text("peer_device", peer.device);
  rep.add("qps", std::to_string(a.workers));
  if (!ep->connect(peer, &err)) return finish(rep, false, err);
  const auto before = net::read_all_ports(a.sysfs, a.gid_index);
  if (!s.exchange("connected", net::Message{}, &theirs, a.timeout_ms, &err)) return finish(rep, false, err);

  std::string failure;
  double seconds = 0;
  if (rank == 0) {
    auto be = ep->backend(&err);
    const auto t0 = std::chrono::steady_clock::now();
    if (!be || !send_traffic(*be, a, &err)) failure = "rank 0's traffic failed: " + err;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  net::Message done;
  done.set("status", failure.empty() ? "ok" : failure);
  if (!s.exchange("done", done, &theirs, rank == 0 ? a.timeout_ms : a.work_timeout_ms, &err))
    return finish(rep, false, err);
  if (rank == 1 && theirs.get("status") != "ok") failure = s.peer_name() + ": " + theirs.get("status");
  const auto after = net::read_all_ports(a.sysfs, a.gid_index);
  const uint32_t mtu = std::min(ep->local().mtu, peer.mtu);
  const net::PathVerdict path =
      net::check_path(configured, a.port, before, after, net::rdma_write_claim(rank == 0, uint64_t(a.messages), uint64_t(a.bytes), mtu));
  const std::string data = rank == 1 && failure.empty() ? check_data(dest, a) : "";
  if (rank == 0) rep.add("seconds", std::to_string(seconds));
  rep.add("path", net::to_json(path));
  if (rank == 1) rep.text("data", data.empty() ? "ok" : data);

  // Both ranks print both verdicts.
  net::Message mv;
  mv.set("path", path.ok ? "ok" : path.reason);
  mv.set("data", data.empty() ? "ok" : data);
  mv.set("path_json", net::to_json(path));
  if (!s.exchange("verdict", mv, &theirs, a.timeout_ms, &err)) return finish(rep, false, err);
  rep.add("peer_path", theirs.get("path_json").empty() ? "null" : theirs.get("path_json"));
  std::string reason = failure;
  auto note = [&](const std::string& who, const std::string& what, const std::string& v) {
    if (v != "ok" && reason.empty()) reason = who + " " + what + ": " + v;
  };
  note(s.name(), "path", path.ok ? "ok" : path.reason);
  note(s.name(), "data", data.empty() ? "ok" : data);
  note(s.peer_name(), "path", theirs.get("path"));
  note(s.peer_name(), "data", theirs.get("data"));
  return finish(rep, reason.empty(), reason);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  net::Launch launch;
  std::string err;
  if (!net::resolve_launch(a.launch, net::process_env(), &launch, &err)) usage(err);
  Report rep;
  rep.add("rank", std::to_string(launch.rank));
  rep.add("world", std::to_string(launch.world));
  rep.text("launcher", launch.source);
  rep.text("rendezvous", launch.rendezvous_host + ":" + std::to_string(launch.rendezvous_port));
  rep.text("host", net::this_host());
  rep.text("build", a.id.build);
  rep.text("nic_backend", a.nic);
  if (a.print_launch) {
    std::string hosts;
    for (const auto& h : launch.hosts) hosts += (hosts.empty() ? "" : ",") + net::json_string(h);
    rep.add("rank_hosts", "[" + hosts + "]");
    rep.text("how", launch.note);
    std::printf("%s\n", rep.line().c_str());
    return 0;
  }
#if !defined(GICOMM_PAIR_CHECK_WITH_VERBS)
  if (a.nic == "verbs") {
    std::fprintf(stderr, "gicomm-pair-check: this build has no rdma-core (libibverbs headers were not found at configure time); --nic none still checks the launcher and the exchange\n");
    return 3;
  }
#endif
  auto session = net::OobSession::establish(launch, a.id, a.timeout_ms, &err);
  if (!session) return finish(rep, false, err);
  rep.text("peer_host", session->peer_host());
  rep.text("peer_pid", session->peer_hello().get("pid"));
  if (a.nic == "none") {
    net::Message bye, theirs;
    if (!session->exchange("bye", bye, &theirs, a.timeout_ms, &err)) return finish(rep, false, err);
    return finish(rep, true, "");
  }
#if defined(GICOMM_PAIR_CHECK_WITH_VERBS)
  return run_verbs(a, *session, rep);
#else
  return 3;
#endif
}
