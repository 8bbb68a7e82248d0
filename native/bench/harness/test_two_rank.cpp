// A driver for the CPU-only tests of two-rank runs (tests/two_rank_emu.sh): the real runner,
// launcher, out-of-band session, peer service, verbs path and path proof, with mini-proxy's workers
// fed by CPU producer threads instead of the GPU kernels of gicomm-bench-proxy (which needs a GPU).
// It measures proxy_msg_rate (its real declaration): `rings` producers, `msgs` inline 8-byte
// RDMA writes each, into `window` words per ring of the destination; after the drain the
// destination (the peer's, fetched back) must hold each word's last value. And proxy_one_op's
// pingpong between two ranks: a CPU ping on ring 0, rank 1's responder (harness/responder.h, the
// one gicomm-bench-proxy registers) answering each ping; rtt_ns per exchange, then both
// destinations checked (ring 0's words at rank 1, fetched back; ring 1's here).
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gicomm/proxy/pool.h"
#include "harness/errors.h"
#include "harness/pingpong.h"
#include "harness/responder.h"
#include "harness/runner.h"
#include "harness/two_rank.h"

namespace gicomm::bench {
namespace {

// The workers, started, over `views` into `backend` (unpinned: the test shares its cores with the
// emulated NICs, so idle workers yield).
std::unique_ptr<proxy::WorkerPool> start_pool(const Run& run, const std::vector<proxy::RingView>& views,
                                              proxy::Backend& backend, uint32_t workers, uint32_t batch) {
  proxy::PoolConfig pc;
  pc.workers = workers;
  pc.batch = batch;
  pc.numa_node = -1;
  pc.yield_when_idle = true;
  pc.stall_timeout_ns = run.timeout_ns();
  std::string err;
  auto pool = proxy::WorkerPool::create(pc, views, backend, nullptr, &err);
  if (!pool || !pool->start(false, &err)) throw PointFailure("mini-proxy pool: " + err);
  return pool;
}

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
  std::string err;
  auto pool = start_pool(run, views, *backend, workers, batch);
  std::vector<std::string> perr(rings);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> producers;
  for (uint32_t r = 0; r < rings; ++r)
    producers.emplace_back([&, r] {
      proxy::TunedProducer tp{0, 0};
      for (uint64_t i = 0; i < msgs; ++i) {
        const uint32_t info = proxy::make_info(proxy::Op::write_inline, r * window + uint32_t(i % window), false);
        proxy::WaitError we{};
        if (proxy::enqueue_tuned(views[r], tp, value_of(r, i), info, run.timeout_ns(), &we) == ~0ull) {
          perr[r] = "ring " + std::to_string(r) + " stayed full";
          return;
        }
      }
    });
  for (auto& t : producers) t.join();
  for (const auto& e : perr)
    if (!e.empty()) throw PointFailure(e);
  const std::vector<uint64_t> expected(rings, msgs);
  if (!pool->stop(&expected, run.timeout_ns(), &err)) throw PointFailure("drain: " + err);
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

std::vector<Record> cpu_pingpong(Run& run) {
  const auto workers = run.param<uint32_t>("workers");
  const auto window = run.param<uint32_t>("window");
  if (run.param<std::string>("mode") != "pingpong") throw PointFailure("bad parameter: this test driver measures mode pingpong");
  if (run.nic() != NicBackend::verbs) throw PointFailure("bad parameter: this test driver measures nic_backend verbs");
  if (!two_ranks()) throw PointFailure("bad parameter: this test driver's ping-pong runs on two ranks");
  std::vector<proxy::Desc> slots(256);
  proxy::RingCounters counters{};
  const std::vector<proxy::RingView> views{
      proxy::RingView{slots.data(), &counters.head, &counters.done, &counters.tail, uint32_t(slots.size()), 0}};
  std::vector<uint64_t> dest(2 * size_t(window), 0), src(64, 0);
  auto backend = open_verbs_path(run, workers, dest.data(), dest.size() * 8, src.data(), src.size() * 8);
  std::string err;
  auto pool = start_pool(run, views, *backend, 1, 1);
  net::Message ask;
  const std::string responder = ask_responder(run, true, &ask);
  ask.set("scheme", "proxy-pingpong");
  ask.set_u64("window", window);
  ask.set_u64("wait_ms", run.options.timeout_ms);
  ask.set("yield", "1");
  // Tests only: name the answers' target explicitly (as mini-gda must), instead of the buffer
  // offered when the QPs connected.
  if (const char* t = std::getenv("GICOMM_TEST_RESPONDER_TARGET"); t && std::string(t) == "explicit") {
    uint64_t addr = 0;
    uint32_t rkey = 0;
    if (!offered_buffer(run, &addr, &rkey)) throw PointFailure("no buffer offered to the peer");
    ask.set_u64("addr", addr);
    ask.set_u64("rkey", rkey);
  }
  start_peer_responder(run, ask);
  const uint64_t total = uint64_t(run.warmup()) + uint64_t(run.iters());
  std::vector<double> rtt;
  proxy::TunedProducer tp{0, 0};
  for (uint64_t i = 0; i < total; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    proxy::WaitError we{};
    const uint32_t info = proxy::make_info(proxy::Op::write_inline, payload_slot(0, window, i), false);
    if (proxy::enqueue_tuned(views[0], tp, payload_value(0, i), info, run.timeout_ns(), &we) == ~0ull)
      throw PointFailure("ring 0 stayed full at ping " + std::to_string(i));
    const uint64_t* answer = &dest[payload_slot(1, window, i)];
    while (__atomic_load_n(answer, __ATOMIC_ACQUIRE) != payload_value(1, i)) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::nanoseconds(run.timeout_ns())) {
        pool->stop(nullptr, run.timeout_ns(), &err);
        throw PointFailure("ping " + std::to_string(i) + ": no answer within " + std::to_string(run.options.timeout_ms) +
                           " ms (this rank timed out waiting for the pong)");
      }
      std::this_thread::yield();
    }
    if (i >= uint64_t(run.warmup()))
      rtt.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
  }
  const std::vector<uint64_t> expected{total};
  if (!pool->stop(&expected, run.timeout_ns(), &err)) throw PointFailure("drain: " + err);
  fetch_peer_buffer(run, dest.data(), size_t(window) * 8);  // ring 0's words, where they landed
  for (uint32_t ring = 0; ring < 2; ++ring)
    for (uint64_t w = 0; w < window && w < total; ++w) {
      const uint64_t last = w + (total - 1 - w) / window * window;
      if (dest[payload_slot(ring, window, w)] != payload_value(ring, last))
        throw PointFailure("ring " + std::to_string(ring) + " word " + std::to_string(w) + " does not hold request " +
                           std::to_string(last) + "'s value");
    }
  Params params = run.point.params;
  params.set("responder", responder);
  Record r = Record::ok("rtt_ns", "ns", compute_stats(rtt));
  r.params = params;
  return {r};
}

GICOMM_EXPERIMENT(proxy_msg_rate, cpu_msg_rate);
GICOMM_EXPERIMENT(proxy_one_op, cpu_pingpong);
GICOMM_EXPERIMENT_SERVE(proxy_one_op, round_trip_responder);

}  // namespace
}  // namespace gicomm::bench

int main(int argc, char** argv) { return gicomm::bench::run_driver(argc, argv); }
