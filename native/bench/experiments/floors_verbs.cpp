// The NIC floor a CPU thread sees (floors.h): 8-byte inline RDMA writes posted through rdma-core
// verbs from one host thread, no GPU involved, so it runs on any host with an RDMA device (a
// ConnectX, Soft-RoCE, or the emulated rdma-core). The QP is looped back on one device
// (--topology loopback) or connected to the peer rank's (two ranks: rank 1 serves the buffer, the
// NIC's port counters of both ends are checked by the point's path proof, harness/nic_path.cpp).
//   floor_nic_verbs_write_ns  one write at a time: post, then poll until its completion (wall clock)
//   floor_nic_verbs_msg_rate  `iters` writes back to back in chains of kMaxBatch (one doorbell and
//                             one signalled completion per chain), as many in flight as the QP takes
// After both, every word of the destination (the peer's, fetched back) must hold its last value.
#include <chrono>
#include <string>
#include <vector>

#include "floors.h"
#include "gicomm/proxy/ring.h"
#include "harness/proxy_rig.h"
#include "harness/two_rank.h"

namespace gicomm::bench::floors {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kWords = 256;  // destination words the writes cycle through

uint64_t value_of(uint64_t i) { return 0xf100'0000'0000ull | i; }

// Posts chains and reaps completions on one channel, every wait bounded by --timeout-ms.
struct Poster {
  proxy::Channel& ch;
  Clock::duration limit;
  uint64_t next = 0;  // writes posted
  uint64_t done = 0;  // writes retired

  void reap_until(uint64_t target) {
    const auto start = Clock::now();
    std::string err;
    while (done < target) {
      const int64_t got = ch.poll(&err);
      if (got < 0) throw PointFailure("verbs completion: " + err);
      done += static_cast<uint64_t>(got);
      if (Clock::now() - start > limit)
        throw PointFailure("verbs: " + std::to_string(target - done) + " writes not completed within --timeout-ms");
    }
  }
  void post(uint32_t n) {
    proxy::Desc d[proxy::kMaxBatch];
    for (uint32_t k = 0; k < n; ++k, ++next)
      d[k] = proxy::Desc{value_of(next), proxy::make_info(proxy::Op::write_inline, next % kWords, false), 0};
    std::string err;
    if (!ch.post(d, n, &err)) throw PointFailure("verbs post: " + err);
  }
};

}  // namespace

std::vector<Record> nic_verbs(Run& run) {
  const std::vector<std::string> metrics = {"floor_nic_verbs_write_ns", "floor_nic_verbs_msg_rate"};
  if (run.nic() != NicBackend::verbs)
    return skip_all(metrics, "no NIC asked (nic_backend " + std::string(name_of(run.nic())) +
                                 "): give nic_backend verbs on a host with an RDMA device, or under the emulated "
                                 "rdma-core (gicomm-emu-run)");
  std::vector<uint64_t> dest(kWords, 0), src(64, 0);
  std::unique_ptr<proxy::Backend> backend;
  try {
    run.rdma_provider = require_proxy_backend(NicBackend::verbs);  // "emulated" under native/emu
    backend = open_verbs_path(run, 1, dest.data(), dest.size() * 8, src.data(), src.size() * 8);
  } catch (const HardwareMissing& e) {
    return skip_all(metrics, e.what());
  }
  std::string err;
  const std::unique_ptr<proxy::Channel> ch = backend->open(0, &err);
  if (!ch) throw PointFailure("verbs channel: " + err);
  Poster p{*ch, std::chrono::nanoseconds(run.timeout_ns())};
  std::vector<double> write_ns;
  for (int i = -run.warmup(); i < run.iters(); ++i) {
    const auto t0 = Clock::now();
    p.post(1);
    p.reap_until(p.next);
    if (i >= 0) write_ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  const uint64_t rate_writes = static_cast<uint64_t>(run.iters()) * proxy::kMaxBatch;
  const uint64_t first = p.next;
  const auto r0 = Clock::now();
  while (p.next - first < rate_writes) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(proxy::kMaxBatch, rate_writes - (p.next - first)));
    if (ch->room() < n) {
      p.reap_until(p.done + 1);
      continue;
    }
    p.post(n);
  }
  p.reap_until(p.next);
  const double secs = std::chrono::duration<double>(Clock::now() - r0).count();
  fetch_peer_buffer(run, dest.data(), dest.size() * 8);
  for (uint64_t w = 0; w < kWords && w < p.next; ++w) {
    const uint64_t last = p.next - 1 - ((p.next - 1 - w) % kWords);
    if (dest[w] != value_of(last))
      throw PointFailure("destination word " + std::to_string(w) + " holds " + std::to_string(dest[w]) +
                         ", expected " + std::to_string(value_of(last)) + " (the last write aimed at it)");
  }
  return {Record::ok(metrics[0], "ns", compute_stats(write_ns)),
          Record::scalar(metrics[1], "Mmsg/s", static_cast<double>(rate_writes) / secs / 1e6)};
}

}  // namespace gicomm::bench::floors
