// Rank 1's responder (harness/responder.h) without a NIC: its answers go to mini-proxy's null
// backend, the pings are written into its landing buffer by hand. Checks: each scheme answers
// exactly the pings it saw, in order; a ping that never comes stops it at its wait, saying which;
// bad requests are refused naming the key and what is allowed.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

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

net::Message request(const std::string& scheme, uint64_t wait_ms) {
  net::Message m;
  m.set("scheme", scheme);
  m.set_u64("wait_ms", wait_ms);
  return m;
}

std::string refusal(Fixture& f, const net::Message& m) {
  try {
    pong_responder(f.setup(m));
  } catch (const PointFailure& e) {
    return e.what();
  }
  return "";
}

void wait_a_little() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

}  // namespace

int main() {
  {  // mini-gda's flags: ping i is i + 1 in word 8; three pings, three answers
    Fixture f;
    net::Message m = request("flag", 5000);
    m.set_u64("ping_word", 8);
    m.set_u64("pong_word", 0);
    auto r = pong_responder(f.setup(m));
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
    auto r = pong_responder(f.setup(m));
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
    auto r = pong_responder(f.setup(m));
    f.ping(8, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    uint64_t answers = 0;
    std::string state;
    CHECK(!r->stop(&answers, &state), "a responder that timed out said ok");
    CHECK(answers == 1, "answers %llu", static_cast<unsigned long long>(answers));
    CHECK(state.find("saw 1 pings, answered 1, then timed out waiting for ping 1 after 100 ms") == 0, "state: %s",
          state.c_str());
  }
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
  }
  return test::check_result("bench_two_rank_responder");
}
