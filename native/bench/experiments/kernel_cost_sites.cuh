// kernel_cost's transports behind the call site (a Site per point, built by the harness's
// transport factory): mini-gda (each block owns one QP) or mini-proxy (blocks enqueue on host
// rings drained by a worker pool). Part of kernel_cost.cu, its only includer.
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "harness/cuda.h"
#include "harness/gda_rig.h"
#include "harness/harness.h"
#include "harness/proxy_rig.h"
#include "kernel_cost_caller.cuh"

namespace gicomm::bench::kernel_cost {
namespace {

struct Config {
  std::string caller, mode, site;
  bool proxy;
  NicBackend nic;
  int live, blocks, threads, flops_per_thread, array_mib;
  uint32_t msgs, rings, workers;
};

// The transport behind the call site for one point; torn down (and checked) at the end.
class Site {
 public:
  virtual ~Site() = default;
  virtual CommArgs args() = 0;
  // Throws PointFailure with the queue and counters when a launch reported a failed wait.
  virtual void check_launch() = 0;
  // Completes what is outstanding and checks the NIC executed `expected` puts.
  virtual void finish(uint64_t expected) = 0;
};

// Each block owns one QP of a session on the point's backend; the puts land in kSlotsPerBlock
// words per block.
class GdaSite : public Site {
 public:
  GdaSite(const Config& c, Run& run) : timeout_ms_(run.options.timeout_ms), rig_(config(c, run), memory(c)) {}
  CommArgs args() override {
    CommArgs a{};
    a.ctx = rig_.context();
    a.dst = rig_.target().dst;
    a.rkey = rig_.target().rkey;
    return a;
  }
  void check_launch() override {
    const std::string e = rig_.session().take_error();
    if (!e.empty()) throw PointFailure("mini-gda: " + e);
  }
  void finish(uint64_t expected) override {
    rig_.drain(0, 60.0 + 4.0 * timeout_ms_ / 1000.0);  // bounded: every quiet is bounded too
    check_launch();
    rig_.verify(expected);
  }

 private:
  static gda::SessionConfig config(const Config& c, Run& run) {
    gda::SessionConfig sc = gda_config(run, static_cast<uint32_t>(c.blocks));
    sc.sq_wqebbs = 256;  // 16 puts per block per launch at most: plenty of slots
    return sc;
  }
  static GdaMemory memory(const Config& c) {
    GdaMemory m;
    m.dst_bytes = size_t(c.blocks) * kSlotsPerBlock * 8;
    m.dst_access = softnic::kAccessRemoteWrite | softnic::kAccessLocalWrite;
    return m;
  }
  int timeout_ms_;
  GdaRig rig_;
};

// Blocks enqueue on `rings` host rings (block b on ring b % rings); a worker pool posts to the
// softnic's cpu engine, chaining up to 16 (the proxy's best case).
class ProxySite : public Site {
 public:
  ProxySite(const Config& c, const Run& run)
      : remote_(size_t(c.rings) * kSlotsPerBlock), perr_(1), rig_(spec(c, run)), nrings_(c.rings) {
    rig_.start(NicBackend::softnic_cpu, {remote_.p, remote_.n * 8}, {remote_.p, remote_.n * 8}, false);
  }
  CommArgs args() override {
    CommArgs a{};
    a.rings = rig_.views.p;
    a.nrings = nrings_;
    a.timeout_ns = rig_.spec.timeout_ns;
    a.perr = perr_.d;
    return a;
  }
  void check_launch() override {
    if (perr_.p->flag) {
      const proxy::WaitError& e = perr_.p->e;
      std::ostringstream m;
      m << "mini-proxy: block " << perr_.p->block << " ring " << e.ring
        << (e.what == proxy::kWaitRingFull ? " full: consumer head " : " completion wait timed out: done ") << e.seen
        << ", expected " << e.expected;
      throw PointFailure(m.str());
    }
    if (rig_.worker_failed()) throw PointFailure("mini-proxy worker: " + rig_.worker_error());
  }
  void finish(uint64_t expected_total) override {
    // Tickets per ring: what the blocks reserved (the device counters), which must also be what
    // the host-side count of launches x msgs says.
    const std::vector<uint64_t> expected = rig_.reserve.read();
    uint64_t sum = 0;
    for (uint64_t v : expected) sum += v;
    if (sum != expected_total)
      throw PointFailure("mini-proxy: blocks reserved " + std::to_string(sum) + " tickets, expected " +
                         std::to_string(expected_total));
    std::string err;
    check_launch();  // a device-side failure names the ring and counters better than the drain
    const bool ok = rig_.drain(expected, &err);
    rig_.engine->stop();
    if (!ok) throw PointFailure("mini-proxy drain: " + err);
  }

 private:
  static ProxyRigSpec spec(const Config& c, const Run& run) {
    return ProxyRigSpec::on_node0(c.rings, c.workers, 16, run.timeout_ns());  // chaining 16: what is there
  }
  MappedBuffer<uint64_t> remote_;
  MappedBuffer<ProxyError> perr_;
  ProxyRig rig_;  // after the memory it posts into: stopped before that is freed
  uint32_t nrings_;
};


}  // namespace
}  // namespace gicomm::bench::kernel_cost
