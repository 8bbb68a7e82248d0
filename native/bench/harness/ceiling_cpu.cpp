// The cpu engine's ceiling for one WQE shape (harness/engine_ceiling.h describes the method): host
// memory only, so it runs everywhere. Registers itself as the cpu engine's measurer.
//
// Method steady (every driver's hook): the engine threads run where a mini-proxy run puts them
// (proxy::cpu_engine_cpus, the placement ProxyRig gives its engine) and the thread that writes
// the WQEs and polls the CQs where the pool's first worker runs; one WQE in plan.signal_every is
// signaled (a worker's chain); a round's rate is the WQEs the engine executed between a quarter
// and three quarters of the round (its own count, read at most once a microsecond) over that
// time, so neither the engine's pickup of the doorbells nor the tail where one QP finishes alone
// is in it; the ceiling is the best round (interference only ever slows a round). Method window: the measurement before this one (kept to compare with):
// unpinned, every WQE signaled, doorbell to last CQE, the median round.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "gicomm/mlx5/host_post.h"
#include "gicomm/proxy/pool.h"
#include "gicomm/proxy/topology.h"
#include "gicomm/softnic/softnic.h"
#include "harness/engine_ceiling.h"
#include "harness/errors.h"

namespace gicomm::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Runs `fn` on a thread pinned to `cpu` (or unpinned for -1) and rethrows what it threw, so the
// caller's own placement is left alone.
template <class Fn>
void run_on_cpu(int cpu, Fn fn) {
  std::exception_ptr error;
  std::string pin_error;
  std::thread t([&] {
    if (cpu >= 0 && !proxy::pin_this_thread(cpu, &pin_error)) return;
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (!pin_error.empty()) throw PointFailure("engine ceiling: the polling thread: " + pin_error);
  if (error) std::rethrow_exception(error);
}

CeilingSamples measure_cpu(const EngineShape& shape, const CeilingPlan& plan) {
  const uint32_t qps = shape.qps, bytes = shape.bytes;
  const uint32_t nbb = wqebbs_per_wqe(shape);
  check_plan(plan, nbb);
  if (qps < 1 || qps > softnic::SoftNic::kMaxQps)
    throw PointFailure("bad parameter: engine ceiling: qps must be in 1.." + std::to_string(softnic::SoftNic::kMaxQps) +
                       ", not " + std::to_string(qps));
  const bool steady = plan.method == CeilingMethod::steady;
  const uint32_t depth = plan.depth, slot = (bytes + 63) / 64 * 64;
  const uint32_t signal_every = steady ? plan.signal_every : 1;
  // Steady: the engine's progress read at most once a microsecond, so the polling thread takes
  // the counters' lines from the engine threads rarely.
  const auto poll_gap = std::chrono::nanoseconds(1000);
  uint32_t ring = 64;
  while (ring < depth * nbb) ring <<= 1;
  // Destination slots wrap within 64 MiB; each QP's last WQE writes a check slot of its own.
  const uint32_t dst_slots = static_cast<uint32_t>(
      std::max<uint64_t>(1, std::min<uint64_t>(uint64_t(qps) * depth, (uint64_t(64) << 20) / slot)));
  const uint32_t src_slots = std::min<uint32_t>(depth, 64);
  std::vector<uint8_t> dst(size_t(dst_slots + qps) * slot, 0xee), src(size_t(src_slots) * slot);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>((i * 131u + (i >> 8) * 7u + 1u) & 0xff);
  softnic::SoftNic nic;
  const auto dmr = nic.register_mr(dst.data(), dst.size(), softnic::kAccessRemoteWrite);
  const auto smr = nic.register_mr(src.data(), src.size(), 0);
  softnic::QueueConfig qc;
  qc.sq_wqebbs = ring;
  qc.collapsed_cq = true;
  qc.cq_entries = 1;
  std::vector<mlx5::HostSq> sqs;
  for (uint32_t q = 0; q < qps; ++q) sqs.emplace_back(nic.sq(nic.create_qp(qc)));
  const uint32_t threads = std::max(1u, shape.engine_threads);
  CeilingSamples out;
  out.best_round = steady;
  if (steady) {  // a mini-proxy run's placement: the polling thread stands in for its worker 0
    const proxy::PoolConfig pool;  // the pool's placement (ProxyRigSpec: node 0)
    out.engine_cpus = proxy::engine_cpus_beside(pool, threads);
    const std::vector<int> allowed = proxy::allowed_cpus();
    out.poller_cpu = proxy::worker_cpu(pool, 0);
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), out.poller_cpu) == allowed.end())
      out.poller_cpu = -1;  // not ours to run on (a cpuset): unpinned, and the driver's line says so
    // Fewer cpus than engine threads and the polling thread: an engine thread runs only when the
    // scheduler takes the cpu from another, in slices longer than a round, so no round has a
    // middle to see. A round of a few hundred WQEs lasts a few microseconds: its middle is not
    // seen either. Both time whole rounds, and say so.
    if (!allowed.empty() && allowed.size() < threads + 1)
      out.whole_rounds = "fewer cpus than engine threads and the polling thread";
    else if (uint64_t(qps) * depth < kSteadyMinWqes)
      out.whole_rounds = "rounds of fewer than " + std::to_string(kSteadyMinWqes) + " WQEs";
  }
  const bool middle = steady && out.whole_rounds.empty();
  softnic::CpuEngine engine(nic, static_cast<int>(threads), out.engine_cpus);
  engine.start();
  const uint64_t total = uint64_t(qps) * depth;
  // A quarter and three quarters of the round's WQEs (steady); the whole round (window).
  const uint64_t lo = middle ? total / 4 : 0, hi = middle ? total - total / 4 : total;

  // One round; false when a timed round's middle half was not seen while the engine ran (the
  // polling thread was off its cpu across a quarter or three quarters of the round).
  auto one_round = [&](bool timed) -> bool {
    std::vector<uint32_t> base(qps);
    for (uint32_t q = 0; q < qps; ++q) {  // the round's WQEs, written before the clock starts
      base[q] = sqs[q].pi();
      mlx5::WqeImage img;
      for (uint32_t i = 0; i < depth; ++i) {
        const mlx5::WqeHeader h = sqs[q].header((i + 1) % signal_every == 0 || i + 1 == depth);
        const uint64_t d = i + 1 == depth ? uint64_t(dst_slots) + q : (uint64_t(q) * depth + i) % dst_slots;
        const uint64_t raddr = dmr.addr + d * slot;
        const uint64_t s = smr.addr + uint64_t(i % src_slots) * slot;
        uint32_t ds;
        if (shape.inline_payload && bytes == 8) {
          uint64_t v;
          std::memcpy(&v, reinterpret_cast<const void*>(s), 8);
          ds = mlx5::build_rdma_write_inline_u64(img, h, raddr, dmr.rkey, v);
        } else if (shape.inline_payload) {
          ds = mlx5::build_rdma_write_inline(img, h, raddr, dmr.rkey, reinterpret_cast<const void*>(s), bytes);
        } else {
          ds = mlx5::build_rdma_write(img, h, raddr, dmr.rkey, s, smr.lkey, bytes);
        }
        if (ds == 0) throw PointFailure("engine ceiling: an inline payload of " + std::to_string(bytes) + " B does not fit a WQE");
        sqs[q].push(img, ds);
      }
    }
    const uint64_t executed_before = engine.executed();  // the engine is idle between rounds
    const auto t0 = Clock::now();
    for (uint32_t q = 0; q < qps; ++q) sqs[q].ring();
    const auto deadline = t0 + std::chrono::milliseconds(plan.timeout_ms);
    Clock::time_point t_lo = t0, t_hi = t0;
    uint64_t c_lo = 0, c_hi = total;
    if (middle) {
      // Progress is the engine's own count of executed WQEs (one read per engine thread, exact),
      // taken at most once a microsecond.
      bool have_lo = false;
      for (;;) {
        const auto a = Clock::now();
        const uint64_t n = engine.executed() - executed_before;
        const auto b = Clock::now();
        const auto at = a + (b - a) / 2;
        if (!have_lo && n >= lo) have_lo = true, t_lo = at, c_lo = n;
        if (n >= hi) {
          t_hi = at, c_hi = n;
          break;
        }
        if (b > deadline) break;  // the wait below names the QP
        while (Clock::now() < b + poll_gap) {
        }
      }
    }
    // Every QP's last WQE completed: the round is over (method window and whole rounds: the clock
    // stops here), and the next one starts on an idle engine.
    for (uint32_t q = 0; q < qps; ++q) {
      const uint16_t last = static_cast<uint16_t>(base[q] + (depth - 1) * nbb);
      for (;;) {
        const uint32_t tail = __atomic_load_n(&nic.cq(q).buf[0].w[15], __ATOMIC_ACQUIRE);
        const uint8_t op = mlx5::op_own_opcode(mlx5::tail_op_own(tail));
        if (op == mlx5::kCqeReqErr) throw PointFailure("engine ceiling: QP " + std::to_string(q) + ": error CQE");
        if (op == mlx5::kCqeReq && mlx5::tail_wqe_counter(tail) == last) break;
        if (Clock::now() > deadline)
          throw PointFailure("engine ceiling: QP " + std::to_string(q) + ": no CQE for WQE " + std::to_string(last) +
                             " within " + std::to_string(plan.timeout_ms) + " ms (last seen " +
                             std::to_string(mlx5::tail_wqe_counter(tail)) + ")");
        if (steady && !middle) std::this_thread::yield();  // an engine thread may share this cpu
      }
    }
    if (!middle) t_hi = Clock::now();
    if (!timed) return true;
    const double secs = std::chrono::duration<double>(t_hi - t_lo).count();
    // Steady: both ends of the clock inside the engine's run (some WQEs done, some left), else the
    // time holds an idle stretch or the round's start.
    if (middle && (c_hi >= total || c_hi <= c_lo || secs <= 0)) return false;
    out.wqe_rate_mps.push_back(double(c_hi - c_lo) / secs / 1e6);
    out.timed.push_back({c_lo, c_hi, total});
    return true;
  };
  int ran = 0;
  run_on_cpu(out.poller_cpu, [&] {
    for (int r = 0; r < plan.warmup; ++r, ++ran) one_round(false);
    // A round the polling thread missed (it lost its cpu) is run again, a bounded number of times.
    int missed = 0;
    while (static_cast<int>(out.wqe_rate_mps.size()) < plan.rounds) {
      ++ran;
      if (!one_round(true) && ++missed > 4 * plan.rounds + 8)
        throw PointFailure("engine ceiling: the polling thread saw the middle half of only " +
                           std::to_string(out.wqe_rate_mps.size()) + " of " + std::to_string(ran - plan.warmup) +
                           " rounds of " + std::to_string(total) + " WQEs (a busy host, or rounds too short: raise depth)");
    }
  });
  const int rounds = ran;
  engine.stop();
  const softnic::Counters c = engine.counters();
  const uint64_t expected = total * rounds;
  if (c.errors || c.wqes != expected)
    throw PointFailure("engine ceiling: the cpu engine executed " + std::to_string(c.wqes) + " WQEs with " +
                       std::to_string(c.errors) + " errors, expected " + std::to_string(expected));
  const uint8_t* want = src.data() + size_t((depth - 1) % src_slots) * slot;
  for (uint32_t q = 0; q < qps; ++q) {
    const uint8_t* got = dst.data() + size_t(dst_slots + q) * slot;
    bool ok = std::equal(want, want + bytes, got);
    for (uint32_t b = bytes; b < slot; ++b) ok = ok && got[b] == 0xee;
    if (!ok) throw PointFailure("engine ceiling: QP " + std::to_string(q) + ": the last WQE's destination does not hold its payload");
  }
  return out;
}

const CeilingMeasurerRegistration registration(EngineKind::cpu, measure_cpu);

}  // namespace

}  // namespace gicomm::bench
