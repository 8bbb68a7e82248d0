// Randomized protocol test of a softnic engine, driven by several producer threads that use the
// same mlx5 encoders as the GPU (gicomm/mlx5/wqe.h) through HostSq/HostCq. The cpu engine by default;
// `--engine gpu` runs the very same checks against the gpu engine (a persistent kernel on GPU 0;
// queues, doorbells and buffers in pinned host memory, the atomics' words in GPU memory; exit 77
// without a GPU), so both engines answer one protocol.
//
// Checks: every payload byte lands where it should and nothing else is touched; every signaled
// WQE yields exactly one CQE, in order, with its WQE index; fetch-add returns the running sums;
// bad lkey / rkey / bounds / length / malformed / unknown DCT yield an error CQE with the right
// syndrome, write nothing, and flush the WQEs after them; a doorbell that overtakes its WQE is
// detected (stale retries, then LOCAL_QP_OP); an empty write (no data segment, as rdma-core posts
// it) completes with byte count 0, writes nothing and checks no rkey.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "gicomm/mlx5/host_post.h"
#include "gicomm/softnic/softnic.h"
#if defined(GICOMM_TEST_GPU_ENGINE)
#include "gicomm/softnic/gpu_engine.h"
#endif

namespace m = gicomm::mlx5;
namespace sn = gicomm::softnic;
using Clock = std::chrono::steady_clock;


// The engine under test and where its memory lives. The gpu engine reads every queue and buffer
// from the GPU: pinned host memory, so the host producers and checks use them as they are; only the
// fetch-add words live in GPU memory (a GPU atomic on host memory needs PCIe atomics). It copies the
// key tables and QP states at start(), so refresh() restarts it after new QPs, regions or DCTs.
struct TestEngine {
  sn::SoftNic& nic;
  bool gpu;
  std::unique_ptr<sn::CpuEngine> cpu;
#if defined(GICOMM_TEST_GPU_ENGINE)
  std::unique_ptr<sn::GpuEngine> gpu_engine;
#endif
  sn::Counters finished{};  // gpu: counters of the runs stopped so far
  bool running = false;

  TestEngine(sn::SoftNic& n, bool use_gpu, int cpu_threads) : nic(n), gpu(use_gpu) {
    if (!gpu) {
      cpu = std::make_unique<sn::CpuEngine>(nic, cpu_threads);
      return;
    }
#if defined(GICOMM_TEST_GPU_ENGINE)
    sn::GpuEngineConfig ec;
    ec.device = 0;
    ec.blocks = 4;
    ec.warps_per_block = 4;
    ec.max_runtime_ms = 120000;
    gpu_engine = std::make_unique<sn::GpuEngine>(nic, ec);
#endif
  }
  void start() {
    running = true;
    if (cpu) return cpu->start();
#if defined(GICOMM_TEST_GPU_ENGINE)
    gpu_engine->start();
#endif
  }
  void stop() {
    if (!running) return;
    running = false;
    if (cpu) return cpu->stop();
#if defined(GICOMM_TEST_GPU_ENGINE)
    gpu_engine->stop(20000);
    finished += gpu_engine->counters();
#endif
  }
  void refresh() {
    if (gpu && running) {
      stop();
      start();
    }
  }
  sn::Counters counters() const { return cpu ? cpu->counters() : finished; }
  sn::MemoryPlace place() const { return gpu ? sn::MemoryPlace::pinned() : sn::MemoryPlace::host(); }
  sn::MemoryPlace atomic_place() const { return gpu ? sn::MemoryPlace::gpu(0) : sn::MemoryPlace::host(); }
  sn::QueueConfig queues(sn::QueueConfig qc) const {
    qc.queues = place();
    qc.doorbells = place();
    return qc;
  }
  // A QP of `sq_wqebbs` WQEBBs and as many CQEs (collapsed: one) that the engine serves from now on.
  uint32_t new_qp(uint32_t sq_wqebbs, bool collapsed = false) {
    sn::QueueConfig qc;
    qc.sq_wqebbs = sq_wqebbs;
    qc.cq_entries = sq_wqebbs;
    qc.collapsed_cq = collapsed;
    const uint32_t qp = nic.create_qp(queues(qc));
    refresh();
    return qp;
  }
};

// A buffer in an engine's memory place, filled with `fill`.
struct Buffer {
  sn::MemoryPlace place;
  size_t bytes;
  uint8_t* p;
  Buffer(sn::MemoryPlace where, size_t n, uint8_t fill)
      : place(where), bytes(n), p(static_cast<uint8_t*>(sn::allocate(where, n))) {
    sn::fill_bytes(place, p, fill, n);
  }
  ~Buffer() { sn::release(place, p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// Waits (bounded) for the next CQE of `cq`; names the QP and counters when it gives up.
static bool wait_cqe(m::HostCq& cq, m::CqeFields* out, uint32_t qp, uint32_t expect_counter) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!cq.poll(out)) {
    if (Clock::now() > deadline) {
      CHECK(false, "timeout: QP %u waiting for CQE %u (wqe_counter %u), consumer index %u", qp, cq.ci(),
            expect_counter, cq.ci());
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

constexpr uint32_t kSlot = 256;  // destination bytes per WQE
// Above the 1 GiB message limit yet below bit 31, which would mark the segment inline.
constexpr uint32_t kMaxMessageBytesPlus1 = sn::kMaxMessageBytes + 1;


// Shared by the producers and the final check.
struct Run {
  uint32_t wqes_per_qp;
  const uint8_t* src;
  sn::MemoryRegionHandle src_mr, dst_mr, ctr_mr, fetched_mr;
  std::vector<uint8_t> kinds;  // what each (qp, seq) posted: 0 write, 1 write-imm, 2 inline, 3 fetch-add
};

static uint32_t payload_len(uint32_t qp, uint32_t seq) { return 1 + (qp * 131 + seq * 7) % kSlot; }
static uint64_t payload_src_off(uint32_t qp, uint32_t seq) { return (uint64_t(qp) * 977 + seq * 13) % (4096 - kSlot); }
constexpr uint32_t kInlineMax = m::kMaxInlineRc;  // inline writes of 1..4 WQEBBs

// One producer drives its QPs round-robin with random batches (1..16 WQEs per doorbell) of random
// WQEs, about a third signaled, keeping at most half of each ring outstanding.
static void producer(sn::SoftNic& nic, const std::vector<uint32_t>& qps, Run& run, uint32_t seed) {
  std::mt19937 rng(seed);
  struct PerQp {
    m::HostSq sq;
    m::HostCq cq;
    uint32_t posted = 0;
    std::vector<uint32_t> signaled;  // WQE indices that asked for a CQE, in order
    size_t next_cqe = 0;
    uint32_t retired_pi = 0;  // WQEBBs known executed
  };
  std::vector<PerQp> st(qps.size());
  for (size_t i = 0; i < qps.size(); ++i) {
    st[i].sq = m::HostSq(nic.sq(qps[i]));
    st[i].cq = m::HostCq(nic.cq(qps[i]));
  }
  auto consume_one = [&](PerQp& q, uint32_t qp) {
    m::CqeFields c;
    if (!wait_cqe(q.cq, &c, qp, q.signaled[q.next_cqe])) return false;
    CHECK(c.opcode == m::kCqeReq, "QP %u: unexpected CQE opcode %u syndrome 0x%x", qp, c.opcode, c.syndrome);
    CHECK(c.wqe_counter == static_cast<uint16_t>(q.signaled[q.next_cqe]) && c.qpn == q.sq.desc().qpn,
          "QP %u: CQE out of order: got wqe_counter %u qpn %u, expected %u", qp, c.wqe_counter, c.qpn,
          q.signaled[q.next_cqe] & 0xffff);
    q.retired_pi = q.signaled[q.next_cqe] + 1;  // a CQE retires every WQE before it too
    ++q.next_cqe;
    return true;
  };
  bool busy = true;
  while (busy) {
    busy = false;
    for (size_t i = 0; i < qps.size(); ++i) {
      PerQp& q = st[i];
      const uint32_t qp = qps[i];
      if (q.posted == run.wqes_per_qp) continue;
      busy = true;
      const uint32_t batch = std::min<uint32_t>(1 + rng() % 16, run.wqes_per_qp - q.posted);
      while (q.sq.pi() + batch - q.retired_pi > q.sq.desc().wqe_cnt / 2)
        if (!consume_one(q, qp)) return;
      for (uint32_t b = 0; b < batch; ++b) {
        const uint32_t seq = q.posted++;
        // The last WQE of a batch is signaled often (so the ring drains), others rarely.
        const bool signaled = (q.posted == run.wqes_per_qp) || (b + 1 == batch ? rng() % 2 == 0 : rng() % 8 == 0);
        const m::WqeHeader h = q.sq.header(signaled);
        m::WqeImage img;
        uint32_t ds = 0;
        const size_t id = size_t(qp) * run.wqes_per_qp + seq;
        const uint64_t slot = run.dst_mr.addr + id * kSlot;
        const uint32_t len = payload_len(qp, seq);
        const uint64_t off = payload_src_off(qp, seq);
        const uint8_t kind = static_cast<uint8_t>(rng() % 4);
        run.kinds[id] = kind;
        if (kind == 0) {
          ds = m::build_rdma_write(img, h, slot, run.dst_mr.rkey, run.src_mr.addr + off, run.src_mr.lkey, len);
        } else if (kind == 1) {
          ds = m::build_rdma_write_imm(img, h, slot, run.dst_mr.rkey, run.src_mr.addr + off, run.src_mr.lkey, len, seq);
        } else if (kind == 2) {
          ds = m::build_rdma_write_inline(img, h, slot, run.dst_mr.rkey, run.src + off, std::min(len, kInlineMax));
        } else {
          ds = m::build_atomic_fetch_add(img, h, run.ctr_mr.addr + 8 * qp, run.ctr_mr.rkey, 1 + seq,
                                         run.fetched_mr.addr + 8 * id, run.fetched_mr.lkey);
        }
        const uint32_t at = q.sq.push(img, ds);
        if (signaled) q.signaled.push_back(at);
      }
      q.sq.ring();
    }
  }
  for (size_t i = 0; i < qps.size(); ++i) {
    PerQp& q = st[i];
    while (q.next_cqe < q.signaled.size())
      if (!consume_one(q, qps[i])) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    m::CqeFields extra;
    CHECK(!q.cq.poll(&extra), "QP %u: CQE beyond the signaled WQEs (counter %u)", qps[i], extra.wqe_counter);
  }
}

static void run_protocol(bool gpu) {
  const uint32_t kQps = 24, kProducers = 3, kWqes = 1500;
  sn::SoftNic nic;
  TestEngine engine(nic, gpu, 2);
  Buffer src_buf(engine.place(), 4096, 0), dst_buf(engine.place(), size_t(kQps) * kWqes * kSlot, 0xee);
  Buffer fetched_buf(engine.place(), size_t(kQps) * kWqes * 8, 0xff), ctr_buf(engine.atomic_place(), kQps * 8, 0);
  uint8_t* src = src_buf.p;
  const uint8_t* dst = dst_buf.p;
  const uint64_t* fetched = reinterpret_cast<const uint64_t*>(fetched_buf.p);
  std::mt19937 rng(7);
  for (size_t i = 0; i < src_buf.bytes; ++i) src[i] = static_cast<uint8_t>(rng());
  Run run;
  run.wqes_per_qp = kWqes;
  run.src = src;
  run.src_mr = nic.register_mr(src, src_buf.bytes, 0);
  run.dst_mr = nic.register_mr(dst_buf.p, dst_buf.bytes, sn::kAccessRemoteWrite);
  run.ctr_mr = nic.register_mr(ctr_buf.p, ctr_buf.bytes, sn::kAccessRemoteAtomic);
  run.fetched_mr = nic.register_mr(fetched_buf.p, fetched_buf.bytes, sn::kAccessLocalWrite);
  run.kinds.assign(size_t(kQps) * kWqes, 0xff);
  sn::QueueConfig qc;
  qc.sq_wqebbs = 256;
  qc.cq_entries = 256;
  qc = engine.queues(qc);
  for (uint32_t i = 0; i < kQps / 2; ++i) nic.create_qp(qc);
  if (gpu)  // the gpu engine sees the QPs of its start(): all of them before
    for (uint32_t i = kQps / 2; i < kQps; ++i) nic.create_qp(qc);
  engine.start();
  if (!gpu)
    for (uint32_t i = kQps / 2; i < kQps; ++i) nic.create_qp(qc);  // QPs may appear while the engine runs
  std::vector<std::thread> threads;
  for (uint32_t p = 0; p < kProducers; ++p) {
    std::vector<uint32_t> mine;
    for (uint32_t q = p; q < kQps; q += kProducers) mine.push_back(q);
    threads.emplace_back([&nic, &run, mine, p] { producer(nic, mine, run, 100 + p); });
  }
  for (auto& t : threads) t.join();
  engine.stop();
  std::vector<uint64_t> counters(kQps);
  sn::copy_from(ctr_buf.place, counters.data(), ctr_buf.p, ctr_buf.bytes);
  const sn::Counters c = engine.counters();
  CHECK(c.errors == 0 && c.flushes == 0, "unexpected error CQEs: %llu errors, %llu flushes",
        (unsigned long long)c.errors, (unsigned long long)c.flushes);
  CHECK(c.wqes == uint64_t(kQps) * kWqes, "engine executed %llu WQEs, expected %llu", (unsigned long long)c.wqes,
        (unsigned long long)(uint64_t(kQps) * kWqes));
  uint64_t bad_slots = 0, bad_fetch = 0;
  for (uint32_t qp = 0; qp < kQps; ++qp) {
    uint64_t running = 0;
    for (uint32_t seq = 0; seq < kWqes; ++seq) {
      const size_t id = size_t(qp) * kWqes + seq;
      const uint8_t* slot = dst + id * kSlot;
      const uint32_t len = payload_len(qp, seq);
      const uint8_t* expect = src + payload_src_off(qp, seq);
      uint32_t written = 0;
      switch (run.kinds[id]) {
        case 0:
        case 1: written = len; break;
        case 2: written = std::min(len, kInlineMax); break;
        case 3:
          // fetch-add returns the QP's running sum: atomics of one QP execute in order.
          if (fetched[id] != running) ++bad_fetch;
          running += 1 + seq;
          break;
        default: ++bad_slots;
      }
      if (std::memcmp(slot, expect, written) != 0) ++bad_slots;
      for (uint32_t b = written; b < kSlot; ++b)
        if (slot[b] != 0xee) {
          ++bad_slots;
          break;
        }
    }
    CHECK(counters[qp] == running, "QP %u: counter %llu, expected %llu", qp, (unsigned long long)counters[qp],
          (unsigned long long)running);
  }
  CHECK(bad_slots == 0, "%llu destination slots hold wrong bytes", (unsigned long long)bad_slots);
  CHECK(bad_fetch == 0, "%llu fetch-add results are not the running sum", (unsigned long long)bad_fetch);
  std::printf("protocol (%s engine): %u QPs, %u producers, %u WQEs/QP: engine %llu WQEs, %llu CQEs, %llu bytes\n",
              gpu ? "gpu" : "cpu", kQps, kProducers, kWqes, (unsigned long long)c.wqes, (unsigned long long)c.cqes, (unsigned long long)c.bytes);
}

// ---- error paths --------------------------------------------------------------------------------------
// Posts `bad` (built by the lambda on a fresh QP) after one good signaled write, then one more good
// WQE, and checks: good CQE, error CQE with `syndrome`, flush CQE, nothing written by bad or after.
template <class Build>
static void expect_error(TestEngine& engine, const char* name, uint8_t syndrome, bool dc, Build build_bad,
                         const sn::MemoryRegionHandle& src_mr, const sn::MemoryRegionHandle& dst_mr, uint8_t* dst) {
  sn::SoftNic& nic = engine.nic;
  sn::QueueConfig qc;
  qc.sq_wqebbs = 64;
  qc.cq_entries = 64;
  qc.dc = dc;
  const uint32_t qp = nic.create_qp(engine.queues(qc));
  const uint32_t dct = dc ? nic.create_dct(0xdc0000 + qp) : 0;
  engine.refresh();
  m::AddressVector av;
  av.dct_number = dct;
  av.dc_key = 0xdc0000 + qp;
  const m::AddressVector* avp = dc ? &av : nullptr;
  m::HostSq sq(nic.sq(qp));
  m::HostCq cq(nic.cq(qp));
  std::memset(dst, 0xee, 64);
  m::WqeImage img;
  uint32_t ds = m::build_rdma_write(img, sq.header(true), dst_mr.addr, dst_mr.rkey, src_mr.addr, src_mr.lkey, 8, avp);
  sq.push(img, ds);
  // The bad WQE is unsignaled: errors complete with a CQE regardless.
  ds = build_bad(img, sq.header(false), avp);
  const uint32_t bad_index = sq.push(img, ds);
  ds = m::build_rdma_write(img, sq.header(true), dst_mr.addr + 32, dst_mr.rkey, src_mr.addr, src_mr.lkey, 8, avp);
  const uint32_t after_index = sq.push(img, ds);
  sq.ring();
  m::CqeFields c;
  if (wait_cqe(cq, &c, qp, 0))
    CHECK(c.opcode == m::kCqeReq && c.wqe_counter == 0, "%s: first CQE opcode %u counter %u", name, c.opcode,
          c.wqe_counter);
  if (wait_cqe(cq, &c, qp, bad_index))
    CHECK(c.opcode == m::kCqeReqErr && c.syndrome == syndrome && c.wqe_counter == bad_index && c.qpn == nic.sq(qp).qpn,
          "%s: expected error CQE syndrome 0x%x at %u, got opcode %u syndrome 0x%x counter %u", name, syndrome,
          bad_index, c.opcode, c.syndrome, c.wqe_counter);
  if (wait_cqe(cq, &c, qp, after_index))
    CHECK(c.opcode == m::kCqeReqErr && c.syndrome == m::kSyndromeWrFlush && c.wqe_counter == after_index,
          "%s: expected flush CQE at %u, got opcode %u syndrome 0x%x counter %u", name, after_index, c.opcode,
          c.syndrome, c.wqe_counter);
  for (int b = 8; b < 64; ++b)
    if (dst[b] != 0xee) {
      CHECK(false, "%s: a failed or flushed WQE wrote byte %d", name, b);
      break;
    }
}

static void run_errors(bool gpu) {
  sn::SoftNic nic;
  TestEngine engine(nic, gpu, 1);
  Buffer src(engine.place(), 4096, 0x5a), dst(engine.place(), 4096, 0xee), ro(engine.place(), 64, 0);
  auto src_mr = nic.register_mr(src.p, src.bytes, sn::kAccessLocalWrite);
  auto dst_mr = nic.register_mr(dst.p, dst.bytes, sn::kAccessRemoteWrite);
  auto ro_mr = nic.register_mr(ro.p, ro.bytes, 0);  // no remote access at all
  engine.start();
  uint8_t* d = dst.p;
  using H = m::WqeHeader;
  using AV = const m::AddressVector*;
  expect_error(engine, "bad lkey", m::kSyndromeLocalProt, false, [&](m::WqeImage& i, H h, AV av) {
    return m::build_rdma_write(i, h, dst_mr.addr + 16, dst_mr.rkey, src_mr.addr, src_mr.lkey ^ 0x1, 8, av);
  }, src_mr, dst_mr, d);
  expect_error(engine, "bad rkey", m::kSyndromeRemoteAccess, false, [&](m::WqeImage& i, H h, AV av) {
    return m::build_rdma_write(i, h, dst_mr.addr + 16, dst_mr.rkey + 0x100, src_mr.addr, src_mr.lkey, 8, av);
  }, src_mr, dst_mr, d);
  expect_error(engine, "remote out of bounds", m::kSyndromeRemoteAccess, false, [&](m::WqeImage& i, H h, AV av) {
    return m::build_rdma_write(i, h, dst_mr.addr + 4090, dst_mr.rkey, src_mr.addr, src_mr.lkey, 8, av);
  }, src_mr, dst_mr, d);
  expect_error(engine, "local out of bounds", m::kSyndromeLocalProt, false, [&](m::WqeImage& i, H h, AV av) {
    return m::build_rdma_write(i, h, dst_mr.addr + 16, dst_mr.rkey, src_mr.addr + 4000, src_mr.lkey, 200, av);
  }, src_mr, dst_mr, d);
  expect_error(engine, "length too large", m::kSyndromeLocalLength, false, [&](m::WqeImage& i, H h, AV av) {
    return m::build_rdma_write(i, h, dst_mr.addr + 16, dst_mr.rkey, src_mr.addr, src_mr.lkey, kMaxMessageBytesPlus1, av);
  }, src_mr, dst_mr, d);
  expect_error(engine, "no remote write access", m::kSyndromeRemoteAccess, false, [&](m::WqeImage& i, H h, AV av) {
    return m::build_rdma_write(i, h, ro_mr.addr, ro_mr.rkey, src_mr.addr, src_mr.lkey, 8, av);
  }, src_mr, dst_mr, d);
  expect_error(engine, "atomic without atomic access", m::kSyndromeRemoteAccess, false, [&](m::WqeImage& i, H h, AV av) {
    return m::build_atomic_fetch_add(i, h, dst_mr.addr + 16, dst_mr.rkey, 1, src_mr.addr, src_mr.lkey, av);
  }, src_mr, dst_mr, d);
  // (ds 2, ctrl + raddr, is an empty write: run_empty_writes.)
  expect_error(engine, "malformed ds (no raddr)", m::kSyndromeLocalQpOp, false, [&](m::WqeImage& i, H h, AV av) {
    const uint32_t ds = m::build_rdma_write(i, h, dst_mr.addr + 16, dst_mr.rkey, src_mr.addr, src_mr.lkey, 8, av);
    i.seg[0].w[1] = gicomm::to_be32((h.qpn << 8) | 1);  // claims the ctrl segment alone
    return ds;
  }, src_mr, dst_mr, d);
  expect_error(engine, "malformed ds (extra segment)", m::kSyndromeLocalQpOp, false, [&](m::WqeImage& i, H h, AV av) {
    const uint32_t ds = m::build_rdma_write(i, h, dst_mr.addr + 16, dst_mr.rkey, src_mr.addr, src_mr.lkey, 8, av);
    i.seg[0].w[1] = gicomm::to_be32((h.qpn << 8) | 4);  // a segment after the data segment
    i.seg[3] = m::Seg16{{0, 0, 0, 0}};
    return ds + 1;
  }, src_mr, dst_mr, d);
  expect_error(engine, "unknown opcode", m::kSyndromeLocalQpOp, false, [&](m::WqeImage& i, H h, AV av) {
    const uint32_t ds = m::build_rdma_write(i, h, dst_mr.addr + 16, dst_mr.rkey, src_mr.addr, src_mr.lkey, 8, av);
    m::set_ctrl_seg(i.seg[0], h.pi, 0x1f, 0, h.qpn, 0, 3, 0, 0);
    return ds;
  }, src_mr, dst_mr, d);
  expect_error(engine, "DC bad key", m::kSyndromeRemoteAccess, true, [&](m::WqeImage& i, H h, AV av) {
    m::AddressVector wrong = *av;
    wrong.dc_key ^= 1;
    return m::build_rdma_write(i, h, dst_mr.addr + 16, dst_mr.rkey, src_mr.addr, src_mr.lkey, 8, &wrong);
  }, src_mr, dst_mr, d);
  expect_error(engine, "DC extended AV, bad rkey", m::kSyndromeRemoteAccess, true, [&](m::WqeImage& i, H h, AV av) {
    m::AddressVector ext = *av;
    ext.extended = true;
    return m::build_rdma_write(i, h, dst_mr.addr + 16, 0x12345, src_mr.addr, src_mr.lkey, 8, &ext);
  }, src_mr, dst_mr, d);
  // A doorbell that overtakes its WQE: ring index 0 of a fresh QP without writing the WQE.
  {
    const uint32_t qp = engine.new_qp(64);
    m::HostSq sq(nic.sq(qp));
    m::HostCq cq(nic.cq(qp));
    m::WqeImage img;
    const uint32_t ds = m::build_rdma_write(img, sq.header(true), dst_mr.addr, dst_mr.rkey, src_mr.addr, src_mr.lkey, 8);
    (void)ds;
    // Slot 0 holds zeros, but the ctrl of index 0 is all zero too: make it look like an old pass.
    m::WqeImage stale = img;
    m::set_ctrl_seg(stale.seg[0], 0xffc0, m::kOpcodeRdmaWrite, 0, nic.sq(qp).qpn, m::kCtrlCqUpdate, 3, 0, 0);
    m::store_wqe(nic.sq(qp).buf, 64, 0, stale, 3);
    m::host_ring_doorbell(nic.sq(qp), 1, m::doorbell_value(img.seg[0]));
    m::CqeFields c;
    if (wait_cqe(cq, &c, qp, 0))
      CHECK(c.opcode == m::kCqeReqErr && c.syndrome == m::kSyndromeLocalQpOp,
            "stale WQE: expected LOCAL_QP_OP error, got opcode %u syndrome 0x%x", c.opcode, c.syndrome);
  }
  // Collapsed CQ: every CQE lands in entry 0; the consumer watches wqe_counter.
  {
    const uint32_t qp = engine.new_qp(64, /*collapsed=*/true);
    m::HostSq sq(nic.sq(qp));
    m::WqeImage img;
    for (int k = 0; k < 10; ++k)
      sq.push(img, m::build_rdma_write(img, sq.header(true), dst_mr.addr, dst_mr.rkey, src_mr.addr, src_mr.lkey, 8));
    sq.ring();
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    uint16_t seen = 0xffff;
    while (Clock::now() < deadline) {
      const uint32_t tail = __atomic_load_n(&nic.cq(qp).buf[0].w[15], __ATOMIC_ACQUIRE);
      seen = m::tail_wqe_counter(tail);
      if (m::op_own_opcode(m::tail_op_own(tail)) == m::kCqeReq && seen == 9) break;
      std::this_thread::yield();
    }
    CHECK(seen == 9, "collapsed CQ: last wqe_counter %u, expected 9", seen);
  }
  engine.stop();
  const sn::Counters c = engine.counters();
  CHECK(c.errors == 13 && c.flushes == 12, "engine counted %llu errors and %llu flushes, expected 13 and 12",
        (unsigned long long)c.errors, (unsigned long long)c.flushes);
  CHECK(c.stale_retries > 0, "the overtaken doorbell was not retried");
  std::printf("errors (%s engine): %llu error CQEs, %llu flushes, %llu stale retries\n", gpu ? "gpu" : "cpu",
              (unsigned long long)c.errors,
              (unsigned long long)c.flushes, (unsigned long long)c.stale_retries);
}

// A collapsed CQ names the *first* WQEBB of the newest completed WQE. The wait mini-gda's quiet
// does on the GPU (m::frontier_of_cqe for the frontier, m::completion_target for what to wait for)
// must end exactly when the last of a batch of 1..4-WQEBB WQEs (inline writes up to kMaxInlineRc
// bytes) is complete, never report a frontier past the producer, and never move backwards.
static void run_multi_wqebb_frontier(bool gpu) {
  sn::SoftNic nic;
  TestEngine engine(nic, gpu, 1);
  std::vector<uint8_t> src(4096);
  Buffer dst_buf(engine.place(), 64 * kSlot, 0);
  uint8_t* dst = dst_buf.p;
  std::mt19937 rng(7);
  for (auto& b : src) b = static_cast<uint8_t>(rng());  // inline payloads: no source MR
  auto dst_mr = nic.register_mr(dst, dst_buf.bytes, sn::kAccessRemoteWrite);
  sn::QueueConfig qc;
  qc.sq_wqebbs = 64;
  qc.collapsed_cq = true;
  const uint32_t qp = nic.create_qp(engine.queues(qc));
  engine.start();
  m::HostSq sq(nic.sq(qp));
  const m::Cqe64* cqe = nic.cq(qp).buf;
  unsigned long long frontier = 0;
  uint32_t multi = 0, multi_last = 0, slot = 0;
  for (int round = 0; round < 400 && gicomm::test::failures().load() == 0; ++round) {
    const uint32_t batch = 1 + rng() % 6;  // at most 24 WQEBBs in flight: the ring (64) never wraps onto them
    uint32_t last_slot = 0, last_len = 0, last_off = 0, last_wqebbs = 1;
    for (uint32_t k = 0; k < batch; ++k) {
      const uint32_t len = 1 + rng() % m::kMaxInlineRc;
      const uint32_t off = rng() % (4096 - len);
      last_slot = slot++ % 64;
      m::WqeImage img;
      const uint32_t ds = m::build_rdma_write_inline(img, sq.header(true), dst_mr.addr + last_slot * kSlot, dst_mr.rkey,
                                                     src.data() + off, len);
      last_wqebbs = m::wqebbs_of_ds(ds);
      multi += last_wqebbs > 1;
      sq.push(img, ds);
      last_len = len;
      last_off = off;
    }
    multi_last += last_wqebbs > 1;
    sq.ring();
    const unsigned long long target = m::completion_target(sq.pi(), last_wqebbs);
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (frontier < target) {
      const uint32_t tail = __atomic_load_n(&cqe->w[15], __ATOMIC_ACQUIRE);
      if (m::op_own_opcode(m::tail_op_own(tail)) == m::kCqeReq) {
        const unsigned long long f = m::frontier_of_cqe(frontier, m::tail_wqe_counter(tail));
        CHECK(f >= frontier && f <= sq.pi(), "round %d: frontier %llu (was %llu, producer at %u)", round, f, frontier,
              sq.pi());
        frontier = f;
      }
      if (Clock::now() > deadline) {
        CHECK(false, "round %d: frontier stuck at %llu, waiting for %llu (producer at %u)", round, frontier, target,
              sq.pi());
        break;
      }
    }
    frontier = sq.pi();  // the newest WQE is complete, so everything before it is (in-order completion)
    CHECK(std::memcmp(dst + last_slot * kSlot, src.data() + last_off, last_len) == 0,
          "round %d: the last %u-byte inline write did not land", round, last_len);
  }
  engine.stop();
  CHECK(multi > 100 && multi_last > 50, "only %u multi-WQEBB WQEs (%u last of a batch)", multi, multi_last);
  // The pure functions at their edges.
  CHECK(m::frontier_of_cqe(74, 70) == 74, "a CQE behind the base moved the frontier");
  CHECK(m::frontier_of_cqe(70, 70) == 71, "a CQE at the base: frontier %llu", m::frontier_of_cqe(70, 70));
  CHECK(m::frontier_of_cqe(65530, 4) == 65541, "16-bit wrap of the counter: frontier %llu",
        m::frontier_of_cqe(65530, 4));
  CHECK(m::completion_target(74, 4) == 71 && m::completion_target(74, 1) == 74 && m::completion_target(0, 0) == 0,
        "completion_target");
  std::printf("multi-WQEBB completion: 400 rounds, %u multi-WQEBB WQEs (%u last of a batch), frontier %llu, producer %u\n",
              multi, multi_last, frontier, sq.pi());
}

// An empty RDMA write, pointer or inline, as rdma-core posts it (ctrl + raddr, ds 2: no data or
// inline segment), completes with byte count 0, moves nothing and checks no rkey (IBA C9-88); the
// writes around it land as usual.
static void run_empty_writes(bool gpu) {
  sn::SoftNic nic;
  TestEngine engine(nic, gpu, 1);
  Buffer src(engine.place(), 256, 0x5a), dst(engine.place(), 256, 0xee);
  auto src_mr = nic.register_mr(src.p, src.bytes, 0);
  auto dst_mr = nic.register_mr(dst.p, dst.bytes, sn::kAccessRemoteWrite);
  const uint32_t qp = engine.new_qp(64);
  engine.start();
  m::HostSq sq(nic.sq(qp));
  m::HostCq cq(nic.cq(qp));
  m::WqeImage img;
  uint32_t expect[4];
  uint32_t ds = m::build_rdma_write(img, sq.header(true), dst_mr.addr, dst_mr.rkey, src_mr.addr, src_mr.lkey, 8);
  expect[0] = sq.push(img, ds);
  ds = m::build_rdma_write(img, sq.header(true), dst_mr.addr + 64, 0xbad00, src_mr.addr, src_mr.lkey, 0);
  CHECK(ds == 2, "empty pointer write: ds %u", ds);
  expect[1] = sq.push(img, ds);
  ds = m::build_rdma_write_inline(img, sq.header(true), dst_mr.addr + 96, 0xbad00, src.p, 0);
  CHECK(ds == 2, "empty inline write: ds %u", ds);
  expect[2] = sq.push(img, ds);
  ds = m::build_rdma_write(img, sq.header(true), dst_mr.addr + 16, dst_mr.rkey, src_mr.addr, src_mr.lkey, 8);
  expect[3] = sq.push(img, ds);
  sq.ring();
  const uint32_t bytes[4] = {8, 0, 0, 8};
  for (int k = 0; k < 4; ++k) {
    m::CqeFields c;
    if (wait_cqe(cq, &c, qp, expect[k]))
      CHECK(c.opcode == m::kCqeReq && c.wqe_counter == expect[k] && c.byte_cnt == bytes[k],
            "empty writes: CQE %d opcode %u syndrome 0x%x counter %u byte count %u, expected a good one for %u with %u",
            k, c.opcode, c.syndrome, c.wqe_counter, c.byte_cnt, expect[k], bytes[k]);
  }
  engine.stop();
  bool ok = true;
  for (uint32_t b = 0; b < 256; ++b) ok = ok && dst.p[b] == ((b < 8 || (b >= 16 && b < 24)) ? 0x5a : 0xee);
  CHECK(ok, "empty writes: the destination holds bytes the two 8-byte writes did not write");
  const sn::Counters c = engine.counters();
  CHECK(c.wqes == 4 && c.errors == 0 && c.bytes == 16, "empty writes: engine %llu WQEs, %llu errors, %llu bytes",
        (unsigned long long)c.wqes, (unsigned long long)c.errors, (unsigned long long)c.bytes);
}

int main(int argc, char** argv) {
  bool errors_only = false, gpu = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--errors-only") {
      errors_only = true;
    } else if (a == "--engine" && i + 1 < argc && (std::string(argv[i + 1]) == "cpu" || std::string(argv[i + 1]) == "gpu")) {
      gpu = std::string(argv[++i]) == "gpu";
    } else {
      std::fprintf(stderr, "usage: %s [--errors-only] [--engine cpu|gpu]; unknown argument '%s'\n", argv[0], a.c_str());
      return 2;
    }
  }
  if (gpu) {
#if defined(GICOMM_TEST_GPU_ENGINE)
    if (!sn::cuda_available()) {
      std::printf("SKIP: --engine gpu: no GPU visible\n");
      return 77;
    }
#else
    std::printf("SKIP: --engine gpu: built without CUDA\n");
    return 77;
#endif
  }
  if (!errors_only) run_protocol(gpu);
  if (!errors_only) run_multi_wqebb_frontier(gpu);
  run_empty_writes(gpu);
  run_errors(gpu);
  if (gicomm::test::failures().load()) {
    std::fprintf(stderr, "FAILED (%d checks)\n", gicomm::test::failures().load());
    return 1;
  }
  return 0;
}
