// Rank 1's GPU responder (harness/responder.h, `responder: gpu`): one GPU thread polls the word
// where rank 0's ping lands in rank 1's buffer (registered as mapped pinned host memory, where the
// NIC places the writes) and answers with the GPU producers' enqueue (enqueue_as) into a ring in
// mapped host memory, which rank 1's mini-proxy worker drains into its QP 0: the one-process pong
// of proxy_one_op (experiments/proxy/producers.cu), on the other rank. Every wait of the thread is
// bounded: a ping by the request's wait_ms, a full ring by --timeout-ms; the host's wait for the
// thread to end by both.
#include <unistd.h>

#include <cstdint>
#include <string>

#include "harness/cuda.h"
#include "harness/responder.h"
#include "harness/responder_parts.h"

namespace gicomm::bench {

namespace {

constexpr uint32_t kAnswerSlots = 256;  // the answers' ring, as the host responder's

struct GpuPongArgs {
  AnswerRule rule;
  const uint64_t* landing;       // rank 1's buffer, device address of the registered host memory
  proxy::RingView ring;          // the answers' ring, device view
  uint32_t tuned, store_scope;   // enqueue_as
  uint32_t muted;
  uint64_t wait_ns, timeout_ns;
  const uint64_t* stop;          // mapped: the host asks the thread to stop (non-zero)
  PongOutcome* out;              // mapped: what it saw, written once it ends
};

__global__ void gpu_pong(GpuPongArgs a) {
  proxy::TunedProducer tp{0, 0};
  PongOutcome o{};
  for (uint64_t i = 0;; ++i) {
    const uint32_t word = a.rule.ping_word(i);
    const uint64_t want = a.rule.ping_value(i);
    // The one-process pong's poll (producers.cu wait_word): one system-scope acquire load per
    // spin; the stop flag (another PCIe read) only every 256 spins.
    // The clock is read only once a wait begins, as there.
    uint64_t v = proxy::load_acquire_sys(a.landing + word);
    const uint64_t start = v == want ? 0 : proxy::now_ns();
    for (uint32_t spin = 1; v != want; ++spin) {
      if ((spin & 255) == 0 && proxy::load_relaxed_sys(a.stop) != 0) goto done;
      if (proxy::now_ns() - start > a.wait_ns) {
        o.why = kPongPingTimeout;
        o.at = i;
        o.word = word;
        o.held = v;
        goto done;
      }
      v = proxy::load_acquire_sys(a.landing + word);
    }
    ++o.seen;
    if (a.muted) continue;
    {
      proxy::WaitError e{};
      const uint32_t info = proxy::make_info(proxy::Op::write_inline, a.rule.pong_word(i), false);
      if (enqueue_as(a.ring, tp, a.rule.pong_value(i), info, a.tuned != 0, a.store_scope, a.timeout_ns, &e) ==
          ~0ull) {
        o.why = kPongRingFull;
        o.at = i;
        goto done;
      }
    }
    ++o.answered;
  }
done:
  *a.out = o;
  __threadfence_system();
}

// Rank 1's buffer, page-locked and mapped for the GPU for as long as the responder runs (the
// enclosing pages: registration works on whole pages). Memory already registered is used as is.
class MappedLanding {
 public:
  MappedLanding(const uint64_t* p, size_t bytes) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) & ~(page - 1);
    base_ = reinterpret_cast<void*>(begin);
    const cudaError_t e =
        cudaHostRegister(base_, end - begin, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (e == cudaErrorHostMemoryAlreadyRegistered) {
      cudaGetLastError();
    } else {
      GICOMM_CUDA(e);
      registered_ = true;
    }
    void* d = nullptr;
    GICOMM_CUDA(cudaHostGetDevicePointer(&d, const_cast<uint64_t*>(p), 0));
    device = static_cast<const uint64_t*>(d);
  }
  ~MappedLanding() {
    if (registered_) cudaHostUnregister(base_);
  }
  MappedLanding(const MappedLanding&) = delete;
  MappedLanding& operator=(const MappedLanding&) = delete;
  const uint64_t* device = nullptr;

 private:
  void* base_ = nullptr;
  bool registered_ = false;
};

class GpuPong final : public Responder {
 public:
  GpuPong(const ResponderSetup& s, const PongRequest& q)
      : q_(q),
        timeout_ns_(s.timeout_ns),
        landing_(s.landing, s.landing_bytes),
        slots_(kAnswerSlots),
        counters_(1),
        reserve_(1),
        stop_flag_(1),
        out_(1) {
    const proxy::RingViews ring = proxy::mapped_ring_views(0, kAnswerSlots, slots_.p, slots_.d, counters_.p,
                                                           counters_.d, reserve_.p);
    pool_ = start_answer_worker(s, ring.host, q.yield);
    GpuPongArgs a{};
    a.rule = q.rule;
    a.landing = landing_.device;
    a.ring = ring.dev;
    a.tuned = q.tuned ? 1 : 0;
    a.store_scope = q.store_scope;
    a.muted = responder_muted() ? 1 : 0;
    a.wait_ns = q.wait_ns;
    a.timeout_ns = timeout_ns_;
    a.stop = stop_flag_.d;
    a.out = out_.d;
    gpu_pong<<<1, 1, 0, stream_.s>>>(a);
    GICOMM_CUDA(cudaGetLastError());
    running_ = true;
  }
  ~GpuPong() override {
    uint64_t n = 0;
    std::string state;
    if (running_) stop(&n, &state);
  }

  bool stop(uint64_t* answers, std::string* state) override {
    __atomic_store_n(stop_flag_.p, uint64_t(1), __ATOMIC_RELEASE);
    running_ = false;
    // The thread ends within 256 spins of the flag, or once its current wait is over: the ping's
    // (wait_ms) or the ring's (--timeout-ms); past both, wait_stream ends the process.
    wait_stream(stream_.s, double(q_.wait_ns + timeout_ns_) / 1e9 + 30.0, 100);
    const PongOutcome o = *out_.p;
    *answers = o.answered;
    return finish_answers(*pool_, o, q_.wait_ns, timeout_ns_, state);
  }

 private:
  const PongRequest q_;
  const uint64_t timeout_ns_;
  MappedLanding landing_;
  MappedBuffer<proxy::Desc> slots_;
  MappedBuffer<proxy::RingCounters> counters_;
  DeviceBuffer<uint64_t> reserve_;     // the baseline enqueue's ticket counter
  MappedBuffer<uint64_t> stop_flag_;
  MappedBuffer<PongOutcome> out_;
  Stream stream_;
  std::unique_ptr<proxy::WorkerPool> pool_;
  bool running_ = false;
};

std::unique_ptr<Responder> gpu_pong_responder(const ResponderSetup& s) {
  const PongRequest q = parse_pong_request(s);
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    cudaGetLastError();
    throw PointFailure(std::string("responder 'gpu': rank 1 has no CUDA device (cudaGetDeviceCount: ") +
                       (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + "); allowed on this host: host");
  }
  GICOMM_CUDA(cudaSetDevice(0));
  return std::make_unique<GpuPong>(s, q);
}

const GpuResponderRegistration registered(gpu_pong_responder);

}  // namespace

}  // namespace gicomm::bench
