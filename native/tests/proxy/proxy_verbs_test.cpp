// The verbs backend's behaviour on this machine. With no RDMA device (CI, these hosts) it must fail
// with a one-line reason that says so; with a device it must connect and complete chained writes.
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/verbs/verbs_backend.h"

using namespace gicomm;

int main() {
  std::vector<uint64_t> remote(64, 0);
  verbs::VerbsConfig cfg;
  cfg.remote = remote.data();
  cfg.remote_bytes = remote.size() * 8;
  int devices = 0;
  const std::string names = verbs::describe_devices(&devices);
  std::string err;
  auto be = verbs::make_verbs_backend(cfg, &err);
  if (devices == 0) {
    CHECK(!be);
    CHECK_MSG(err.find("no RDMA device found") != std::string::npos, "%s", err.c_str());
    CHECK(err.find('\n') == std::string::npos);
    std::printf("  no RDMA device: '%s'\n", err.c_str());
    // A named device that does not exist fails the same way.
    cfg.device = "mlx5_999";
    CHECK(!verbs::make_verbs_backend(cfg, &err));
    std::printf("proxy_verbs_test: ok (failure path)\n");
    return 0;
  }
  // A device is present: run a small loopback through the pool.
  CHECK_MSG(be, "devices %s: %s", names.c_str(), err.c_str());
  alignas(16) proxy::Desc slots[16] = {};
  proxy::RingCounters rc{};
  proxy::RingView v{slots, &rc.head, &rc.done, &rc.tail, 16, 0};
  proxy::PoolConfig pc;
  pc.batch = 4;
  auto pool = proxy::WorkerPool::create(pc, {v}, *be, nullptr, &err);
  CHECK_MSG(pool, "%s", err.c_str());
  CHECK(pool->start(false, &err));
  proxy::TunedProducer tp{0, 0};
  for (uint64_t i = 0; i < 1000; ++i)
    CHECK(proxy::enqueue_tuned(v, tp, 1000 + i, proxy::make_info(proxy::Op::write_inline, i % 64, false),
                               2000000000ull, nullptr) == i);
  std::vector<uint64_t> expected{1000};
  CHECK_MSG(pool->stop(&expected, 5000000000ull, &err), "%s", err.c_str());
  for (uint64_t w = 0; w < 64; ++w) CHECK(remote[w] == 1000 + 960 + w - (w >= 40 ? 64 : 0));
  std::printf("proxy_verbs_test: ok (device %s)\n", names.c_str());
  return 0;
}
