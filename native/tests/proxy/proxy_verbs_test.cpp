// The verbs backend against whatever RDMA devices this machine has.
//
//   proxy_verbs_test                                  no device (CI): every way in must fail with a
//                                                     one-line reason; with a device: loopback on it
//   proxy_verbs_test --device D [--gid-index G]       loopback on D (topology: loopback)
//   proxy_verbs_test --device D --peer-device P ...   two ports in one process: D's QPs connected to
//                                                     P's through the same endpoint exchange two ranks
//                                                     use, CPU producers -> mini-proxy workers -> D,
//                                                     and the port counters must show the writes
//                                                     leaving D and arriving at P (Soft-RoCE guest:
//                                                     rxe0 and rxe1 on the two ends of a veth pair)
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "gicomm/net/counters.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/verbs/verbs_backend.h"

using namespace gicomm;

namespace {

constexpr uint64_t kWrites = 2000;
constexpr uint32_t kWords = 64;

// `rings` CPU producers (one per worker) write kWrites values into words [r*64, r*64+64) of the
// destination; the last write to each word must be what it holds afterwards.
void run_pool(proxy::Backend& be, uint32_t rings, std::vector<uint64_t>& dest) {
  std::vector<proxy::Desc> slots(size_t(rings) * 64);
  std::vector<proxy::RingCounters> rc(rings);
  std::vector<proxy::RingView> views;
  for (uint32_t r = 0; r < rings; ++r) {
    rc[r] = proxy::RingCounters{};
    views.push_back(proxy::RingView{slots.data() + r * 64, &rc[r].head, &rc[r].done, &rc[r].tail, 64, r});
  }
  proxy::PoolConfig pc;
  pc.workers = rings;
  pc.batch = 4;
  pc.numa_node = -1;
  pc.yield_when_idle = true;           // the guest has one vCPU shared with the kernel's rxe work
  pc.stall_timeout_ns = 60000000000ull;  // latency under TCG is meaningless: be generous
  std::string err;
  auto pool = proxy::WorkerPool::create(pc, views, be, nullptr, &err);
  REQUIRE(pool, "%s", err.c_str());
  REQUIRE(pool->start(false, &err), "%s", err.c_str());
  std::vector<std::thread> producers;
  for (uint32_t r = 0; r < rings; ++r)
    producers.emplace_back([&, r] {
      proxy::TunedProducer tp{0, 0};
      for (uint64_t i = 0; i < kWrites; ++i)
        REQUIRE(proxy::enqueue_tuned(views[r], tp, (uint64_t(r) << 32) + 1000 + i,
                                   proxy::make_info(proxy::Op::write_inline, r * kWords + uint32_t(i % kWords), false),
                                   pc.stall_timeout_ns, nullptr) == i);
    });
  for (auto& t : producers) t.join();
  std::vector<uint64_t> expected(rings, kWrites);
  REQUIRE(pool->stop(&expected, pc.stall_timeout_ns, &err), "%s", err.c_str());
  for (uint32_t r = 0; r < rings; ++r)
    for (uint64_t w = 0; w < kWords; ++w) {
      const uint64_t last = kWrites - 1 - ((kWrites - 1 - w) % kWords);
      REQUIRE(dest[r * kWords + w] == (uint64_t(r) << 32) + 1000 + last, "ring %u word %lu holds %lu", r,
                static_cast<unsigned long>(w), static_cast<unsigned long>(dest[r * kWords + w]));
    }
}

int no_device() {
  std::vector<uint64_t> remote(64, 0);
  verbs::VerbsConfig cfg;
  cfg.remote = remote.data();
  cfg.remote_bytes = remote.size() * 8;
  std::string err;
  REQUIRE(!verbs::make_verbs_backend(cfg, &err));
  REQUIRE(err.find("no RDMA device found") != std::string::npos, "%s", err.c_str());
  REQUIRE(err.find('\n') == std::string::npos);
  std::printf("  no RDMA device: '%s'\n", err.c_str());
  // A named device that does not exist fails the same way, and so does an endpoint.
  cfg.device = "mlx5_999";
  REQUIRE(!verbs::make_verbs_backend(cfg, &err));
  REQUIRE(!verbs::VerbsEndpoint::open(cfg, 1, &err));
  REQUIRE(err.find("no RDMA device found") != std::string::npos, "%s", err.c_str());
  std::printf("proxy_verbs_test: ok (failure path)\n");
  return 0;
}

int loopback(const std::string& device, int gid_index) {
  std::vector<uint64_t> remote(2 * kWords, 0);
  verbs::VerbsConfig cfg;
  cfg.device = device;
  cfg.gid_index = gid_index;
  cfg.remote = remote.data();
  cfg.remote_bytes = remote.size() * 8;
  std::string err;
  auto be = verbs::make_verbs_backend(cfg, &err);
  REQUIRE(be, "%s", err.c_str());
  run_pool(*be, 2, remote);
  std::printf("proxy_verbs_test: ok (loopback on %s: %lu writes per QP)\n", device.empty() ? "the first device" : device.c_str(),
              static_cast<unsigned long>(kWrites));
  return 0;
}

int two_ports(const std::string& device, const std::string& peer_device, int gid_index) {
  constexpr uint32_t kRings = 2;
  std::vector<uint64_t> dest(kRings * kWords, 0);
  verbs::VerbsConfig a, b;
  a.device = device;
  a.gid_index = gid_index;
  b.device = peer_device;
  b.gid_index = gid_index;
  b.remote = dest.data();
  b.remote_bytes = dest.size() * 8;
  std::string err;
  auto sender = verbs::VerbsEndpoint::open(a, kRings, &err);
  REQUIRE(sender, "%s", err.c_str());
  auto receiver = verbs::VerbsEndpoint::open(b, kRings, &err);
  REQUIRE(receiver, "%s", err.c_str());
  // The endpoints travel through the exchange's text form, as between two ranks.
  net::Message ma, mb;
  net::put_endpoint(sender->local(), &ma);
  net::put_endpoint(receiver->local(), &mb);
  net::Endpoint ea, eb;
  REQUIRE(net::get_endpoint(ma, &ea, &err), "%s", err.c_str());
  REQUIRE(net::get_endpoint(mb, &eb, &err), "%s", err.c_str());
  REQUIRE(ea.device == device && eb.device == peer_device && eb.buffer_bytes == dest.size() * 8);
  REQUIRE(sender->connect(eb, &err), "%s", err.c_str());
  REQUIRE(receiver->connect(ea, &err), "%s", err.c_str());
  REQUIRE(!receiver->connect(ea, &err));  // once only
  auto be = sender->backend(&err);
  REQUIRE(be, "%s", err.c_str());
  REQUIRE(!be->open(kRings, &err));  // no QP for a third worker
  REQUIRE(err.find("has no QP") != std::string::npos, "%s", err.c_str());

  const auto before = net::read_all_ports("/sys");
  run_pool(*be, kRings, dest);
  const auto after = net::read_all_ports("/sys");
  const uint32_t mtu = std::min(ea.mtu, eb.mtu);
  const auto out = net::check_path(device, 1, before, after, net::rdma_write_claim(true, kRings * kWrites, 8, mtu));
  const auto in = net::check_path(peer_device, 1, before, after, net::rdma_write_claim(false, kRings * kWrites, 8, mtu));
  std::printf("  sender   %s\n  receiver %s\n", net::to_json(out).c_str(), net::to_json(in).c_str());
  REQUIRE(out.ok, "%s", out.reason.c_str());
  REQUIRE(in.ok, "%s", in.reason.c_str());
  std::printf("proxy_verbs_test: ok (%s -> %s: %u QPs, %lu writes each, counters agree)\n", device.c_str(),
              peer_device.c_str(), kRings, static_cast<unsigned long>(kWrites));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device, peer;
  int gid_index = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--device") device = argv[i + 1];
    else if (k == "--peer-device") peer = argv[i + 1];
    else if (k == "--gid-index") gid_index = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "proxy_verbs_test: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  int devices = 0;
  const std::string names = verbs::describe_devices(&devices);
  if (devices == 0) {
    REQUIRE(device.empty() && peer.empty(), "devices named (%s %s) but none present", device.c_str(), peer.c_str());
    return no_device();
  }
  std::printf("  devices: %s\n", names.c_str());
  return peer.empty() ? loopback(device, gid_index) : two_ports(device, peer, gid_index);
}
