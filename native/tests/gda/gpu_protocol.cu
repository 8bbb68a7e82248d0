// GPU protocol check of mini-gda on the softnic (needs a GPU; two for the peer-GPU engine).
//
// Engines: softnic-cpu (queues in pinned host memory, host threads poll); softnic-gpu (queues in
// GPU 0, engine kernel on GPU 1); softnic-gpu-same (engine kernel on 16 blocks of GPU 0 beside the
// producers). For each engine and each submission mode (per-thread, lock, hand-off, warp-
// cooperative, hybrid), GPU threads post RDMA writes with batches of 1..8 WQEs per doorbell to
// unique destination slots: inline and pointer payloads of 8..20 bytes (one WQEBB) in the shared-
// queue modes, up to 220-byte inline payloads (up to 4 WQEBBs) and 150-byte pointer payloads from
// aligned and odd source addresses in the per-thread modes. The host
// then checks every payload byte and that nothing else was written, that the engine executed
// exactly the WQEs posted with no error CQE, that each QP's last CQE names its last WQE and that
// quiet's completion frontier reached the producer index. Then: all seven ordering variants
// (per-thread mode), an error CQE (bad rkey) reported by the GPU with its syndrome, and a timeout
// (engine stopped) that ends the kernel with the QP and counters instead of hanging.
// Exit: 0 pass, 1 fail, 77 no GPU (ctest SKIP).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "gicomm/gda/gda.cuh"
#include "gicomm/gda/session.h"
#include "gicomm/softnic/gpu_engine.h"

using namespace gicomm;
using namespace gicomm::gda;

enum Mode { kThread = 0, kLock = 1, kHandoff = 2, kWarp = 3, kHybrid = 4 };
static const char* mode_name(int m) {
  const char* n[] = {"thread", "lock", "handoff", "warp", "hybrid"};
  return n[m];
}

constexpr uint32_t kSlot = 256;

__host__ __device__ inline uint64_t pattern(uint32_t t, uint32_t j) {
  uint64_t x = (uint64_t(t) << 32) ^ (j * 0x9e3779b97f4a7c15ull) ^ 0x5bd1e995ull;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  return x ^ (x >> 32);
}
// Narrow ops fit one WQEBB (the shared-queue modes need that); wide ops (per-thread modes) add
// inline payloads of 2..4 WQEBBs, whose completion a CQE names by their first WQEBB.
__host__ __device__ inline uint32_t op_length(uint32_t j, bool wide) {
  const uint32_t lens[8] = {8, 8, 16, 20, 60, 100, 150, mlx5::kMaxInlineRc};
  return wide ? lens[j % 8] : lens[j % 4];
}
__host__ __device__ inline bool op_inline(uint32_t j, bool wide) {
  const uint32_t k = j % (wide ? 8 : 4);
  return k == 0 || k == 3 || k == 4 || k == 5 || k == 7;
}
// Pointer source offset: the 150-byte pointer op reads from an odd address on odd threads, so the
// gpu engine's copy sees both an aligned source with a 6-byte tail and an unaligned one.
__host__ __device__ inline uint32_t op_src_offset(uint32_t t, uint32_t j, bool wide) {
  return wide && j % 8 == 6 && (t & 1) ? 3 : 0;
}
// WQEBBs of op j (as write_put encodes it).
inline uint32_t op_wqebbs(uint32_t j, bool wide) {
  const uint32_t len = op_length(j, wide);
  if (!op_inline(j, wide) || len == 8) return 1;
  return mlx5::wqebbs_of_ds(2 + mlx5::inline_seg_ds(len));
}

struct Buffers {
  uint8_t* dst;   // slots, poisoned with 0xee
  uint8_t* src;   // per-op source bytes (pointer payloads and inline sources)
  uint32_t dst_rkey, src_lkey;
};

__device__ inline PutOp make_op(const Buffers& b, uint32_t t, uint32_t j, uint32_t ops_per_thread, bool wide = false) {
  const uint64_t slot = uint64_t(t) * ops_per_thread + j;
  PutOp op{};
  op.raddr = reinterpret_cast<uint64_t>(b.dst + slot * kSlot);
  op.rkey = b.dst_rkey;
  op.lkey = b.src_lkey;
  op.laddr = reinterpret_cast<uint64_t>(b.src + slot * kSlot + op_src_offset(t, j, wide));
  op.length = op_length(j, wide);
  op.inline_data = op_inline(j, wide);
  op.value = pattern(t, j);
  return op;
}

template <int M, class Order>
__global__ void protocol_kernel(Context ctx, Buffers b, uint32_t ops_per_thread, bool wide) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t nthreads = gridDim.x * blockDim.x;
  const uint32_t qpi = (M == kWarp) ? (t / 32) % ctx.num_qps : t % ctx.num_qps;
  DeviceQp* qp = &ctx.qps[qpi];
  if (M == kThread || M == kHybrid) {
    // Threads own QPs: thread t uses QP t (the launch has as many threads as QPs).
    if (t >= ctx.num_qps) return;
    ThreadQp tq(qp);
    HybridThreadQp hq(qp);
    for (uint32_t j = 0; j < ops_per_thread; ++j) {
      const uint32_t batch = 1 + (t + j / 8) % 8;
      const bool last = (j % batch) == batch - 1 || j + 1 == ops_per_thread;
      const PutOp op = make_op(b, t, j, ops_per_thread, wide);
      const bool ok = (M == kThread) ? tq.put<Order>(ctx, op, last) : hq.put(ctx, op, last);
      if (!ok) return;
    }
    if (M == kThread) {
      tq.quiet(ctx);
      tq.flush();
    } else {
      hq.t.quiet(ctx);
      hq.t.flush();
    }
    return;
  }
  if (M == kWarp) {
    for (uint32_t j = 0; j < ops_per_thread; ++j)
      if (!put_warp<Order>(ctx, *qp, make_op(b, t, j, ops_per_thread))) return;
  } else {
    PutOp ops[8];
    for (uint32_t j = 0; j < ops_per_thread;) {
      const uint32_t n = min(1 + (t + j) % 8, ops_per_thread - j);
      for (uint32_t i = 0; i < n; ++i) ops[i] = make_op(b, t, j + i, ops_per_thread);
      const bool ok = (M == kLock) ? put_locked<Order>(ctx, *qp, ops, n) : put_handoff<Order>(ctx, *qp, ops, n);
      if (!ok) return;
      j += n;
    }
  }
  (void)nthreads;
  quiet_qp(ctx, *qp);
}

struct Alloc {
  bool pinned;
  int dev;
  void* p = nullptr;
  size_t bytes;
  Alloc(bool pinned_, int dev_, size_t n) : pinned(pinned_), dev(dev_), bytes(n) {
    if (pinned) {
      CUDA(cudaHostAlloc(&p, n, cudaHostAllocMapped | cudaHostAllocPortable));
    } else {
      CUDA(cudaSetDevice(dev));
      CUDA(cudaMalloc(&p, n));
    }
  }
  ~Alloc() {
    if (pinned) {
      cudaFreeHost(p);
    } else {
      cudaFree(p);
    }
  }
  void upload(const void* h) { CUDA(cudaMemcpy(p, h, bytes, cudaMemcpyDefault)); }
  void download(void* h) const { CUDA(cudaMemcpy(h, p, bytes, cudaMemcpyDefault)); }
};

// Engines: softnic-cpu; softnic-gpu (engine kernel on GPU 1, the producer's peer); softnic-gpu-same
// (engine kernel on 16 blocks of GPU 0 beside the producer: "reserved SMs of one GPU"). With the
// engine on the producer's GPU nothing may synchronize the whole device while it runs (it is a
// persistent kernel): kernels are waited for on their stream, buffers freed after stop_engine().
static SessionConfig session_for(const std::string& engine) {
  SessionConfig sc;
  sc.engine = engine == "softnic-gpu-same" ? "softnic-gpu" : engine;
  if (engine == "softnic-gpu-same") {
    sc.engine_device = 0;
    sc.engine_blocks = 16;
  }
  return sc;
}

template <int M, class Order>
static void run_mode(const std::string& engine, uint32_t num_qps, uint32_t threads, uint32_t ops) {
  SessionConfig sc = session_for(engine);
  sc.num_qps = num_qps;
  sc.sq_wqebbs = 256;
  sc.hybrid = M == kHybrid;
  sc.timeout_ms = 5000;
  Session s(sc);
  const bool host_buffers = engine == "softnic-cpu";
  const size_t slots = size_t(threads) * ops;
  Alloc dst(host_buffers, 0, slots * kSlot), src(host_buffers, 0, slots * kSlot);
  std::vector<uint8_t> hsrc(slots * kSlot), hdst(slots * kSlot, 0xee);
  for (uint32_t t = 0; t < threads; ++t)
    for (uint32_t j = 0; j < ops; ++j)
      for (uint32_t k = 0; k < kSlot; ++k)
        hsrc[(size_t(t) * ops + j) * kSlot + k] = static_cast<uint8_t>(pattern(t, j) >> ((k % 8) * 8)) ^ uint8_t(k / 8);
  src.upload(hsrc.data());
  dst.upload(hdst.data());
  Buffers b;
  b.dst = static_cast<uint8_t*>(dst.p);
  b.src = static_cast<uint8_t*>(src.p);
  b.dst_rkey = s.register_mr(dst.p, dst.bytes, softnic::kAccessRemoteWrite).rkey;
  b.src_lkey = s.register_mr(src.p, src.bytes, 0).lkey;
  s.start_engine();
  CUDA(cudaSetDevice(0));
  const uint32_t block = threads < 128 ? threads : 128;
  const bool wide = M == kThread || M == kHybrid;
  protocol_kernel<M, Order><<<(threads + block - 1) / block, block>>>(s.context(), b, ops, wide);
  CUDA(cudaGetLastError());
  CUDA(cudaStreamSynchronize(0));
  const std::string err = s.take_error();
  s.stop_engine();
  const softnic::Counters c = s.engine_counters();
  const std::string label = engine + "/" + mode_name(M) + "/" + Order::name;
  CHECK(err.empty(), "%s: kernel reported: %s", label.c_str(), err.c_str());
  CHECK(c.wqes == slots && c.errors == 0 && c.flushes == 0, "%s: engine executed %llu WQEs (%llu errors), expected %zu",
        label.c_str(), (unsigned long long)c.wqes, (unsigned long long)c.errors, slots);
  dst.download(hdst.data());
  size_t bad = 0;
  for (uint32_t t = 0; t < threads; ++t)
    for (uint32_t j = 0; j < ops; ++j) {
      const uint8_t* slot = &hdst[(size_t(t) * ops + j) * kSlot];
      const uint32_t len = op_length(j, wide);
      uint8_t expect[kSlot];
      if (op_inline(j, wide) && len == 8) {
        const uint64_t v = pattern(t, j);
        std::memcpy(expect, &v, 8);
      } else {
        std::memcpy(expect, &hsrc[(size_t(t) * ops + j) * kSlot + op_src_offset(t, j, wide)], len);
      }
      bool ok = std::memcmp(slot, expect, len) == 0;
      for (uint32_t k = len; k < kSlot; ++k) ok = ok && slot[k] == 0xee;
      if (!ok && bad++ < 3)
        std::fprintf(stderr, "%s: slot t=%u j=%u len=%u wrong\n", label.c_str(), t, j, len);
    }
  CHECK(bad == 0, "%s: %zu of %zu slots wrong", label.c_str(), bad, slots);
  // Each QP's collapsed CQE names its last WQE (by its first WQEBB), and the quiet's frontier
  // reached the producer index exactly (a multi-WQEBB last WQE included).
  const auto qps = s.read_qps();
  for (uint32_t i = 0; i < num_qps; ++i) {
    mlx5::Cqe64 cqe;
    CUDA(cudaMemcpy(&cqe, qps[i].cqe, sizeof cqe, cudaMemcpyDefault));
    const mlx5::CqeFields f = mlx5::decode_cqe(cqe);
    const uint64_t posted = qps[i].resv_head;
    if (posted == 0) continue;
    const uint32_t nbb = wide ? op_wqebbs(ops - 1, true) : 1;  // per-thread modes: QP i's last op is thread i's
    CHECK(f.opcode == mlx5::kCqeReq && f.wqe_counter == static_cast<uint16_t>(posted - nbb),
          "%s: QP %u last CQE opcode %u counter %u, expected counter %u", label.c_str(), i, f.opcode, f.wqe_counter,
          unsigned(static_cast<uint16_t>(posted - nbb)));
    CHECK(qps[i].cons_head == posted, "%s: QP %u: quiet ended at WQEBB %llu, producer at %llu", label.c_str(), i,
          (unsigned long long)qps[i].cons_head, (unsigned long long)posted);
  }

  std::printf("%-40s %6zu WQEs ok (stale retries %llu)\n", label.c_str(), slots, (unsigned long long)c.stale_retries);
}

// Bad rkey: the GPU must see the error CQE and report its syndrome.
__global__ void bad_rkey_kernel(Context ctx, uint64_t raddr, uint32_t rkey) {
  ThreadQp tq(&ctx.qps[0]);
  PutOp op{};
  op.raddr = raddr;
  op.rkey = rkey ^ 0x100;
  op.length = 8;
  op.inline_data = true;
  op.value = 42;
  if (tq.put<order::GpuFence>(ctx, op, true)) tq.quiet(ctx);
}

// Engine stopped: the quiet must time out with the QP and counters.
__global__ void timeout_kernel(Context ctx, uint64_t raddr, uint32_t rkey) {
  ThreadQp tq(&ctx.qps[0]);
  PutOp op{};
  op.raddr = raddr;
  op.rkey = rkey;
  op.length = 8;
  op.inline_data = true;
  if (tq.put<order::GpuFence>(ctx, op, true)) tq.quiet(ctx);
}

static void run_failures(const std::string& engine) {
  for (int which = 0; which < 2; ++which) {
    SessionConfig sc = session_for(engine);
    sc.num_qps = 1;
    sc.timeout_ms = 300;
    Session s(sc);
    Alloc dst(engine == "softnic-cpu", 0, 4096);
    const auto mr = s.register_mr(dst.p, 4096, softnic::kAccessRemoteWrite);
    CUDA(cudaSetDevice(0));
    if (which == 0) {
      s.start_engine();
      bad_rkey_kernel<<<1, 1>>>(s.context(), mr.addr, mr.rkey);
    } else {
      timeout_kernel<<<1, 1>>>(s.context(), mr.addr, mr.rkey);  // no engine running
    }
    CUDA(cudaStreamSynchronize(0));
    const std::string err = s.take_error();
    s.stop_engine();
    if (which == 0) {
      CHECK(err.find("error CQE") != std::string::npos && err.find("syndrome 0x13") != std::string::npos,
            "%s: bad rkey: expected an error CQE with syndrome 0x13, got '%s'", engine.c_str(), err.c_str());
    } else {
      CHECK(err.find("CQ poll") != std::string::npos && err.find("QP 0") != std::string::npos &&
                err.find("expected 1, last seen 0") != std::string::npos,
            "%s: timeout: expected a CQ-poll timeout naming QP 0 and counters, got '%s'", engine.c_str(), err.c_str());
    }
    std::printf("%-40s reported: %s\n", (engine + (which ? "/timeout" : "/bad-rkey")).c_str(), err.c_str());
  }
}

template <class Order>
static void run_variant(const std::string& engine) {
  run_mode<kThread, Order>(engine, 16, 16, 304);  // the last op: 220 B inline, 4 WQEBBs
}

int main(int argc, char** argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("SKIP: no GPU visible\n");
    return 77;
  }
  std::vector<std::string> engines = {"softnic-cpu", "softnic-gpu-same"};
  if (ndev >= 2) engines.push_back("softnic-gpu");
  if (argc > 1) engines = {argv[1]};
  for (const std::string& e : engines) {
    run_mode<kThread, order::GpuFence>(e, 64, 64, 400);  // ends with a 4-WQEBB inline op
    run_mode<kLock, order::GpuFence>(e, 8, 256, 64);
    run_mode<kHandoff, order::GpuFence>(e, 8, 256, 64);
    run_mode<kWarp, order::GpuFence>(e, 8, 256, 64);
    run_mode<kHybrid, order::GpuFence>(e, 16, 16, 304);
    run_variant<order::None>(e);
    run_variant<order::FencedDbrec>(e);
    run_variant<order::GpuRelease>(e);
    run_variant<order::ThreadFence>(e);
    run_variant<order::SysRelease>(e);
    run_variant<order::SysFence>(e);
    run_failures(e);
  }
  if (ndev < 2) std::printf("note: one GPU only: the gpu engine ran on reserved SMs of GPU 0; its peer-GPU placement was not checked\n");
  if (gicomm::test::failures()) {
    std::printf("gpu protocol: %d FAILURES\n", gicomm::test::failures().load());
    return 1;
  }
  std::printf("gpu protocol: all checks passed\n");
  return 0;
}
