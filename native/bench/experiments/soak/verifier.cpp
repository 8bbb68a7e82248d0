// The soak's verifier: per-queue checks of every executed op (owner, order, exactly once), and
// the rings target's checking channel around the worker pool's backend.
#include <cstdio>

#include "soak/soak.h"

namespace gicomm::soak {


// Per-queue check of one executed op: owner, per-queue order, exactly once.
void account(Tally& t, SeenBits& seen, uint32_t q, uint32_t owner, uint64_t tag, int64_t* last_seq) {
  const uint32_t p = tag_producer(tag);
  if (tag == 0 || p != owner) {
    t.misdirected++;
    t.note("queue " + std::to_string(q) + ": payload 0x" + [&] {
      char b[32];
      std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(tag));
      return std::string(b);
    }() + " is not an op of its producer " + std::to_string(owner));
    return;
  }
  const uint64_t s = tag_seq(tag);
  if (static_cast<int64_t>(s) <= *last_seq) {
    t.reordered++;
    t.note("queue " + std::to_string(q) + ": op (" + std::to_string(p) + ", " + std::to_string(s) +
           ") executed after op " + std::to_string(*last_seq));
  } else {
    *last_seq = static_cast<int64_t>(s);
  }
  if (seen.test_and_set(p, s)) {
    t.duplicated++;
    t.note("op (" + std::to_string(p) + ", " + std::to_string(s) + ") executed twice");
  } else {
    t.executed++;
  }
}

namespace {

class CheckingChannel : public proxy::Channel {
 public:
  CheckingChannel(std::unique_ptr<proxy::Channel> inner, RingCheck* c) : inner_(std::move(inner)), c_(c) {}
  uint32_t room() const override { return inner_->room(); }
  bool post(const proxy::Desc* d, uint32_t n, std::string* error) override {
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t slot = proxy::info_slot(d[i].info);
      const uint32_t r = slot / c_->su->depth;
      if (r >= c_->su->queues || proxy::info_op(d[i].info) != proxy::Op::write_inline) {
        c_->tally->misdirected++;
        c_->tally->note("descriptor with slot " + std::to_string(slot) + " names no ring");
        continue;
      }
      const uint64_t t = c_->consumed[r]++;
      if (slot != r * c_->su->depth + (t & (c_->su->depth - 1))) {
        c_->tally->misdirected++;
        c_->tally->note("ring " + std::to_string(r) + ": ticket " + std::to_string(t) + " carries slot " +
                        std::to_string(slot));
      }
      account(*c_->tally, *c_->seen, r, r % c_->su->producers, d[i].value, &c_->last_seq[r]);
      c_->shadow[slot] = d[i].value;
    }
    return inner_->post(d, n, error);
  }
  int64_t poll(std::string* error) override {
    const int64_t k = inner_->poll(error);
    if (k > 0) c_->retired.fetch_add(uint64_t(k), std::memory_order_relaxed);
    return k;
  }

 private:
  std::unique_ptr<proxy::Channel> inner_;
  RingCheck* c_;
};

class CheckingBackend : public proxy::Backend {
 public:
  CheckingBackend(std::unique_ptr<proxy::Backend> inner, RingCheck* c) : inner_(std::move(inner)), c_(c) {}
  const char* name() const override { return inner_->name(); }
  std::unique_ptr<proxy::Channel> open(uint32_t worker, std::string* error) override {
    auto ch = inner_->open(worker, error);
    if (!ch) return nullptr;
    return std::make_unique<CheckingChannel>(std::move(ch), c_);
  }

 private:
  std::unique_ptr<proxy::Backend> inner_;
  RingCheck* c_;
};

}  // namespace

std::unique_ptr<proxy::Backend> make_checking_backend(std::unique_ptr<proxy::Backend> inner, RingCheck* check) {
  return std::make_unique<CheckingBackend>(std::move(inner), check);
}

}  // namespace gicomm::soak
