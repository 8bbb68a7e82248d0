// The NVLink dissection: one set of measurement kernels, instantiated once per path (a minimal
// direct store, NVSHMEM P2P, NCCL LSA), so every library is timed by the same code and only the
// path's own device calls differ.
//
// A Path is a small trivially-copyable struct passed by value to the kernels, with device methods:
//   put(bytes, slot)      move `bytes` from the local source buffer into the peer's data slot
//   p(value, slot)        store one 8-byte value into the peer's scratch slot
//   put_signal(bytes, s)  put into the peer's data slot 0, then set the peer's flag to s (ordered)
//   p_signal(s)           store s into the peer's flag (the value is its own flag)
//   complete()            wait until everything issued so far is visible at the peer
//   my_flag(), my_data()  this rank's flag word and data slot 0 (written by the peer)
//   flag_value()          optional: the current value of this rank's flag, where it is not the
//                         word at my_flag() (an NCCL GIN signal)
// Metrics per point: issue and completion time of one op with at most one outstanding (ns from
// %globaltimer and SM cycles from clock64), flag round trip, message rate of one thread, and the
// Parts: dissect_kernels.cuh (the kernels), dissector.cuh (one path's host side); here, the point
// loop a path's ranks share.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "nvlink/dissector.cuh"
#include "support/path_proof.h"
#include "support/ranks.h"

namespace gicomm::dissect {

template <class Path>
struct Side {
  Dissector<Path>* d = nullptr;
  Path path{};
  int device = 0;
  void* region = nullptr;
};

// The point loop shared by every path. `barrier()` lines the ranks up (a no-op in one process).
// Rank 0 (the side with `init`) writes the records of each point. `watch`, when given, sees each
// measured point begin and end on every rank (a NIC harness's path proof).
template <class Path, class Barrier>
int run_points(gicomm::baselines::RankContext& ctx, Side<Path>* init, Side<Path>* echo, Barrier barrier,
               gicomm::baselines::PointWatcher* watch = nullptr) {
  using gicomm::baselines::status_records;
  using gicomm::baselines::write_point;
  uint64_t base = 0;
  size_t index = 0;
  for (const gicomm::bench::Point& p : ctx.points) {
    ++index;
    const auto t_start = std::chrono::steady_clock::now();
    Spec s;
    const std::string bad = spec_of(p, ctx.options, &s);
    if (!bad.empty()) {
      if (init) {
        write_point(ctx, p, status_records(metric_names(), "skipped", "not measurable: " + bad));
        gicomm::baselines::log_point(ctx, index, p, "skipped: " + bad, 0.0);
      }
      continue;
    }
    std::vector<Record> recs;
    std::string local_error;
    if (watch) watch->begin(p);
    barrier();
    if (init) {
      check(cudaSetDevice(init->device), "cudaSetDevice");
      try {
        init->d->run_local(init->path, s, &recs);
        init->d->run_caller(init->path, s, &recs);
      } catch (const std::exception& e) {
        local_error = e.what();
      }
      clear_data(init->region);
    }
    if (echo) {
      check(cudaSetDevice(echo->device), "cudaSetDevice");
      clear_data(echo->region);
    }
    barrier();
    if (echo) {
      check(cudaSetDevice(echo->device), "cudaSetDevice");
      echo->d->launch_echo(echo->path, s, base);
    }
    std::string rtt_error;
    if (init) {
      check(cudaSetDevice(init->device), "cudaSetDevice");
      init->d->launch_ping(init->path, s, base);
      rtt_error = init->d->finish_round_trip(s, "ping_kernel", &recs);
    }
    if (echo) {
      check(cudaSetDevice(echo->device), "cudaSetDevice");
      const std::string e = echo->d->finish_round_trip(s, "echo_kernel", nullptr);
      if (!e.empty()) std::fprintf(stderr, "[gicomm] rank %d: %s\n", ctx.rank, e.c_str());
      if (!e.empty() && rtt_error.empty() && init) rtt_error = e;
    }
    barrier();
    base += static_cast<uint64_t>(s.warmup + s.iters);
    if (!local_error.empty()) {
      for (auto& r : status_records({"issue_ns", "completion_ns", "msg_rate", "registers"}, "failed", local_error))
        recs.push_back(r);
    }
    if (!rtt_error.empty()) {
      for (auto& r : status_records({"rtt_ns"}, "failed", rtt_error)) recs.push_back(r);
    }
    if (watch) {
      // What the point sent (rank 0 claims it; rank 1 only reports what its port moved).
      gicomm::baselines::DissectOps ops;
      ops.bytes = s.op == kOpP ? 8 : s.bytes;
      ops.warmup = static_cast<uint64_t>(s.warmup);
      ops.iters = static_cast<uint64_t>(s.iters);
      ops.batch = static_cast<uint64_t>(s.batch);
      ops.reps = static_cast<uint64_t>(s.reps);
      // run_caller: one warm-up and caller_reps timed runs of the sending variant, one put per block
      ops.caller_sends = init ? static_cast<uint64_t>(1 + s.caller_reps) * init->d->caller_blocks() : 0;
      ops.local_ran = local_error.empty();
      ops.rtt_ran = rtt_error.empty();
      watch->end(p, ops, init ? &recs : nullptr);
    }
    if (!init) continue;
    write_point(ctx, p, recs);
    std::string summary;
    for (const Record& r : recs)
      if (r.stats && (r.metric == "issue_ns" || r.metric == "completion_ns" || r.metric == "rtt_ns" ||
                      r.metric == "msg_rate" || r.metric == "registers"))
        summary += r.metric + "=" + gicomm::bench::json_number(r.stats->p50) + " ";
    if (!local_error.empty()) summary += "LOCAL FAILED: " + local_error + " ";
    if (!rtt_error.empty()) summary += "RTT FAILED: " + rtt_error;
    for (const Record& r : recs)
      if (r.error.rfind("path check: ", 0) == 0) {
        summary += " PATH FAILED: " + r.error.substr(12);
        break;
      }
    gicomm::baselines::log_point(ctx, index, p, summary,
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
  }
  return 0;
}

// Variables that keep NVLink multicast off everywhere (shared machines: see DESIGN.md).
inline void multicast_off() {
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
}

// The rank of a two-process library: rank `me` 0 is the initiator, 1 the responder, on the current
// device, with its region `local` and kernels on `stream`; a last barrier keeps either rank from
// tearing down while the other still measures. `watch`: see run_points.
template <class Path, class Barrier>
int run_rank(gicomm::baselines::RankContext& ctx, int me, const Path& path, void* local, cudaStream_t stream,
             Barrier barrier, gicomm::baselines::PointWatcher* watch = nullptr) {
  int rc = 0;
  {
    Dissector<Path> d(stream);
    int device = 0;  // the rank's own GPU (two ranks may share one)
    check(cudaGetDevice(&device), "cudaGetDevice");
    Side<Path> side{&d, path, device, local};
    rc = run_points(ctx, me == 0 ? &side : nullptr, me == 1 ? &side : nullptr, barrier, watch);
  }
  barrier();
  return rc;
}

}  // namespace gicomm::dissect
