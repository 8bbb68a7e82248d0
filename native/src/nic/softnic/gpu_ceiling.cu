// The gpu engine's ceiling per WQE shape (see gicomm/softnic/gpu_ceiling.h).
#include "gicomm/softnic/gpu_ceiling.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "gicomm/common/clock.cuh"
#include "gicomm/mlx5/doorbell.h"
#include "gicomm/order.cuh"
#include "gicomm/softnic/gpu_engine.h"
#include "gicomm/softnic/peer_access.h"
#include "gicomm/softnic/softnic.h"

namespace gicomm::softnic {

using namespace gicomm::mlx5;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("engine ceiling: ") + what + ": " + cudaGetErrorString(e));
}

[[noreturn]] void refuse(const std::string& key, long long value, const std::string& allowed) {
  throw std::invalid_argument("engine ceiling: " + key + " " + std::to_string(value) + " (allowed: " + allowed + ")");
}

// What the kernels need of a QP.
struct RingQp {
  SqDesc sq;
  const Cqe64* cqe;  // the collapsed CQ's entry
};

// Where a round's payloads come from and go. WQE i of QP q writes destination slot
// (q * depth + i) mod dst_slots, except each QP's last WQE, which writes the QP's own check slot
// (dst_slots + q) so its payload can be verified; its source is slot i mod src_slots.
struct Layout {
  uint64_t dst, src;
  uint32_t dst_slots, src_slots, slot_bytes;
  uint32_t rkey, lkey;
  uint32_t bytes, nbb, depth;
  bool inl;
};

__device__ __forceinline__ uint64_t dst_of(const Layout& l, uint32_t qp, uint32_t i) {
  const uint64_t slot = i + 1 == l.depth ? uint64_t(l.dst_slots) + qp : (uint64_t(qp) * l.depth + i) % l.dst_slots;
  return l.dst + slot * l.slot_bytes;
}
__device__ __forceinline__ uint64_t src_of(const Layout& l, uint32_t i) {
  return l.src + uint64_t(i % l.src_slots) * l.slot_bytes;
}

__global__ void fill_pattern_kernel(uint8_t* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = static_cast<uint8_t>((i * 131u + (i >> 8) * 7u + 1u) & 0xff);
}

// Writes the round's WQEs (one block per QP) at WQEBB `base` of every ring.
__global__ void prefill_kernel(const RingQp* qps, Layout l, uint32_t base) {
  const RingQp& q = qps[blockIdx.x];
  for (uint32_t i = threadIdx.x; i < l.depth; i += blockDim.x) {
    const uint32_t pi = base + i * l.nbb;
    WqeHeader h;
    h.pi = static_cast<uint16_t>(pi);
    h.qpn = q.sq.qpn;
    h.signaled = true;
    const uint64_t raddr = dst_of(l, blockIdx.x, i);
    const uint64_t src = src_of(l, i);
    if (l.inl && l.bytes == 8) {
      WqeImage img;
      build_rdma_write_inline_u64(img, h, raddr, l.rkey, *reinterpret_cast<const uint64_t*>(src));
      store_wqe(q.sq.buf, q.sq.wqe_cnt, pi, img, 3);
    } else if (l.inl) {
      Seg16 ctrl;
      store_rdma_write_inline(q.sq.buf, q.sq.wqe_cnt, pi, h, raddr, l.rkey, reinterpret_cast<const void*>(src), l.bytes,
                              &ctrl);
    } else {
      WqeImage img;
      const uint32_t ds = build_rdma_write(img, h, raddr, l.rkey, src, l.lkey, l.bytes);
      store_wqe(q.sq.buf, q.sq.wqe_cnt, pi, img, ds);
    }
  }
}

struct QpRound {
  unsigned long long t0, t1;  // doorbell, last CQE seen (%globaltimer ns)
  int status;                 // 0 ok, 1 timeout, 2 error CQE
  uint32_t seen;              // last wqe_counter seen
  uint32_t syndrome;
};

// One thread per QP: ring once for the whole window, wait (bounded) for the CQE naming the last WQE.
__global__ void ring_wait_kernel(const RingQp* qps, Layout l, uint32_t base, unsigned long long timeout_ns,
                                 QpRound* out, ClockSample* clock) {
  const RingQp& q = qps[blockIdx.x];
  const uint32_t last = base + (l.depth - 1) * l.nbb;
  const uint8_t ds = static_cast<uint8_t>(l.inl ? 2 + (l.bytes == 8 ? 1 : inline_seg_ds(l.bytes)) : 3);
  const uint64_t db = doorbell_value(static_cast<uint16_t>(last), q.sq.qpn, kOpcodeRdmaWrite, ds);
  const ClockSample c0 = clock_sample();
  QpRound o{};
  o.t0 = c0.ns;
  order::GpuFence::before_dbrec();
  order::GpuFence::store_dbrec(&q.sq.dbrec[kSndDbr], sq_dbrec_value(base + l.depth * l.nbb));
  order::GpuFence::before_doorbell();
  order::GpuFence::store_doorbell(q.sq.doorbell, db);
  for (uint32_t spin = 0;; ++spin) {
    const uint32_t tail = order::ld_relaxed_sys_u32(&q.cqe->w[15]);
    const uint8_t op = op_own_opcode(tail_op_own(tail));
    o.seen = tail_wqe_counter(tail);
    if (op == kCqeReqErr) {
      o.status = 2;
      o.syndrome = order::ld_relaxed_sys_u32(&q.cqe->w[13]) >> 24;
      break;
    }
    if (op == kCqeReq && o.seen == static_cast<uint16_t>(last)) break;
    if ((spin & 63) == 63 && globaltimer() - o.t0 > timeout_ns) {
      o.status = 1;
      break;
    }
  }
  const ClockSample c1 = clock_sample();
  o.t1 = c1.ns;
  out[blockIdx.x] = o;
  if (blockIdx.x == 0) {
    clock[0] = c0;
    clock[1] = c1;
  }
}

// Device memory of the producer GPU, freed after the engine stopped (declared before it).
struct DeviceBuffer {
  int dev;
  void* p = nullptr;
  DeviceBuffer(int device, size_t bytes) : dev(device) {
    check(cudaSetDevice(dev), "cudaSetDevice");
    check(cudaMalloc(&p, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() {
    cudaSetDevice(dev);
    cudaFree(p);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

uint32_t wqebbs_of_shape(const CeilingShape& s) {
  if (!s.inline_payload || s.bytes == 8) return 1;
  return wqebbs_of_ds(2 + inline_seg_ds(s.bytes));
}

}  // namespace

std::string describe(const CeilingShape& shape) {
  return std::string(shape.inline_payload ? "inline " : "pointer ") + std::to_string(shape.bytes) + " B";
}

CeilingResult measure_gpu_engine_ceiling(const CeilingConfig& c) {
  const uint32_t max_bytes = c.shape.inline_payload ? kMaxInlineRc : kMaxCeilingPointerBytes;
  if (c.shape.bytes < 1 || c.shape.bytes > max_bytes)
    refuse("bytes", c.shape.bytes, std::string("1..") + std::to_string(max_bytes) + " for a" +
                                       (c.shape.inline_payload ? "n inline" : " pointer") + " payload");
  if (c.qps < 1 || c.qps > SoftNic::kMaxQps) refuse("qps", c.qps, "1.." + std::to_string(SoftNic::kMaxQps));
  const uint32_t nbb = wqebbs_of_shape(c.shape);
  if (c.depth < 1 || uint64_t(c.depth) * nbb > 32768)
    refuse("depth", c.depth, "1.." + std::to_string(32768 / nbb) + " WQEs of " + std::to_string(nbb) + " WQEBBs");
  if (c.rounds < 1 || c.rounds > 1000) refuse("rounds", c.rounds, "1..1000");
  if (c.timeout_ms < 1) refuse("timeout_ms", c.timeout_ms, ">= 1");
  if (c.engine_warps_per_block < 1 || c.engine_warps_per_block > 32)
    refuse("engine_warps_per_block", c.engine_warps_per_block, "1..32");
  int ndev = 0;
  check(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
  if (c.producer_device < 0 || c.producer_device >= ndev)
    refuse("producer_device", c.producer_device, "0.." + std::to_string(ndev - 1));
  if (c.engine_device < 0 || c.engine_device >= ndev)
    refuse("engine_device", c.engine_device, "0.." + std::to_string(ndev - 1));
  const bool same = c.producer_device == c.engine_device;
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c.engine_device), "cudaDeviceGetAttribute");
  if (same && (c.engine_blocks < 1 || c.engine_blocks >= sms))
    refuse("engine_blocks", c.engine_blocks,
           "1.." + std::to_string(sms - 1) + " on one GPU: the timing kernel needs SMs the engine leaves free");
  if (c.engine_blocks < 0) refuse("engine_blocks", c.engine_blocks, "0 (every SM) or a positive count");
  const uint32_t slot_bytes = (c.shape.bytes + 63) / 64 * 64;
  if (c.max_dst_bytes < size_t(slot_bytes) * (c.qps + 1))
    refuse("max_dst_bytes", static_cast<long long>(c.max_dst_bytes),
           ">= " + std::to_string(size_t(slot_bytes) * (c.qps + 1)) + " (a slot per QP and one more)");
  uint32_t ring = 64;
  while (ring < c.depth * nbb) ring <<= 1;

  if (!same) enable_peer_access(c.producer_device, c.engine_device);
  const uint32_t dst_slots = static_cast<uint32_t>(
      std::min<uint64_t>(uint64_t(c.qps) * c.depth, c.max_dst_bytes / slot_bytes - c.qps));
  const uint32_t src_slots = std::min<uint32_t>(c.depth, 64);
  // Declared before the engine: freed after it stopped (a free on the engine's GPU would wait for it).
  SoftNic nic;
  DeviceBuffer dst(c.producer_device, size_t(dst_slots + c.qps) * slot_bytes);
  DeviceBuffer src(c.producer_device, size_t(src_slots) * slot_bytes);
  DeviceBuffer rounds_out(c.producer_device, sizeof(QpRound) * c.qps + 2 * sizeof(ClockSample));
  DeviceBuffer ring_qps(c.producer_device, sizeof(RingQp) * c.qps);
  // Every kernel and copy of the measurement goes to one non-blocking stream, waited for on its own
  // (a device-wide wait would wait for the persistent engine on the same GPU).
  check(cudaSetDevice(c.producer_device), "cudaSetDevice(producer)");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } stream_guard{stream};
  check(cudaMemsetAsync(dst.p, 0xee, size_t(dst_slots + c.qps) * slot_bytes, stream), "cudaMemset(dst)");
  fill_pattern_kernel<<<64, 256, 0, stream>>>(static_cast<uint8_t*>(src.p), size_t(src_slots) * slot_bytes);
  check(cudaGetLastError(), "fill kernel");
  check(cudaStreamSynchronize(stream), "fill kernel");
  const auto dmr = nic.register_mr(dst.p, size_t(dst_slots + c.qps) * slot_bytes, kAccessRemoteWrite);
  const auto smr = nic.register_mr(src.p, size_t(src_slots) * slot_bytes, 0);
  QueueConfig qc;
  qc.sq_wqebbs = ring;
  qc.cq_entries = 1;
  qc.collapsed_cq = true;
  qc.queues = MemoryPlace::gpu(c.producer_device);
  qc.doorbells = MemoryPlace::gpu(c.engine_device);
  std::vector<RingQp> host_qps(c.qps);
  for (uint32_t i = 0; i < c.qps; ++i) {
    const uint32_t qp = nic.create_qp(qc);
    host_qps[i] = RingQp{nic.sq(qp), nic.cq(qp).buf};
  }
  check(cudaSetDevice(c.producer_device), "cudaSetDevice(producer)");
  check(cudaMemcpyAsync(ring_qps.p, host_qps.data(), sizeof(RingQp) * c.qps, cudaMemcpyHostToDevice, stream),
        "copy QPs");
  check(cudaStreamSynchronize(stream), "copy QPs");
  GpuEngineConfig ec;
  ec.device = c.engine_device;
  ec.blocks = c.engine_blocks;
  ec.warps_per_block = c.engine_warps_per_block;
  ec.max_runtime_ms = static_cast<int>(std::min<uint64_t>(600000, 60000 + uint64_t(c.timeout_ms) * (c.rounds + 1)));
  GpuEngine engine(nic, ec);

  Layout l{};
  l.dst = dmr.addr;
  l.src = smr.addr;
  l.dst_slots = dst_slots;
  l.src_slots = src_slots;
  l.slot_bytes = slot_bytes;
  l.rkey = dmr.rkey;
  l.lkey = smr.lkey;
  l.bytes = c.shape.bytes;
  l.nbb = nbb;
  l.depth = c.depth;
  l.inl = c.shape.inline_payload;
  CeilingResult res;
  res.wqebbs_per_wqe = nbb;
  std::vector<double> clocks;
  std::string failure;
  engine.start();
  check(cudaSetDevice(c.producer_device), "cudaSetDevice(producer)");
  auto* d_out = static_cast<QpRound*>(rounds_out.p);
  auto* d_clock = reinterpret_cast<ClockSample*>(d_out + c.qps);
  std::vector<QpRound> out(c.qps);
  for (int r = 0; r <= c.rounds && failure.empty(); ++r) {
    const uint32_t base = static_cast<uint32_t>(r) * c.depth * nbb;
    prefill_kernel<<<c.qps, 256, 0, stream>>>(static_cast<const RingQp*>(ring_qps.p), l, base);
    ring_wait_kernel<<<c.qps, 1, 0, stream>>>(static_cast<const RingQp*>(ring_qps.p), l, base,
                                              uint64_t(c.timeout_ms) * 1000000ull, d_out, d_clock);
    cudaError_t e = cudaStreamSynchronize(stream);  // both kernels end: every wait is bounded
    ClockSample clk[2] = {};
    if (e == cudaSuccess) e = cudaMemcpyAsync(out.data(), d_out, sizeof(QpRound) * c.qps, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaMemcpyAsync(clk, d_clock, sizeof clk, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) {
      failure = std::string("round ") + std::to_string(r) + ": " + cudaGetErrorString(e);
      break;
    }
    unsigned long long first = ~0ull, last = 0;
    for (uint32_t q = 0; q < c.qps && failure.empty(); ++q) {
      if (out[q].status == 2)
        failure = "QP " + std::to_string(q) + ": error CQE for WQE " + std::to_string(out[q].seen) + ", syndrome " +
                  std::to_string(out[q].syndrome);
      if (out[q].status == 1)
        failure = "QP " + std::to_string(q) + ": no CQE for WQE " +
                  std::to_string((base + (c.depth - 1) * nbb) & 0xffff) + " within " + std::to_string(c.timeout_ms) +
                  " ms (last seen " + std::to_string(out[q].seen) + ")";
      first = std::min(first, out[q].t0);
      last = std::max(last, out[q].t1);
    }
    if (r == 0 || !failure.empty() || last <= first) continue;  // round 0 warms up
    const double seconds = double(last - first) * 1e-9;
    res.wqe_rate_mps.push_back(double(c.qps) * c.depth / seconds / 1e6);
    res.goodput_gbps.push_back(double(c.qps) * c.depth * c.shape.bytes / seconds / 1e9);
    clocks.push_back(sm_clock_mhz(clk[0], clk[1]));
  }
  engine.stop(20000);
  res.counters = engine.counters();
  if (!failure.empty()) throw std::runtime_error("engine ceiling, " + describe(c.shape) + ": " + failure);
  const uint64_t expected = uint64_t(c.qps) * c.depth * (c.rounds + 1);
  if (res.counters.wqes != expected || res.counters.errors != 0 || res.counters.flushes != 0)
    throw std::runtime_error("engine ceiling, " + describe(c.shape) + ": the engine executed " +
                             std::to_string(res.counters.wqes) + " WQEs (" + std::to_string(res.counters.errors) +
                             " errors, " + std::to_string(res.counters.flushes) + " flushes), expected " +
                             std::to_string(expected));
  // Each QP's last WQE wrote its check slot from source slot (depth - 1) mod src_slots.
  std::vector<uint8_t> got(size_t(c.qps) * slot_bytes), want(c.shape.bytes);
  check(cudaMemcpyAsync(got.data(), static_cast<uint8_t*>(dst.p) + size_t(dst_slots) * slot_bytes, got.size(),
                        cudaMemcpyDeviceToHost, stream),
        "copy check slots");
  check(cudaMemcpyAsync(want.data(), static_cast<uint8_t*>(src.p) + size_t((c.depth - 1) % src_slots) * slot_bytes,
                        want.size(), cudaMemcpyDeviceToHost, stream),
        "copy source slot");
  check(cudaStreamSynchronize(stream), "copy check slots");
  for (uint32_t q = 0; q < c.qps; ++q) {
    const uint8_t* slot = got.data() + size_t(q) * slot_bytes;
    bool ok = std::equal(want.begin(), want.end(), slot);
    for (uint32_t b = c.shape.bytes; b < slot_bytes; ++b) ok = ok && slot[b] == 0xee;
    if (!ok)
      throw std::runtime_error("engine ceiling, " + describe(c.shape) + ": QP " + std::to_string(q) +
                               ": the last WQE's destination does not hold its payload");
  }
  std::sort(clocks.begin(), clocks.end());
  res.sm_clock_mhz = clocks.empty() ? 0 : clocks[clocks.size() / 2];
  return res;
}

}  // namespace gicomm::softnic
