// A driver for the CPU-only tests of two-rank runs (tests/two_rank_emu.sh): the real runner,
// launcher, out-of-band session, peer service, verbs path and path proof, with mini-proxy's workers
// fed by CPU producer threads instead of the GPU kernels of gicomm-bench-proxy (which needs a GPU).
// It measures proxy_msg_rate (its real declaration): `rings` producers, `msgs` inline 8-byte
// RDMA writes each, into `window` words per ring of the destination; after the drain the
// destination (the peer's, fetched back) must hold each word's last value.
#include <chrono>
#include <thread>
#include <vector>

#include "gicomm/proxy/pool.h"
#include "harness/errors.h"
#include "harness/runner.h"
#include "harness/two_rank.h"

namespace gicomm::bench {
namespace {

uint64_t value_of(uint32_t ring, uint64_t i) { return (uint64_t(ring + 1) << 40) | (i + 1); }

std::vector<Record> cpu_msg_rate(Run& run) {
  const auto rings = run.derived<uint32_t>("rings", run.param<uint32_t>("workers"));
  const auto workers = run.param<uint32_t>("workers");
  const auto batch = run.param<uint32_t>("batch");
  const auto capacity = run.param<uint32_t>("capacity");
  const auto window = run.param<uint32_t>("window");
  const auto msgs = run.param<uint64_t>("msgs");
  if (run.nic() != NicBackend::verbs) throw PointFailure("bad parameter: this test driver measures nic_backend verbs");
  std::vector<proxy::Desc> slots(size_t(rings) * capacity);
  std::vector<proxy::RingCounters> counters(rings);
  std::vector<proxy::RingView> views(rings);
  for (uint32_t r = 0; r < rings; ++r)
    views[r] = proxy::RingView{slots.data() + size_t(r) * capacity, &counters[r].head, &counters[r].done,
                               &counters[r].tail, capacity, r};
  std::vector<uint64_t> dest(size_t(rings) * window, 0), src(64, 0);
  auto backend = open_verbs_path(run, workers, dest.data(), dest.size() * 8, src.data(), src.size() * 8);
  proxy::PoolConfig pc;
  pc.workers = workers;
  pc.batch = batch;
  pc.numa_node = -1;
  pc.yield_when_idle = true;  // the test shares its cores with the emulated NICs
  pc.stall_timeout_ns = run.timeout_ns();
  std::string err;
  auto pool = proxy::WorkerPool::create(pc, views, *backend, nullptr, &err);
  if (!pool || !pool->start(false, &err)) throw PointFailure("mini-proxy pool: " + err);
  std::vector<std::string> perr(rings);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> producers;
  for (uint32_t r = 0; r < rings; ++r)
    producers.emplace_back([&, r] {
      proxy::TunedProducer tp{0, 0};
      for (uint64_t i = 0; i < msgs; ++i) {
        const uint32_t info = proxy::make_info(proxy::Op::write_inline, r * window + uint32_t(i % window), false);
        proxy::WaitError we{};
        if (proxy::enqueue_tuned(views[r], tp, value_of(r, i), info, pc.stall_timeout_ns, &we) == ~0ull) {
          perr[r] = "ring " + std::to_string(r) + " stayed full";
          return;
        }
      }
    });
  for (auto& t : producers) t.join();
  for (const auto& e : perr)
    if (!e.empty()) throw PointFailure(e);
  const std::vector<uint64_t> expected(rings, msgs);
  if (!pool->stop(&expected, pc.stall_timeout_ns, &err)) throw PointFailure("drain: " + err);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fetch_peer_buffer(run, dest.data(), dest.size() * 8);
  for (uint32_t r = 0; r < rings; ++r)
    for (uint64_t k = 0; k < window && k < msgs; ++k) {
      const uint64_t last = msgs - 1 - ((msgs - 1 - k) % window);
      if (dest[size_t(r) * window + k] != value_of(r, last))
        throw PointFailure("ring " + std::to_string(r) + " word " + std::to_string(k) + " holds " +
                           std::to_string(dest[size_t(r) * window + k]) + ", expected " +
                           std::to_string(value_of(r, last)));
    }
  return {Record::scalar("msg_rate", "Mmsg/s", double(rings) * double(msgs) / secs / 1e6)};
}

GICOMM_EXPERIMENT(proxy_msg_rate, cpu_msg_rate);

}  // namespace
}  // namespace gicomm::bench

int main(int argc, char** argv) { return gicomm::bench::run_driver(argc, argv); }
