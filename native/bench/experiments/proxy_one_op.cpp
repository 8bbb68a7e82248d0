// proxy_one_op, proxy_msg_rate, proxy_worker_ceiling: mini-proxy's GPU producers -> host rings ->
// pinned CPU workers -> the point's NIC backend (softnic-cpu, none, verbs). One measurement, three
// sweeps; the parameters are declared in config/experiments/proxy_one_op.yaml. Modes:
//   issue:    one GPU thread, one ring, at most one request outstanding. Per operation: the enqueue
//             cost (issue_ns, the clock reads around the whole enqueue call: paper-comparable) and
//             the round trip GPU -> ring -> worker -> NIC -> CQE -> worker -> completion counter ->
//             GPU (completion_ns, the paper's put+completion). --warmup untimed ops (warm state
//             only), then --iters timed ones, in one launch; with the tuned enqueue, then --iters
//             more whose clock reads bracket the 16-byte store alone (issue_store_ns: timed as the
//             floor of a single 16 B store is, comparable with it).
//   pingpong: two GPU threads, rings 0 and 1: ping writes a word through the proxy, pong polls it
//             in the destination (host memory), answers through the proxy, ping polls the answer;
//             rtt_ns per exchange (the paper's RTT, both directions through the proxy).
//   rate:     one GPU producer per ring sends `msgs` requests, then waits for their completion;
//             msg_rate = rings * msgs / (last completion seen - first enqueue), Mmsg/s, per launch
//             (`reps` launches; --iters and --warmup do not apply).
// cold: workers parked (sleeping, cores idle) for idle_ms before each measured launch, no warm-up;
// warm: workers spinning and warm_ms of sustained load before measuring. Completion counters are
// host-resident (polled over PCIe) or GPU-resident (the worker writes them with
// cuStreamWriteValue64: proxy/gpu_completion.h). After every point: the rings drained, the workers
// consumed what the producers sent, and every destination word holds the value of the last
// request aimed at it. Records carry the workers' CPUs and clocks (proxy/workers.h).
#include <algorithm>
#include <chrono>
#include <memory>
#include <sstream>
#include <thread>

#include "harness/cuda.h"
#include "harness/floor.h"
#include "harness/harness.h"
#include "harness/proxy_rig.h"
#include "harness/responder.h"
#include "harness/two_rank.h"
#include "proxy/workers.h"
#include "proxy/gpu_completion.h"
#include "proxy/producers.h"

namespace gicomm::bench {

namespace {

namespace pb = gicomm::proxy_bench;

struct Config {
  std::string mode, enqueue, completion, state, store;
  uint32_t workers, rings, batch, capacity, window, nic_threads, reps, idle_ms, warm_ms;
  int numa_node;
  uint64_t msgs;
};

Config parse(const Run& run) {
  Config c;
  c.mode = run.param<std::string>("mode");
  c.enqueue = run.param<std::string>("enqueue");
  c.completion = run.param<std::string>("completion");
  c.state = run.param<std::string>("state");
  c.store = run.param<std::string>("store");
  c.workers = run.param<uint32_t>("workers");
  c.rings = run.derived<uint32_t>("rings", c.mode == "pingpong" ? 2 : c.workers);
  c.batch = run.param<uint32_t>("batch");
  c.capacity = run.param<uint32_t>("capacity");
  c.window = run.param<uint32_t>("window");
  c.nic_threads = run.derived<uint32_t>("nic_threads", c.workers);
  c.reps = run.param<uint32_t>("reps");
  c.idle_ms = run.param<uint32_t>("idle_ms");
  c.warm_ms = run.param<uint32_t>("warm_ms");
  c.numa_node = run.param<int>("numa_node");
  c.msgs = run.param<uint64_t>("msgs");
  auto bad = [](const std::string& m) { throw PointFailure("bad parameter: " + m); };
  if (c.mode == "issue" && (c.rings != 1 || c.workers != 1)) bad("issue mode uses one ring and one worker");
  if (c.mode == "pingpong" && (c.rings != 2 || c.workers > 2)) bad("pingpong mode uses two rings and 1 or 2 workers");
  if (uint64_t(c.window) * c.rings > proxy::kInfoSlotMask) bad("window must be a power of two and window * rings < 2^24");
  if (c.store != "sys" && c.enqueue != "tuned") bad("store applies to the tuned enqueue only");
  // workers/batch/rings/capacity against each other: WorkerPool::create, with its own messages.
  return c;
}

std::string describe_wait_error(const pb::DeviceError& e) {
  std::ostringstream m;
  if (e.what == proxy::kWaitRingFull)
    m << "ring " << e.ring << " full at op " << e.op << ": consumer head " << e.seen << ", needed >= " << e.expected;
  else if (e.what == pb::kWaitPayload)
    m << "ring " << e.ring << " answer wait timed out at op " << e.op << ": the word holds " << e.seen
      << ", expected " << e.expected << " (this rank saw no answer)";
  else
    m << "ring " << e.ring << " completion wait timed out at op " << e.op << ": done " << e.seen << ", expected "
      << e.expected;
  return m.str();
}

std::vector<Record> measure(Run& run) {
  const Config c = parse(run);
  const NicBackend nic = run.nic();
  run.rdma_provider = require_proxy_backend(nic);
  // Between two ranks the pong is rank 1's: its responder (harness/responder.h, registered below;
  // a host thread, or with `responder: gpu` a GPU thread as the one-process pong) polls ring 0's
  // words where the pings land and answers through its own worker and QP into ring 1's words here;
  // this GPU runs the ping alone.
  const bool peer_pong = c.mode == "pingpong" && nic == NicBackend::verbs && two_ranks();
  // `responder` (host or gpu) picks what answers on rank 1; the GPU one enqueues as this point's
  // producers do (its `enqueue` and `store`), as the one-process pong does.
  net::Message ask;
  const std::string responder = ask_responder(run, peer_pong, &ask);
  if (peer_pong && responder == kGpuPongResponderKind) {
    ask.set("enqueue", c.enqueue);
    ask.set("store", c.store);
  }
  if (gpu_count() == 0) throw HardwareMissing("no CUDA device: gicomm-bench-proxy needs a GPU producer");
  if (cudaSetDevice(0) != cudaSuccess) throw HardwareMissing("cannot use CUDA device 0");
  const bool issue = c.mode != "rate";  // issue and pingpong: one op outstanding, per-op samples
  const bool pingpong = c.mode == "pingpong";
  const uint64_t timeout_ns = run.timeout_ns();

  // Rings and counters in mapped host memory (the rig); GPU-resident counters and stamps here.
  MappedBuffer<pb::DeviceError> derr(1);
  DeviceBuffer<uint64_t> gpu_done(c.rings), t0(c.rings), t1(c.rings);
  DeviceBuffer<long long> c0(c.rings), c1(c.rings);
  DeviceBuffer<proxy::TunedProducer> tuned_state(c.rings);
  DeviceBuffer<uint32_t> issue_cyc(issue ? run.iters() : 0), rtt_cyc(issue ? run.iters() : 0);
  const bool store_timed = issue && !pingpong && c.enqueue == "tuned";
  DeviceBuffer<uint32_t> store_cyc(store_timed ? run.iters() : 0);
  MappedBuffer<uint64_t> remote(size_t(c.rings) * c.window);  // mapped: pingpong polls it
  std::vector<uint64_t> local(512, 0);
  std::unique_ptr<pb::StreamWritePublisher> gpu_pub;
  std::string err;
  if (c.completion == "gpu") {
    gpu_pub = std::make_unique<pb::StreamWritePublisher>(0, gpu_done.p, c.workers);
    if (!gpu_pub->ok(&err)) throw PointFailure("GPU-resident completion: " + err);
  }
  ProxyRigSpec spec;
  spec.rings = c.rings;
  spec.capacity = c.capacity;
  spec.workers = c.workers;
  spec.batch = c.batch;
  spec.numa_node = c.numa_node;
  spec.engine_threads = c.nic_threads;
  spec.publisher = gpu_pub.get();
  spec.timeout_ns = timeout_ns;
  if (peer_pong) spec.fetch_bytes = size_t(c.window) * 8;  // ring 0's words land at rank 1; ring 1's here
  ProxyRig rig(spec);
  rig.start(nic, {remote.p, remote.n * 8}, {local.data(), local.size() * 8}, /*parked=*/true);
  if (peer_pong) {
    ask.set("scheme", "proxy-pingpong");
    ask.set_u64("window", c.window);
    // It waits for the next ping at most this long: the point's timeout, plus a cold point's idle time.
    ask.set_u64("wait_ms", uint64_t(run.options.timeout_ms) + c.idle_ms);
    start_peer_responder(run, ask);
  }

  pb::ProducerArgs args{};
  for (uint32_t r = 0; r < c.rings; ++r) {
    args.rings[r] = rig.device_views[r];
    if (c.completion == "gpu") args.rings[r].done = gpu_done.p + r;  // the worker writes it (stream memop)
  }
  const Stream stream;
  args.tuned = tuned_state.p;
  args.nrings = c.rings;
  args.tuned_mode = c.enqueue == "tuned" ? 1 : 0;
  args.store_scope = store_scope_of(c.store);
  args.window = c.window;
  args.timeout_ns = timeout_ns;
  args.t_start = t0.p;
  args.t_end = t1.p;
  args.c_start = c0.p;
  args.c_end = c1.p;
  args.issue_cycles = issue_cyc.p;
  args.rtt_cycles = rtt_cyc.p;
  args.err = derr.d;
  args.remote = remote.d;
  uint64_t base = 0;  // tickets per used ring so far
  const double launch_limit_s = 60.0 + double(run.options.timeout_ms) / 1000.0 * 4;

  auto launch = [&](uint64_t msgs, uint64_t warmup) {
    args.msgs = msgs;
    args.warmup = warmup;
    args.base = base;
    GICOMM_CUDA(pingpong ? pb::launch_pingpong(args, stream.s, peer_pong)
                         : issue ? pb::launch_issue(args, stream.s) : pb::launch_rate(args, stream.s));
    wait_stream(stream.s, launch_limit_s, 100);
    base += msgs + warmup + (args.store_cycles != nullptr ? msgs : 0);
    if (derr.p->flag) {
      rig.pool->stop(nullptr, timeout_ns, &err);
      throw PointFailure(describe_wait_error(*derr.p) + (rig.worker_error().empty() ? "" : "; worker: " + rig.worker_error()));
    }
    if (rig.worker_failed()) throw PointFailure("worker: " + rig.worker_error());
  };
  auto sustain = [&](uint32_t ms) {  // warm: sustained load on the workers before measuring
    rig.pool->unpark();
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    do launch(issue ? 2000 : std::min<uint64_t>(c.msgs, 5000), 0);
    while (std::chrono::steady_clock::now() < until);
  };
  auto go_cold = [&]() {  // cold: workers asleep, their cores idle, then woken right before the launch
    rig.pool->park();
    std::this_thread::sleep_for(std::chrono::milliseconds(c.idle_ms));
    rig.pool->unpark();
  };
  auto sm_mhz_of = [&](uint32_t r) {
    const auto ts = t0.read(), te = t1.read();
    const auto cs = c0.read(), ce = c1.read();
    const double ns = double(te[r] - ts[r]);
    return ns > 0 ? double(ce[r] - cs[r]) * 1000.0 / ns : 0.0;
  };

  pb::CpuClock clk;
  double sm_mhz = 0;
  std::vector<double> rates, sm_samples, issue_ns, rtt_ns, store_ns;
  if (c.state == "warm") sustain(c.warm_ms);
  if (issue) {
    if (c.state == "cold") go_cold();
    clk = pb::read_worker_clocks(rig.pool->worker_cpus());
    args.store_cycles = store_timed ? store_cyc.p : nullptr;  // the measured launch only
    launch(uint64_t(run.iters()), c.state == "warm" ? uint64_t(run.warmup()) : 0);
    args.store_cycles = nullptr;
    sm_mhz = sm_mhz_of(0);
    if (sm_mhz <= 0) throw PointFailure("SM clock measurement failed (zero elapsed globaltimer)");
    const auto ic = issue_cyc.read(), rc = rtt_cyc.read();
    for (size_t i = 0; i < ic.size(); ++i) {
      issue_ns.push_back(ic[i] * 1000.0 / sm_mhz);
      rtt_ns.push_back(rc[i] * 1000.0 / sm_mhz);
    }
    for (const uint32_t cyc : store_cyc.read()) store_ns.push_back(cyc * 1000.0 / sm_mhz);
  } else {
    pb::CpuClockMean mean;
    for (uint32_t rep = 0; rep < c.reps; ++rep) {
      if (c.state == "cold") go_cold();
      const pb::CpuClock k = pb::read_worker_clocks(rig.pool->worker_cpus());
      if (rep == 0) clk = k;
      mean.add(k);
      launch(c.msgs, 0);
      const auto ts = t0.read(), te = t1.read();
      const uint64_t start = *std::min_element(ts.begin(), ts.end());
      const uint64_t end = *std::max_element(te.begin(), te.end());
      rates.push_back(double(c.rings) * double(c.msgs) * 1000.0 / double(end - start));
      sm_samples.push_back(sm_mhz_of(0));
    }
    mean.apply(&clk);
    std::sort(sm_samples.begin(), sm_samples.end());
    sm_mhz = sm_samples[sm_samples.size() / 2];
  }

  // Drain: every ring consumed and completed what was sent; then check the bytes that landed.
  // (Two ranks, pingpong: ring 1 carried nothing here, its answers came from rank 1.)
  const uint32_t fed = peer_pong ? 1 : c.rings;
  std::vector<uint64_t> expected(c.rings, base);
  if (peer_pong) expected[1] = 0;
  if (!rig.drain(expected, &err)) throw PointFailure("drain: " + err);
  if (gpu_pub && !gpu_pub->drain(&err)) throw PointFailure(err);
  uint64_t posts = 0, descs = 0;
  for (const auto& w : rig.pool->stats()) {
    posts += w.posts;
    descs += w.descriptors;
  }
  if (descs != base * fed)
    throw PointFailure("workers consumed " + std::to_string(descs) + " descriptors, producers sent " +
                       std::to_string(base * fed));
  if (nic != NicBackend::none) pb::check_payload(remote.p, c.rings, c.window, base);
  rig.stop_engine();

  // Records: the point's params plus what the run observed about its CPUs.
  Params params = run.point.params;
  pb::note_cpus(&params, rig.pool->worker_cpus(), clk);
  if (peer_pong) params.set("responder", responder);
  params.set("mean_chain", posts ? double(descs) / double(posts) : 0.0);
  auto finish = [&](Record r) {
    r.sm_clock_mhz = sm_mhz;
    r.cpu_clock_mhz = clk.mhz;
    r.cpu_clock_state = c.state;
    r.params = params;
    return r;
  };
  if (pingpong) return {finish(Record::ok("rtt_ns", "ns", compute_stats(rtt_ns)))};
  if (issue && store_timed) {
    std::vector<Record> out = {finish(Record::ok("issue_ns", "ns", compute_stats(issue_ns))),
                               finish(Record::ok("issue_store_ns", "ns", compute_stats(store_ns))),
                               finish(Record::ok("completion_ns", "ns", compute_stats(rtt_ns)))};
    attach_same_run_floor(out, "issue_store_ns", "ring_store_same_point", {"issue_ns"});
    return out;
  }
  if (issue)
    return {finish(Record::ok("issue_ns", "ns", compute_stats(issue_ns))),
            finish(Record::ok("completion_ns", "ns", compute_stats(rtt_ns)))};
  return {finish(Record::ok("msg_rate", "Mmsg/s", compute_stats(rates)))};
}

}  // namespace

GICOMM_EXPERIMENT(proxy_one_op, measure);
GICOMM_EXPERIMENT_SERVE(proxy_one_op, round_trip_responder);
GICOMM_EXPERIMENT(proxy_msg_rate, measure);
GICOMM_EXPERIMENT(proxy_worker_ceiling, measure);

}  // namespace gicomm::bench
