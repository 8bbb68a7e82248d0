// Single-threaded checks of the ring protocol: descriptor format, tags across wrap-around, both
// enqueue paths against the consumer, and every bounded wait timing out with the ring's counters.
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "gicomm/proxy/ring.h"

using namespace gicomm::proxy;

namespace {
struct TestRing {
  explicit TestRing(uint32_t cap, uint32_t id = 0) : slots(cap), counters() {
    std::memset(static_cast<void*>(slots.data()), 0, cap * sizeof(Desc));
    view.slots = slots.data();
    view.head = &counters.head;
    view.done = &counters.done;
    view.reserve = &counters.tail;
    view.capacity = cap;
    view.id = id;
  }
  std::vector<Desc> slots;
  RingCounters counters;
  RingView view{};
};

void test_format() {
  REQUIRE(sizeof(Desc) == 16 && alignof(Desc) == 16);
  const uint32_t info = make_info(Op::write_inline, 0xabcdef, true);
  REQUIRE(info_op(info) == Op::write_inline);
  REQUIRE(info_slot(info) == 0xabcdef);
  REQUIRE((info & kInfoSignal) != 0);
  REQUIRE(info_op(make_info(Op::write, 5, false)) == Op::write);
  REQUIRE((make_info(Op::write, 5, false) & kInfoSignal) == 0);
  // A zeroed slot is never valid for the first lap; consecutive laps of a slot differ.
  for (uint64_t t = 0; t < 4096; ++t) REQUIRE(tag_of(t) != 0);
  REQUIRE(tag_of(7) != tag_of(7 + 8));
  // store16/load16 round trip keeps every field in place.
  Desc d{0x0123456789abcdefull, 0x11223344u, 0x55667788u};
  alignas(16) Desc slot{};
  store16(&slot, d);
  const Desc e = load16(&slot);
  REQUIRE(e.value == d.value && e.info == d.info && e.seq == d.seq);
  // The GPU encodes seq in the high half of the second 64-bit word (st.v2.b64): check the layout.
  uint64_t words[2];
  std::memcpy(words, &slot, 16);
  REQUIRE(words[0] == d.value);
  REQUIRE(words[1] == ((uint64_t(d.seq) << 32) | d.info));
}

// Both paths, many laps of a small ring, consumed in between: every ticket is seen once, in order,
// and a slot's stale content from the last lap is never mistaken for the next ticket.
// The enqueue paths: baseline, tuned, and tuned in the steps a caller timing the store alone takes
// (reserve, prepare, the store, the ticket), which must hand over exactly what enqueue_tuned does.
enum class Path { baseline, tuned, tuned_steps };

uint64_t enqueue_by(Path path, const RingView& v, TunedProducer& p, uint64_t value, uint32_t info) {
  if (path == Path::baseline) return enqueue_baseline(v, value, info, 0, nullptr);
  if (path == Path::tuned) return enqueue_tuned(v, p, value, info, 0, nullptr);
  if (!tuned_reserve(v, p, 0, nullptr)) return ~0ull;
  const TunedStore st = tuned_prepare(v, p, value, info);
  store16(st.slot, st.d);
  return p.tail++;
}

void test_paths_wrap(Path path) {
  const uint32_t cap = 4;
  TestRing r(cap);
  TestRing* rp = &r;
  TunedProducer p{0, 0};
  uint64_t head = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    const uint64_t t = enqueue_by(path, rp->view, p, i * 3 + 1, make_info(Op::write_inline, i, false));
    REQUIRE(t == i);
    // Consume every other step, so the ring is sometimes full and sometimes not.
    if (i % 2 == 1 || (i + 1) - head >= cap) {
      Desc d;
      while (try_consume(r.view, head, &d)) {
        REQUIRE(d.value == head * 3 + 1, "ticket %llu value %llu", (unsigned long long)head,
                  (unsigned long long)d.value);
        REQUIRE(info_slot(d.info) == head);
        ++head;
        r.counters.head = head;
      }
      // Nothing beyond the tail is valid (stale tags of the previous lap are rejected).
      REQUIRE(!try_consume(r.view, head, &d));
      REQUIRE(head == i + 1);
    }
  }
}

void test_timeouts() {
  TestRing r(2, 7);
  WaitError e{};
  TunedProducer p{0, 0};
  const uint64_t soon = 2000000;  // 2 ms: generous, the ring is not full
  REQUIRE(enqueue_tuned(r.view, p, 1, 0, soon, &e) == 0);
  REQUIRE(enqueue_tuned(r.view, p, 2, 0, soon, &e) == 1);
  // Full, nobody consumes: the third enqueue must give up, naming the ring and its counters.
  REQUIRE(enqueue_tuned(r.view, p, 3, 0, 2000000, &e) == ~0ull);
  REQUIRE(e.ring == 7 && e.what == kWaitRingFull && e.seen == 0 && e.expected == 1);
  REQUIRE(p.tail == 2);  // the failed enqueue consumed no ticket

  TestRing b(2, 3);
  REQUIRE(enqueue_baseline(b.view, 1, 0, 0, nullptr) == 0);
  REQUIRE(enqueue_baseline(b.view, 2, 0, 0, nullptr) == 1);
  e = WaitError{};
  REQUIRE(enqueue_baseline(b.view, 3, 0, 2000000, &e) == ~0ull);
  REQUIRE(e.ring == 3 && e.what == kWaitRingFull && e.seen == 0);

  e = WaitError{};
  r.counters.done = 1;
  REQUIRE(wait_done(r.view, 1, 1000000, &e) == gicomm::WaitStatus::ok);
  REQUIRE(wait_done(r.view, 2, 1000000, &e) == gicomm::WaitStatus::timeout);
  REQUIRE(e.ring == 7 && e.what == kWaitCompletion && e.expected == 2 && e.seen == 1);
}
}  // namespace

int main() {
  test_format();
  test_paths_wrap(Path::tuned);
  test_paths_wrap(Path::tuned_steps);
  test_paths_wrap(Path::baseline);
  test_timeouts();
  std::printf("proxy_ring_test: ok\n");
  return 0;
}
