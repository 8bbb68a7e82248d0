// soak: the reliability soak (docs/soak.md). Parameters: config/experiments/soak.yaml; the parts
// are in soak/ (producers, verifier, loop, targets).
//
// Producers are forked processes. Everything they write lives in MAP_SHARED memory: their durable
// progress log (ProducerLog), and the queues they write into:
//   target=engine: the softnic QPs' SQ ring, doorbell record and doorbell pages. The softnic has no
//     placement hook taking a caller's pointer, so after create_qp the parent re-maps those
//     page-aligned, page-sized allocations in place as MAP_SHARED (contents copied), and maps them
//     back private before the SoftNic frees them. The CQs, the engine state and the cpu engine stay
//     in the parent. Each op is an atomic fetch-add of tag(producer, seq) on a per-WQE-slot word.
//   target=rings: the mini-proxy rings (RingView: slots, head, done) are allocated MAP_SHARED by
//     us; producers use enqueue_tuned (one producer per ring); the WorkerPool (softnic backend,
//     cpu engine) runs in the parent. Each op is an inline 8-byte write of tag(producer, seq).
// A killer thread SIGKILLs a random producer at exponential intervals and restarts it at once;
// the new process first recovers from the log (roll forward what was published, drop what was not).
// The soak is a run of duration_s, not a loop of samples: --warmup and --iters do not apply.
#include <cstdio>

#include "soak/soak.h"

namespace gicomm::soak {

namespace {

std::vector<bench::Record> soak_point(bench::Run& run) {
  RunParams rp;
  const std::string target = run.param<std::string>("target");
  rp.engine = target == "engine";
  rp.duration_s = run.param<double>("duration_s");
  rp.producers = run.param<uint32_t>("producers");
  rp.queues = run.derived<uint32_t>(rp.engine ? "qps" : "rings", rp.producers);
  rp.workers = run.param<uint32_t>("workers");
  rp.depth = run.param<uint32_t>("depth");
  rp.max_batch = run.param<uint32_t>("max_batch");
  rp.engine_threads = run.param<uint32_t>("engine_threads");
  rp.kill_every_ms = run.param<double>("kill_every_ms");
  rp.seed = run.param<uint64_t>("seed");
  rp.aim = run.param<double>("aim");
  rp.dwell_ns = run.param<uint64_t>("dwell_ns");
  rp.window_ms = run.param<uint32_t>("window_ms");
  if (rp.queues < rp.producers || rp.queues > rp.producers * kMaxQueuesPerProducer)
    throw PointFailure("bad parameter: qps/rings must be in [producers, 16 * producers]");
  if (!rp.engine && rp.workers > rp.queues) throw PointFailure("bad parameter: workers must be <= rings");
  if (rp.max_batch > rp.depth) throw PointFailure("bad parameter: max_batch must be <= depth");
  // inject: a deliberate fault, to show the verifier catches it (never in the experiment config).
  const std::string inject = run.param<std::string>("inject");
  rp.inject = inject == "lose" ? 1 : inject == "duplicate" ? 2 : inject == "blind_recovery" ? 3 : 0;

  const Outcome out = rp.engine ? run_engine(rp, run.options.timeout_ms) : run_rings(rp, run.options.timeout_ms);
  const bool broken = out.lost || out.duplicated || out.reordered || out.misdirected || out.unsubmitted || !out.error.empty();
  std::string error;
  if (broken) {
    error = "soak invariant broken (target " + target + "): lost " + std::to_string(out.lost) + ", duplicated " +
            std::to_string(out.duplicated) + ", reordered " + std::to_string(out.reordered) + ", misdirected " +
            std::to_string(out.misdirected) + ", unsubmitted " + std::to_string(out.unsubmitted) + " of " +
            std::to_string(out.submitted) + " submitted ops; first: " + (out.error.empty() ? "-" : out.error);
  }
  std::vector<bench::Record> recs;
  auto add = [&](bench::Record r) {
    r.transport = rp.engine ? "softnic" : "mini-proxy";
    if (broken) {
      r.status = "failed";
      r.error = error;
    }
    recs.push_back(r);
  };
  auto count = [&](const char* metric, double v) { add(bench::Record::scalar(metric, "count", v)); };
  count("ops_total", double(out.submitted));
  count("executed", double(out.executed));
  count("lost", double(out.lost));
  count("duplicated", double(out.duplicated));
  count("reordered", double(out.reordered));
  count("misdirected", double(out.misdirected + out.unsubmitted));
  count("kills", double(out.kills));
  count("restarts", double(out.restarts));
  count("aimed_kills", double(out.aimed));
  count("recovered_forward", double(out.rolled_forward));
  count("recovered_dropped", double(out.dropped));
  add(bench::Record::scalar("elapsed_s", "s", out.seconds));
  if (!out.window_rates.empty()) {
    add(bench::Record::ok("msg_rate", "Mmsg/s", bench::compute_stats(out.window_rates)));
    recs.back().samples = out.window_rates;
  } else {
    add(bench::Record::scalar("msg_rate", "Mmsg/s", out.seconds > 0 ? double(out.executed) / out.seconds / 1e6 : 0));
  }
  std::fprintf(stderr,
               "[gicomm] soak %s: %.1f s, ops %llu, kills %llu, restarts %llu, lost %llu, duplicated %llu, reordered %llu%s%s\n",
               target.c_str(), out.seconds, static_cast<unsigned long long>(out.submitted),
               static_cast<unsigned long long>(out.kills), static_cast<unsigned long long>(out.restarts),
               static_cast<unsigned long long>(out.lost), static_cast<unsigned long long>(out.duplicated),
               static_cast<unsigned long long>(out.reordered), broken ? " FAILED: " : "", broken ? error.c_str() : "");
  return recs;
}

}  // namespace

GICOMM_EXPERIMENT(soak, soak_point);

}  // namespace gicomm::soak
