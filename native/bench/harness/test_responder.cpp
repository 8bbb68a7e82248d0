// Rank 1's responder (harness/responder.h) without a NIC: its answers go to mini-proxy's null
// backend, the pings are written into its landing buffer by hand. Checks: each scheme answers
// exactly the pings it saw, in order; a ping that never comes stops it at its wait, saying which;
// bad requests are refused naming the key and what is allowed; the request's `responder` picks
// the host thread (also when absent) and refuses what this build or host cannot run. Built twice:
// without the GPU responder (bench_two_rank_responder: `responder: gpu` refused as not built in)
// and with it (bench_two_rank_responder_gpu, GICOMM_TEST_GPU_RESPONDER): on a host without a GPU
// `responder: gpu` is refused naming rank 1's missing device, on one with a GPU the same checks
// run on the GPU thread.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#if defined(GICOMM_TEST_GPU_RESPONDER)
#include <cuda_runtime.h>
#endif

#include "check.h"
#include "gicomm/proxy/backend.h"
#include "harness/errors.h"
#include "harness/pingpong.h"
#include "harness/responder.h"

using namespace gicomm;
using namespace gicomm::bench;

namespace {

struct Fixture {
  std::vector<uint64_t> landing = std::vector<uint64_t>(64, 0);
  std::unique_ptr<proxy::Backend> backend = proxy::make_null_backend(256);
  ResponderSetup setup(const net::Message& m) {
    return ResponderSetup{m, landing.data(), landing.size() * 8, *backend, 1, 2000000000ull};
  }
  void ping(uint32_t word, uint64_t value) { __atomic_store_n(&landing[word], value, __ATOMIC_RELEASE); }
};

// The responder the tests run: "" leaves the request's `responder` out (the host thread).
std::string g_responder;

net::Message request(const std::string& scheme, uint64_t wait_ms) {
  net::Message m;
  m.set("scheme", scheme);
  m.set_u64("wait_ms", wait_ms);
  if (!g_responder.empty()) m.set("responder", g_responder);
  return m;
}

std::string refusal(Fixture& f, const net::Message& m) {
  try {
    round_trip_responder(f.setup(m));
  } catch (const PointFailure& e) {
    return e.what();
  }
  return "";
}

#if defined(GICOMM_TEST_GPU_RESPONDER)
bool gpu_present() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return false;
  return n > 0;
}
#endif

void wait_a_little() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

// Each scheme answers exactly the pings it saw; a ping that never comes stops it at its wait.
void answers_what_it_saw() {
  {  // mini-gda's flags: ping i is i + 1 in word 8; three pings, three answers
    Fixture f;
    net::Message m = request("flag", 5000);
    m.set_u64("ping_word", 8);
    m.set_u64("pong_word", 0);
    auto r = round_trip_responder(f.setup(m));
    for (uint64_t i = 0; i < 3; ++i) {
      f.ping(8, i + 1);
      wait_a_little();
    }
    uint64_t answers = 0;
    std::string state;
    CHECK(r->stop(&answers, &state), "state: %s", state.c_str());
    CHECK(answers == 3, "answers %llu", static_cast<unsigned long long>(answers));
    CHECK(state.find("saw 3 pings, answered 3, then was stopped waiting for ping 3") == 0, "state: %s", state.c_str());
  }
  {  // mini-proxy's words: two pings in a window of 4
    Fixture f;
    net::Message m = request("proxy-pingpong", 5000);
    m.set_u64("window", 4);
    auto r = round_trip_responder(f.setup(m));
    for (uint64_t i = 0; i < 2; ++i) {
      f.ping(payload_slot(0, 4, i), payload_value(0, i));
      wait_a_little();
    }
    uint64_t answers = 0;
    std::string state;
    CHECK(r->stop(&answers, &state) && answers == 2, "state: %s", state.c_str());
  }
  {  // no ping 1 within its wait: it stops by itself and says so; not ok
    Fixture f;
    net::Message m = request("flag", 100);
    m.set_u64("ping_word", 8);
    m.set_u64("pong_word", 0);
    auto r = round_trip_responder(f.setup(m));
    f.ping(8, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    uint64_t answers = 0;
    std::string state;
    CHECK(!r->stop(&answers, &state), "a responder that timed out said ok");
    CHECK(answers == 1, "answers %llu", static_cast<unsigned long long>(answers));
    CHECK(state.find("saw 1 pings, answered 1, then timed out waiting for ping 1 after 100 ms") == 0, "state: %s",
          state.c_str());
  }
}

}  // namespace

int main() {
  answers_what_it_saw();  // the host thread, `responder` absent
  g_responder = "host";
  answers_what_it_saw();
  {  // refusals name what is wrong and what is allowed
    Fixture f;
    CHECK(refusal(f, request("echo", 10)).find("scheme 'echo' is not one it answers; allowed: proxy-pingpong, flag") !=
              std::string::npos,
          "%s", refusal(f, request("echo", 10)).c_str());
    net::Message m = request("proxy-pingpong", 10);
    m.set_u64("window", 64);  // two rings of 64 words do not fit 64 words
    CHECK(refusal(f, m).find("window 64 must be a power of two whose two rings fit the 512-byte buffer") !=
              std::string::npos,
          "%s", refusal(f, m).c_str());
    net::Message flag = request("flag", 10);
    flag.set_u64("ping_word", 64);  // outside the landing buffer
    flag.set_u64("pong_word", 0);
    CHECK(refusal(f, flag).find("ping_word") != std::string::npos, "%s", refusal(f, flag).c_str());
    CHECK(refusal(f, net::Message{}).find("wait_ms") != std::string::npos, "%s", refusal(f, net::Message{}).c_str());
    net::Message enq = request("proxy-pingpong", 10);
    enq.set_u64("window", 4);
    enq.set("enqueue", "fast");
    CHECK(refusal(f, enq).find("enqueue 'fast' is not one it uses; allowed: tuned, baseline") != std::string::npos,
          "%s", refusal(f, enq).c_str());
    enq.set("enqueue", "tuned");
    enq.set("store", "cta");
    CHECK(refusal(f, enq).find("store 'cta' is not a scope it stores at; allowed: sys, gpu, weak") != std::string::npos,
          "%s", refusal(f, enq).c_str());
  }
  {  // `responder` names what runs: an unknown one, and gpu where this build or host has none
    Fixture f;
    g_responder = "fpga";
    CHECK(refusal(f, request("flag", 10)).find("responder 'fpga' is not one rank 1 runs; allowed: host, gpu") !=
              std::string::npos,
          "%s", refusal(f, request("flag", 10)).c_str());
    g_responder = "gpu";
#if defined(GICOMM_TEST_GPU_RESPONDER)
    if (gpu_present()) {
      answers_what_it_saw();  // the same pings answered by the GPU thread
    } else {
      net::Message m = request("flag", 10);
      m.set_u64("ping_word", 8);
      m.set_u64("pong_word", 0);
      CHECK(refusal(f, m).find("responder 'gpu': rank 1 has no CUDA device") != std::string::npos, "%s",
            refusal(f, m).c_str());
    }
#else
    CHECK(refusal(f, request("flag", 10)).find("responder 'gpu': this driver of rank 1 has no GPU responder") !=
              std::string::npos,
          "%s", refusal(f, request("flag", 10)).c_str());
#endif
  }
#if defined(GICOMM_TEST_GPU_RESPONDER)
  return test::check_result(gpu_present() ? "bench_two_rank_responder_gpu (GPU thread)"
                                           : "bench_two_rank_responder_gpu (no GPU: refusal)");
#else
  return test::check_result("bench_two_rank_responder");
#endif
}
