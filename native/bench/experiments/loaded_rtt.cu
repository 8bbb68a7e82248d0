// loaded_rtt (and proxy_loaded_probe, which takes its parameters): the round trip of one small
// message while background CTAs stream bulk puts (paper Fig 6 / Table 11, and Fig 7's loaded
// private probe). Parameters: config/experiments/loaded_rtt.yaml; the kernels and their runs:
// loaded_rtt_gda.cu (mini-gda), loaded_rtt_proxy.cu (mini-proxy).
//
// One kernel on GPU 0, all blocks co-resident (2 + bulk_ctas <= the SM count), one active thread
// per block:
//   block 0, the probe: once every bulk CTA runs and settle_us have passed, it does warmup + iters
//            exchanges, one at a time:
//              probe=pingpong    put the 8-byte value i into the ping word; the responder sees it
//                                and puts i into the pong word through its own QP; the probe polls
//                                the pong word. rtt_ns = put -> both directions through the NIC.
//              probe=completion  put the 8-byte value i, then wait for its completion (quiet of
//                                the QP used). completion_ns.
//            Then it raises the stop phase.
//   block 1, the responder (pingpong only): polls the ping word, answers on QP 1 (always its own).
//   blocks 2.., bulk CTAs: inline 8-byte puts, `batch` WQEs per doorbell, as fast as the queue
//            takes them (pace_mmsgs 0) or paced to pace_mmsgs million messages per second in total
//            (each CTA spaces its batches on %globaltimer).
// Queues (mini-gda on a softnic session):
//   queue=reserved  the probe owns QP 0 (ThreadQp); each bulk CTA owns its own QP.
//   queue=shared    the probe and every bulk CTA submit to QP 0 with the shared-QP hand-off
//                   (atomic reservation, in-order doorbells): the probe's WQE waits behind the
//                   bulk WQEs reserved before it, as on one library context.
// mini-proxy (transport=mini-proxy, nic_backend softnic-cpu: the workers post to the softnic's cpu
// engine): ring 0 carries the probe's pings, ring 1 the responder's pongs (tuned enqueue, one
// producer each). queue=shared: every bulk CTA also enqueues on ring 0 (multi-producer baseline
// enqueue, the probe too), so a ping waits behind the bulk descriptors before it in one FIFO.
// queue=reserved: bulk CTAs enqueue on rings 2.. (baseline; CTA k on ring 2 + k % (rings - 2)),
// the probe keeps ring 0 to itself. bulk_enqueue=tuned (reserved only): bulk CTA k is the only
// producer of ring 2 + k (rings = 2 + bulk_ctas) and uses the tuned single-store enqueue, so the
// CTAs can offer more than the workers carry (the paper's Fig 7 loaded private probe). Workers:
// ring r belongs to worker r % workers, so the probe's ring can share its worker with bulk rings
// (workers param). `batch` is the workers' chaining.
// Load carried: each bulk CTA counts its puts between the moment it sees the probe's measuring
// phase and the stop phase, over the %globaltimer time between the two; bulk_msg_rate is the sum
// over CTAs (Mmsg/s, in the same record set as the RTT). After the kernel every QP is drained and
// the engine must have executed exactly the WQEs posted (probe, responder, bulk) with no error CQE.
// bulk_msg_rate counts the descriptors (WQEs) the queues accepted, not those the workers (engine)
// completed; the two differ by at most the change in what the queues hold over the window
// (mini-proxy: 1024 slots per ring), and the accepted count equals the carried one once the queues
// are full. The mini-proxy bulk loop must not read host memory per descriptor: until 45fbcfd every
// bulk CTA read the host-resident failure word before each enqueue, and those PCIe reads capped
// what all CTAs together offered at about 1 Mmsg/s whatever bulk_ctas was, so the reserved probe
// was measured beside a load far lighter than the point names. The h200x1-pipeline archive's
// loaded_rtt records were measured before that fix (reserved, 16 and 64 CTAs: ~1.0 Mmsg/s, RTT p50
// 4.4-5.2 us); the same device code since then carries ~5.3 and ~18 Mmsg/s there (H200, SM 1980
// MHz; 5.1-5.2 and 15-16 on the H200x2 at 45fbcfd) and the probe's RTT grows with it, since ring 0
// shares worker 0 with the even-numbered bulk rings. queue=shared is unaffected: its one
// multi-producer ring serializes the enqueues and carries ~1 Mmsg/s either way.
//
// --iters measured exchanges (<= 100000), --warmup unrecorded ones before them.
// Metrics: rtt_ns or completion_ns (p50/p99 ...), bulk_msg_rate (Mmsg/s), probe_msg_rate (Mmsg/s).
#include <algorithm>

#include "harness/responder.h"
#include "harness/two_rank.h"
#include "loaded_rtt.cuh"

namespace gicomm::bench::loaded_rtt {
namespace {

std::vector<Record> records_of(const RttRun& run, bool pingpong, uint32_t iters) {
  double rate = 0;  // msgs per ns summed over CTAs
  for (const BulkStat& b : run.bulk)
    if (b.win_ns) rate += double(b.win_posted) / double(b.win_ns);
  const double mhz = sm_clock_mhz(run.clock);
  if (mhz <= 0) throw PointFailure("SM clock measurement failed (zero elapsed globaltimer)");
  std::vector<double> ns;
  for (uint32_t c : run.cycles) ns.push_back(double(c) * 1000.0 / mhz);
  std::vector<Record> out;
  out.push_back(Record::ok(pingpong ? "rtt_ns" : "completion_ns", "ns", compute_stats(ns)));
  out.push_back(Record::scalar("bulk_msg_rate", "Mmsg/s", rate * 1000.0));
  const double window_ns = double(run.clock.t1 - run.clock.t0);
  out.push_back(Record::scalar("probe_msg_rate", "Mmsg/s", window_ns > 0 ? double(iters) * 1000.0 / window_ns : 0.0));
  for (Record& r : out) r.sm_clock_mhz = mhz;
  return out;
}

std::vector<Record> loaded_rtt(Run& run) {
  const bool proxy = *run.transport == Transport::mini_proxy;
  RttConfig c;
  c.nic = run.nic();
  c.shared = run.param<std::string>("queue") == "shared";
  c.pingpong = run.param<std::string>("probe") == "pingpong";
  c.bulk_tuned = run.param<std::string>("bulk_enqueue") == "tuned";
  c.bulk_ctas = run.param<uint32_t>("bulk_ctas");
  c.pace = run.param<double>("pace_mmsgs");
  c.batch = run.param<uint32_t>("batch");
  c.settle_us = run.param<long long>("settle_us");
  c.sq_wqebbs = run.param<long long>("sq_wqebbs");
  c.workers = run.param<uint32_t>("workers");
  c.rings = run.derived<uint32_t>("rings", std::min<uint32_t>(32, 2 + std::max<uint32_t>(1, c.bulk_ctas)));
  auto bad = [](const std::string& m) { throw PointFailure("bad parameter: " + m); };
  if (proxy && c.nic != NicBackend::softnic_cpu && c.nic != NicBackend::verbs)
    bad(std::string("mini-proxy workers post to nic_backend softnic-cpu or verbs, got ") + name_of(c.nic));
  if (c.bulk_tuned && (!proxy || c.shared))
    bad("bulk_enqueue=tuned needs transport mini-proxy and queue reserved (one producer per ring)");
  if (c.bulk_tuned && c.rings != 2 + std::max<uint32_t>(1, c.bulk_ctas))
    bad("bulk_enqueue=tuned gives each bulk CTA its own ring: rings must be 2 + bulk_ctas (bulk_ctas <= 30), got rings " +
        std::to_string(c.rings) + " for bulk_ctas " + std::to_string(c.bulk_ctas));
  if (c.rings < c.workers) bad("rings must be in max(3, workers)..32");
  if (run.iters() > 100000) bad("--iters must be <= 100000 here");
  // Between two ranks the bulk traffic and the probe cross a NIC: mini-proxy's verbs backend does
  // (the probe answered by rank 1's responder).
  if (c.nic != NicBackend::verbs)
    refuse_two_ranks(run, std::string("the loaded round trip on nic_backend ") + name_of(c.nic),
                     "an RDMA backend for the bulk traffic to the peer and the probe's round trip through rank 1's "
                     "responder (transport mini-proxy with nic_backend verbs has both; the software NIC's "
                     "backends are one process's)");
  // Two ranks: the probe's answers come from rank 1's responder, the one the point names.
  c.peer_pong = proxy && c.nic == NicBackend::verbs && c.pingpong && two_ranks();
  const std::string responder = ask_responder(run, c.peer_pong, &c.ask);
  if (gpu_count() < 1) throw HardwareMissing("no CUDA device: gicomm-bench-loaded-rtt needs a GPU");
  GICOMM_CUDA(cudaSetDevice(0));
  int sms = 0;
  GICOMM_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // The probe, the responder and every bulk CTA spin on each other: all must be resident at once.
  if (2 + int(c.bulk_ctas) > sms) bad("2 + bulk_ctas must fit the GPU's " + std::to_string(sms) + " SMs (all blocks co-resident)");
  const RttRun r = proxy ? run_proxy(c, run) : run_gda(c, run);
  std::vector<Record> out = records_of(r, c.pingpong, static_cast<uint32_t>(std::max(1, run.iters())));
  if (c.peer_pong) {
    Params params = run.point.params;
    params.set("responder", responder);
    for (Record& rec : out) rec.params = params;
  }
  return out;
}

}  // namespace

GICOMM_EXPERIMENT(loaded_rtt, loaded_rtt);
GICOMM_EXPERIMENT(proxy_loaded_probe, loaded_rtt);
// Rank 1's half between two ranks: the probe's answers (harness/responder.h).
GICOMM_EXPERIMENT_SERVE(loaded_rtt, round_trip_responder);
GICOMM_EXPERIMENT_SERVE(proxy_loaded_probe, round_trip_responder);

}  // namespace gicomm::bench::loaded_rtt
