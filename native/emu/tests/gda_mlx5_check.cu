// gicomm-emu-gda-check: mini-gda's mlx5 placement (gicomm::gda::Session, engine "mlx5",
// unmodified) on the emulated rdma-core, on one GPU. Run it through gicomm-emu-run.
//
// The session creates its queues exactly as on a ConnectX: DEVX CQs and RC QPs in one GPU buffer
// (a umem: dmabuf refused by the emulated device, so registered by address), the UAR's doorbell
// register mapped into the GPU (IoMemory refused for an ordinary page, so pinned host memory:
// doorbell_target "pinned-host"), MRs over GPU memory by address. GPU threads then build mlx5 WQEs
// and ring; the emulated NIC's engine reads the WQEs from GPU memory, moves the payloads and
// writes the CQEs back into GPU memory with CUDA copies while the kernels spin on them.
//
// Checks, each with every payload byte and nothing else written:
//   thread  one QP per thread, batches of 1..8 WQEs per doorbell, inline payloads of 8..220 bytes
//           (1..4 WQEBBs) and pointer payloads of 8..150 bytes (odd source addresses included)
//   lock    four threads per QP (a lock per batch), single-WQEBB ops
//   warp    warp-cooperative publication, two warps per QP
//   then: a bad rkey (the GPU sees the error CQE and reports its syndrome, REMOTE_ACCESS 0x13),
//   and an emulated put+quiet round trip measured with the GPU's globaltimer (an emulated number).
// Output: one line per check; one JSON line per measurement. Exit 0 pass, 1 fail, 3 not on the
// emulated rdma-core, 77 no GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gicomm/gda/gda.cuh"
#include "gicomm/gda/session.h"
#include "expect.h"
#include "gicomm/mlx5dev/devx.h"

using namespace gicomm;
using namespace gicomm::gda;

namespace {

void cuda_or_exit(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "gicomm-emu-gda-check: %s: %s\n", call, cudaGetErrorString(e));
  std::exit(1);
}
#define CU(x) cuda_or_exit((x), #x)

constexpr uint32_t kSlot = 256;
enum Mode { kThread, kLock, kWarp };
const char* const kModeName[] = {"thread", "lock", "warp"};

__host__ __device__ inline uint8_t byte_of(uint64_t slot, uint32_t k) {
  return static_cast<uint8_t>((slot * 0x9e3779b1u) >> (8 * (k % 4))) ^ static_cast<uint8_t>(k * 7 + 1);
}
// Per-thread mode ops cycle through inline and pointer payloads of every WQE size; the shared
// modes use single-WQEBB ops (8-byte inline values and 24-byte pointer payloads).
struct OpShape {
  uint32_t length;
  bool inl;
  uint32_t src_skew;  // pointer sources at odd addresses too
};
__host__ __device__ inline OpShape shape(Mode m, uint32_t j) {
  if (m != kThread) return j % 2 == 0 ? OpShape{8, true, 0} : OpShape{24, false, 0};
  const OpShape shapes[6] = {{8, true, 0}, {8, false, 0}, {60, true, 0}, {150, false, 3}, {mlx5::kMaxInlineRc, true, 0}, {16, false, 1}};
  return shapes[j % 6];
}
__host__ __device__ inline uint64_t value_of(uint64_t slot) { return 0x6d6c7835ull << 32 | slot; }

struct Buffers {
  uint8_t* dst;  // kSlot per op, poisoned 0xee
  uint8_t* src;  // kSlot per op: the pointer and long-inline sources
  uint32_t rkey, lkey;
};

__device__ PutOp make(const Buffers& b, Mode m, uint64_t slot, uint32_t j) {
  const OpShape s = shape(m, j);
  PutOp op{};
  op.raddr = reinterpret_cast<uint64_t>(b.dst + slot * kSlot);
  op.rkey = b.rkey;
  op.lkey = b.lkey;
  op.laddr = reinterpret_cast<uint64_t>(b.src + slot * kSlot + s.src_skew);
  op.length = s.length;
  op.inline_data = s.inl;
  op.value = value_of(slot);
  return op;
}

template <int M>
__global__ void puts_kernel(Context ctx, Buffers b, uint32_t ops, uint32_t threads_per_qp) {
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (M == kThread) {
    if (t >= ctx.num_qps) return;
    ThreadQp q(&ctx.qps[t]);
    for (uint32_t j = 0; j < ops; ++j) {
      const uint32_t batch = 1 + (t + j / 8) % 8;
      if (!q.put<order::GpuFence>(ctx, make(b, kThread, uint64_t(t) * ops + j, j), j % batch == batch - 1 || j + 1 == ops)) return;
    }
    if (q.quiet(ctx)) q.flush();
    return;
  }
  DeviceQp& qp = ctx.qps[M == kWarp ? (t / 32) % ctx.num_qps : t / threads_per_qp];
  if (M == kWarp) {
    for (uint32_t j = 0; j < ops; ++j)
      if (!put_warp<order::GpuFence>(ctx, qp, make(b, kWarp, uint64_t(t) * ops + j, j))) return;
  } else {
    PutOp batch[4];
    for (uint32_t j = 0; j < ops;) {
      const uint32_t n = min(1 + (t + j) % 4, ops - j);
      for (uint32_t i = 0; i < n; ++i) batch[i] = make(b, kLock, uint64_t(t) * ops + j + i, j + i);
      if (!put_locked<order::GpuFence>(ctx, qp, batch, n)) return;
      j += n;
    }
  }
  quiet_qp(ctx, qp);
}

struct GpuBuf {
  void* p = nullptr;
  size_t n;
  explicit GpuBuf(size_t bytes) : n((bytes + 0xfffff) & ~size_t(0xfffff)) { CU(cudaMalloc(&p, n)); }  // whole 1 MiB units
  ~GpuBuf() { cudaFree(p); }
};

SessionConfig mlx5_config(uint32_t qps, uint32_t timeout_ms) {
  SessionConfig sc;
  sc.engine = "mlx5";
  sc.num_qps = qps;
  sc.sq_wqebbs = 256;
  sc.timeout_ms = timeout_ms;
  return sc;
}

template <int M>
void check_mode(uint32_t qps, uint32_t threads, uint32_t ops) {
  const char* name = kModeName[M];
  Session s(mlx5_config(qps, 10000));
  const size_t slots = size_t(threads) * ops;
  GpuBuf dst(slots * kSlot), src(slots * kSlot);
  std::vector<uint8_t> hsrc(slots * kSlot), hdst(slots * kSlot);
  for (size_t slot = 0; slot < slots; ++slot)
    for (uint32_t k = 0; k < kSlot; ++k) hsrc[slot * kSlot + k] = byte_of(slot, k);
  CU(cudaMemcpy(src.p, hsrc.data(), hsrc.size(), cudaMemcpyHostToDevice));
  CU(cudaMemset(dst.p, 0xee, dst.n));
  Buffers b{static_cast<uint8_t*>(dst.p), static_cast<uint8_t*>(src.p), 0, 0};
  b.rkey = s.register_mr(dst.p, dst.n, softnic::kAccessRemoteWrite).rkey;
  b.lkey = s.register_mr(src.p, src.n, 0).lkey;
  cudaEvent_t t0, t1;
  CU(cudaEventCreate(&t0));
  CU(cudaEventCreate(&t1));
  CU(cudaEventRecord(t0));
  puts_kernel<M><<<(threads + 63) / 64, std::min<uint32_t>(threads, 64)>>>(s.context(), b, ops, threads / qps);
  CU(cudaGetLastError());
  CU(cudaEventRecord(t1));
  CU(cudaEventSynchronize(t1));
  float ms = 0;
  cudaEventElapsedTime(&ms, t0, t1);
  const std::string err = s.take_error();
  EXPECT(err.empty(), "%s: the kernel reported: %s", name, err.c_str());
  CU(cudaMemcpy(hdst.data(), dst.p, hdst.size(), cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (uint32_t t = 0; t < threads; ++t)
    for (uint32_t j = 0; j < ops; ++j) {
      const uint64_t slot = uint64_t(t) * ops + j;
      const OpShape sh = shape(static_cast<Mode>(M), j);
      const uint8_t* got = &hdst[slot * kSlot];
      bool ok = true;
      if (sh.inl && sh.length == 8) {
        const uint64_t v = value_of(slot);
        ok = std::memcmp(got, &v, 8) == 0;
      } else {
        ok = std::memcmp(got, &hsrc[slot * kSlot + sh.src_skew], sh.length) == 0;
      }
      for (uint32_t k = sh.length; k < kSlot; ++k) ok = ok && got[k] == 0xee;
      if (!ok && wrong++ < 3) std::fprintf(stderr, "%s: slot %llu (thread %u op %u, %u bytes %s) wrong\n", name,
                                           (unsigned long long)slot, t, j, sh.length, sh.inl ? "inline" : "pointer");
    }
  EXPECT(wrong == 0, "%s: %zu of %zu payloads wrong", name, wrong, slots);
  // Every QP's collapsed CQE is a good completion at the end, and quiet reached the producer.
  size_t cqe_bad = 0;
  for (const DeviceQp& q : s.read_qps()) {
    mlx5::Cqe64 cqe;
    CU(cudaMemcpy(&cqe, q.cqe, sizeof cqe, cudaMemcpyDeviceToHost));
    const mlx5::CqeFields f = mlx5::decode_cqe(cqe);
    if (q.resv_head != 0 && (f.opcode != mlx5::kCqeReq || q.cons_head < q.resv_head)) ++cqe_bad;
  }
  EXPECT(cqe_bad == 0, "%s: %zu QPs without a final good CQE or with quiet short of the producer", name, cqe_bad);
  std::printf("%-7s %5zu puts over %u QPs: %s (%.1f ms; doorbell %s)\n", name, slots, qps,
              wrong == 0 && err.empty() && cqe_bad == 0 ? "ok" : "FAIL", ms, s.doorbell_target().c_str());
  std::printf("{\"check\": \"%s\", \"puts\": %zu, \"qps\": %u, \"ms\": %.2f, \"ok\": %s, \"doorbell_target\": \"%s\"}\n", name,
              slots, qps, ms, wrong == 0 && err.empty() && cqe_bad == 0 ? "true" : "false", s.doorbell_target().c_str());
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
}

__global__ void bad_rkey_kernel(Context ctx, uint64_t raddr, uint32_t rkey) {
  ThreadQp q(&ctx.qps[0]);
  PutOp op{};
  op.raddr = raddr;
  op.rkey = rkey ^ 0x100;
  op.length = 8;
  op.inline_data = true;
  op.value = 1;
  if (q.put<order::GpuFence>(ctx, op, true)) q.quiet(ctx);
}

void check_bad_rkey() {
  Session s(mlx5_config(1, 5000));
  GpuBuf dst(4096);
  CU(cudaMemset(dst.p, 0, dst.n));
  const auto mr = s.register_mr(dst.p, dst.n, softnic::kAccessRemoteWrite);
  bad_rkey_kernel<<<1, 1>>>(s.context(), mr.addr, mr.rkey);
  CU(cudaGetLastError());
  CU(cudaDeviceSynchronize());
  const std::string err = s.take_error();
  uint64_t landed = 1;
  CU(cudaMemcpy(&landed, dst.p, 8, cudaMemcpyDeviceToHost));
  const bool ok = err.find("error CQE") != std::string::npos && err.find("syndrome 0x13") != std::string::npos && landed == 0;
  EXPECT(ok, "bad rkey: reported '%s', word %llu", err.c_str(), (unsigned long long)landed);
  std::printf("%-7s error CQE seen by the GPU: %s\n", "bad-key", ok ? "ok" : "FAIL");
}

__global__ void round_trip_kernel(Context ctx, uint64_t raddr, uint32_t rkey, uint32_t iters, unsigned long long* ns) {
  ThreadQp q(&ctx.qps[0]);
  PutOp op{};
  op.raddr = raddr;
  op.rkey = rkey;
  op.length = 8;
  op.inline_data = true;
  for (uint32_t i = 0; i < iters; ++i) {
    op.value = i;
    const unsigned long long t0 = order::globaltimer_ns();
    if (!q.put<order::GpuFence>(ctx, op, true) || !q.quiet(ctx)) return;
    ns[i] = order::globaltimer_ns() - t0;
  }
}

void measure_round_trip(uint32_t iters) {
  Session s(mlx5_config(1, 5000));
  GpuBuf dst(4096), times(iters * sizeof(unsigned long long));
  const auto mr = s.register_mr(dst.p, dst.n, softnic::kAccessRemoteWrite);
  CU(cudaMemset(times.p, 0, times.n));
  round_trip_kernel<<<1, 1>>>(s.context(), mr.addr, mr.rkey, iters, static_cast<unsigned long long*>(times.p));
  CU(cudaGetLastError());
  CU(cudaDeviceSynchronize());
  const std::string err = s.take_error();
  EXPECT(err.empty(), "round trip: %s", err.c_str());
  std::vector<unsigned long long> ns(iters);
  CU(cudaMemcpy(ns.data(), times.p, iters * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  std::sort(ns.begin(), ns.end());
  const bool ok = err.empty() && ns[0] > 0;
  std::printf("{\"path\": \"mini-gda-mlx5\", \"provider\": \"%s\", \"metric\": \"put_quiet_ns\", \"value\": %llu, \"p10\": %llu, "
              "\"p90\": %llu, \"n\": %u, \"ok\": %s, \"note\": \"emulated NIC: engine on the host CPU, CUDA copies; not a NIC number\"}\n",
              mlx5dev::rdma_provider().c_str(), ns[iters / 2], ns[iters / 10], ns[iters * 9 / 10], iters, ok ? "true" : "false");
}

}  // namespace

int main() {
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
    std::fprintf(stderr, "gicomm-emu-gda-check: no GPU\n");
    return 77;
  }
  const std::string provider = mlx5dev::rdma_provider();
  if (provider != "emulated") {
    std::fprintf(stderr, "gicomm-emu-gda-check: run it through gicomm-emu-run (this process has %s)\n", provider.c_str());
    return 3;
  }
  try {
    check_mode<kThread>(32, 32, 60);
    check_mode<kLock>(8, 32, 64);
    check_mode<kWarp>(2, 128, 32);
    check_bad_rkey();
    measure_round_trip(1000);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gicomm-emu-gda-check: %s\n", e.what());
    return 1;
  }
  std::printf("gicomm-emu-gda-check: %s (%s)\n", expect_failures() == 0 ? "ok" : "FAIL", provider.c_str());
  return expect_failures() == 0 ? 0 : 1;
}
