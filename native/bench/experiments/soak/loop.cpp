// The soak loop both targets share (kills, restarts, rate windows) and the settling of its outcome.
#include <unistd.h>

#include <chrono>

#include "soak/soak.h"

namespace gicomm::soak {

// Main loop shared by both targets: producers, killer, rate windows. `progress` reads the ops done.
void soak_loop(const RunParams& rp, const Setup& su, Producers& procs, const std::function<uint64_t()>& progress,
               const std::function<std::string()>& consumer_error, Outcome* out) {
  std::atomic<bool> end{false};
  std::atomic<bool> killer_failed{false};
  std::string killer_error;  // written by the killer before it sets killer_failed
  std::thread killer([&] {
    std::mt19937_64 rng(rp.seed * 7919 + 17);
    std::exponential_distribution<double> gap(1.0 / std::max(rp.kill_every_ms, 0.001));
    while (!end.load()) {
      const auto next = std::chrono::steady_clock::now() + std::chrono::microseconds(int64_t(gap(rng) * 1000));
      while (!end.load() && std::chrono::steady_clock::now() < next) std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (end.load()) break;
      if (!procs.kill_one(&killer_error)) {
        killer_failed.store(true, std::memory_order_release);
        break;
      }
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  const auto stop_at = t0 + std::chrono::microseconds(int64_t(rp.duration_s * 1e6));
  uint64_t last = progress();
  auto wstart = t0;
  while (std::chrono::steady_clock::now() < stop_at) {
    const auto wend = std::min(wstart + std::chrono::milliseconds(rp.window_ms), stop_at);
    std::this_thread::sleep_until(wend);
    const uint64_t now_ops = progress();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - wstart).count();
    if (secs > 0.5 * rp.window_ms / 1000.0) out->window_rates.push_back(double(now_ops - last) / secs / 1e6);
    last = now_ops;
    wstart = std::chrono::steady_clock::now();
    if (killer_failed.load(std::memory_order_acquire) || !consumer_error().empty()) break;
  }
  end.store(true);
  killer.join();
  st(&su.sh->stop, 1u);
  procs.stop_all();
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out->kills = procs.kills;
  out->restarts = procs.restarts;
  out->aimed = procs.aimed;
  if (!killer_error.empty()) out->error = killer_error;
  // Producers killed just before the end (or that did not exit) leave a batch in flight: resolve it
  // exactly as a successor process would.
  for (uint32_t p = 0; p < su.producers; ++p) recover(su, p);
}

// Per-producer totals from the logs, then lost / unsubmitted from the seen bits.
void settle(const Setup& su, SeenBits& seen, Tally& t, Outcome* out) {
  for (uint32_t p = 0; p < su.producers; ++p) {
    const ProducerLog& L = su.sh->log[p];
    out->submitted += L.committed;
    out->rolled_forward += L.rolled_forward;
    out->dropped += L.dropped;
    out->incarnations += L.incarnations;
    // Every submitted op must be marked: test_and_set on an unmarked bit means it never executed.
    for (uint64_t s = 0; s < L.committed; ++s)
      if (!seen.test_and_set(p, s)) {
        if (out->lost == 0) t.note("op (" + std::to_string(p) + ", " + std::to_string(s) + ") submitted, never executed");
        out->lost++;
      }
  }
  out->executed = t.executed.load();
  out->duplicated = t.duplicated.load();
  out->reordered = t.reordered.load();
  out->misdirected = t.misdirected.load();
  // executed counts distinct ops; those beyond what was submitted were never recorded as submitted.
  const uint64_t matched = out->submitted - out->lost;
  if (out->executed > matched) {
    out->unsubmitted = out->executed - matched;
    t.note(std::to_string(out->unsubmitted) + " ops executed that no producer recorded as submitted");
  }
}

// The producers' configuration for a run, with its zeroed shared block (freed by the caller).
std::unique_ptr<Setup> make_setup(const RunParams& rp, bool engine) {
  auto su = std::make_unique<Setup>();
  su->engine = engine;
  su->producers = rp.producers;
  su->queues = rp.queues;
  su->depth = rp.depth;
  su->max_batch = rp.max_batch;
  su->seed = rp.seed;
  su->inject = rp.inject;
  su->dwell_ns = rp.dwell_ns;
  su->parent = getpid();
  su->sh = static_cast<Shared*>(shm_alloc(sizeof(Shared)));
  std::memset(static_cast<void*>(su->sh), 0, sizeof(Shared));
  return su;
}

// Queue q's published position: the next WQE index (engine) or ticket (rings) its producer logged.
uint64_t published_of(const Setup& su, uint32_t q) { return su.sh->log[q % su.producers].queue_pos[q / su.producers]; }

// The first QP whose verified count is behind what its producer published, or -1 when none is.
int64_t first_unverified(const Setup& su) {
  for (uint32_t q = 0; q < su.queues; ++q)
    if (ld(&su.sh->credit[q]) < published_of(su, q)) return q;
  return -1;
}

// The run's error: the soak loop's own, else the drain's, else the engine's count against what the
// producers published, else the verifier's first finding.
void conclude(Outcome* out, const std::string& drain_error, const softnic::Counters& c, uint64_t published,
              Tally& tally) {
  if (out->error.empty()) out->error = drain_error;
  if (out->error.empty() && (c.errors != 0 || c.wqes != published))
    out->error = "engine executed " + std::to_string(c.wqes) + " WQEs with " + std::to_string(c.errors) +
                 " errors; producers published " + std::to_string(published);
  if (out->error.empty()) {
    std::lock_guard<std::mutex> g(tally.mu);
    out->error = tally.first_error;
  }
}

}  // namespace gicomm::soak
