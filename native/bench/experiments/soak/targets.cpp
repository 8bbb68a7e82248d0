// The soak's two targets: the softnic's SQ rings written by producer processes (engine), and
// mini-proxy's rings drained by a worker pool (rings).
#include <chrono>

#include "gicomm/mlx5/host_post.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/softnic_backend.h"
#include "gicomm/softnic/softnic.h"
#include "soak/soak.h"

namespace gicomm::soak {

// ---- target=engine -------------------------------------------------------------------------------------
Outcome run_engine(const RunParams& rp, int timeout_ms) {
  Outcome out;
  auto su = make_setup(rp, true);
  const size_t words = size_t(rp.queues) * rp.depth;
  // Destination words (fetch-add targets) and fetched old values: parent memory only (the engine
  // and the verifier touch them; producers only name their addresses).
  std::vector<uint64_t> dst(words, 0), old(words, 0);
  softnic::SoftNic nic;
  const auto dmr = nic.register_mr(dst.data(), words * 8, softnic::kAccessRemoteAtomic | softnic::kAccessRemoteWrite);
  const auto omr = nic.register_mr(old.data(), words * 8, softnic::kAccessLocalWrite);
  su->dst_addr = dmr.addr;
  su->dst_key = dmr.rkey;
  su->old_addr = omr.addr;
  su->old_key = omr.lkey;
  softnic::QueueConfig qc;
  qc.sq_wqebbs = rp.depth;
  qc.cq_entries = rp.depth;  // every WQE signaled; at most depth outstanding (flow control by credit)
  SharedRegions shared;      // declared after nic: unshared before the SoftNic frees the queues
  for (uint32_t q = 0; q < rp.queues; ++q) {
    nic.create_qp(qc);
    su->sq[q] = nic.sq(q);
    shared.share(su->sq[q].buf, size_t(rp.depth) * mlx5::kSendWqeBB);
    shared.share(su->sq[q].dbrec, 64);
    shared.share(su->sq[q].doorbell, 64);
  }
  SeenBits seen(rp.producers);
  Tally tally;
  softnic::CpuEngine engine(nic, static_cast<int>(rp.engine_threads));
  engine.start();
  // Verifier: consumes every CQE, checks the executed op and frees its slot (credit) for the producer.
  std::atomic<bool> vstop{false};
  std::atomic<uint64_t> verified_total{0};
  std::vector<uint64_t> vpos(rp.queues, 0);
  std::thread verifier([&] {
    std::vector<mlx5::HostCq> cqs;
    for (uint32_t q = 0; q < rp.queues; ++q) cqs.emplace_back(nic.cq(q));
    std::vector<int64_t> last_seq(rp.queues, -1);
    uint32_t idle = 0;
    for (;;) {
      const bool stopping = vstop.load(std::memory_order_acquire);
      uint64_t got = 0;
      for (uint32_t q = 0; q < rp.queues; ++q) {
        mlx5::CqeFields c;
        while (cqs[q].poll(&c)) {
          ++got;
          if (c.opcode != mlx5::kCqeReq) {
            tally.misdirected++;
            tally.note("QP " + std::to_string(q) + ": error CQE, syndrome " + std::to_string(c.syndrome) +
                       " at WQE " + std::to_string(c.wqe_counter));
          }
          if (c.wqe_counter != static_cast<uint16_t>(vpos[q])) {
            tally.reordered++;
            tally.note("QP " + std::to_string(q) + ": CQE for WQE " + std::to_string(c.wqe_counter) + ", expected " +
                       std::to_string(static_cast<uint16_t>(vpos[q])));
          }
          const size_t i = size_t(q) * rp.depth + (vpos[q] & (rp.depth - 1));
          const uint64_t v = __atomic_load_n(&dst[i], __ATOMIC_ACQUIRE);
          const uint64_t was = __atomic_load_n(&old[i], __ATOMIC_ACQUIRE);
          if (v == 0) {
            // A completion with no effect: the op ran nowhere (counted lost in settle()).
            tally.note("QP " + std::to_string(q) + ": WQE " + std::to_string(vpos[q]) + " completed with no effect");
          } else {
            if (was != 0) {
              tally.duplicated++;
              tally.note("QP " + std::to_string(q) + ": slot held a value before its op ran");
            }
            account(tally, seen, q, q % rp.producers, v, &last_seq[q]);
          }
          dst[i] = 0;
          old[i] = 0;
          ++vpos[q];
          st(&su->sh->credit[q], vpos[q]);
          verified_total.fetch_add(1, std::memory_order_relaxed);
        }
      }
      if (got == 0) {
        if (stopping) break;
        if (++idle > 64) std::this_thread::yield();
      } else {
        idle = 0;
      }
    }
  });
  JoinGuard vguard{verifier, vstop};
  {
    Producers procs(*su, rp.seed, rp.aim);
    procs.start_all();
    soak_loop(rp, *su, procs, [&] { return verified_total.load(std::memory_order_relaxed); },
              [&] { std::lock_guard<std::mutex> g(tally.mu); return tally.first_error; }, &out);
  }
  // Drain: every published WQE must complete and be verified.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 5000));
  std::string drain_error;
  while (first_unverified(*su) >= 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      const int64_t q = first_unverified(*su);
      if (q >= 0)
        drain_error = "drain timed out: QP " + std::to_string(q) + " verified " + std::to_string(ld(&su->sh->credit[q])) +
                      " of " + std::to_string(published_of(*su, uint32_t(q))) + " published WQEs";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  vstop.store(true, std::memory_order_release);
  verifier.join();
  engine.stop();
  const softnic::Counters c = engine.counters();
  settle(*su, seen, tally, &out);
  uint64_t published = 0;
  for (uint32_t q = 0; q < rp.queues; ++q) published += published_of(*su, q);
  conclude(&out, drain_error, c, published, tally);
  shm_free(su->sh, sizeof(Shared));
  return out;
}

// ---- target=rings --------------------------------------------------------------------------------------
Outcome run_rings(const RunParams& rp, int timeout_ms) {
  Outcome out;
  auto su = make_setup(rp, false);
  const size_t slots_bytes = size_t(rp.queues) * rp.depth * sizeof(proxy::Desc);
  const size_t ctr_bytes = size_t(rp.queues) * sizeof(proxy::RingCounters);
  auto* slots = static_cast<proxy::Desc*>(shm_alloc(slots_bytes));
  auto* ctrs = static_cast<proxy::RingCounters*>(shm_alloc(ctr_bytes));
  std::vector<proxy::RingView> views(rp.queues);
  for (uint32_t r = 0; r < rp.queues; ++r) {
    views[r] = proxy::RingView{slots + size_t(r) * rp.depth, &ctrs[r].head, &ctrs[r].done, &ctrs[r].tail, rp.depth, r};
    su->ring[r] = views[r];
  }
  const size_t words = size_t(rp.queues) * rp.depth;
  std::vector<uint64_t> dst(words, 0);
  softnic::SoftNic nic;
  const auto dmr = nic.register_mr(dst.data(), words * 8, softnic::kAccessRemoteWrite);
  softnic::CpuEngine engine(nic, static_cast<int>(rp.engine_threads));
  engine.start();
  proxy::SoftnicTarget tgt;
  tgt.remote_addr = dmr.addr;
  tgt.rkey = dmr.rkey;
  tgt.sq_wqebbs = 256;
  SeenBits seen(rp.producers);
  Tally tally;
  RingCheck check;
  check.su = su.get();
  check.tally = &tally;
  check.seen = &seen;
  check.consumed.assign(rp.queues, 0);
  check.last_seq.assign(rp.queues, -1);
  check.shadow.assign(words, 0);
  const auto backend = make_checking_backend(proxy::make_softnic_backend(nic, tgt), &check);
  proxy::PoolConfig pc;
  pc.workers = rp.workers;
  pc.batch = 8;
  pc.numa_node = -1;
  pc.yield_when_idle = true;
  pc.stall_timeout_ns = uint64_t(std::max(timeout_ms, 5000)) * 1000000ull;
  std::string err;
  auto pool = proxy::WorkerPool::create(pc, views, *backend, nullptr, &err);
  if (!pool) throw PointFailure("worker pool: " + err);
  if (!pool->start(false, &err)) throw PointFailure("worker pool start: " + err);
  {
    Producers procs(*su, rp.seed, rp.aim);
    procs.start_all();
    soak_loop(rp, *su, procs, [&] { return check.retired.load(std::memory_order_relaxed); },
              [&] { return pool->failed() ? pool->error() : std::string(); }, &out);
  }
  std::vector<uint64_t> expected(rp.queues);
  uint64_t published = 0;
  for (uint32_t r = 0; r < rp.queues; ++r) {
    expected[r] = published_of(*su, r);
    published += expected[r];
  }
  std::string drain_error;
  if (!pool->stop(&expected, uint64_t(std::max(timeout_ms, 5000)) * 1000000ull, &drain_error) && drain_error.empty())
    drain_error = "worker pool drain failed";
  if (pool->failed() && drain_error.empty()) drain_error = pool->error();
  engine.stop();
  const softnic::Counters c = engine.counters();
  // Destinations: each ring's last lap of slots holds the value of the ticket posted there.
  uint64_t dest_bad = 0;
  for (uint32_t r = 0; r < rp.queues; ++r)
    for (uint32_t i = 0; i < rp.depth; ++i) {
      const size_t w = size_t(r) * rp.depth + i;
      if (dst[w] != check.shadow[w]) {
        if (dest_bad++ == 0)
          tally.note("ring " + std::to_string(r) + " slot " + std::to_string(i) + ": destination holds " +
                     std::to_string(dst[w]) + ", last posted " + std::to_string(check.shadow[w]));
      }
    }
  tally.misdirected += dest_bad;
  settle(*su, seen, tally, &out);
  conclude(&out, drain_error, c, published, tally);
  pool.reset();
  shm_free(slots, slots_bytes);
  shm_free(ctrs, ctr_bytes);
  shm_free(su->sh, sizeof(Shared));
  return out;
}

}  // namespace gicomm::soak
