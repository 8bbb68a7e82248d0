// A NIC-less backend: each post completes immediately (the worker loop's own ceiling, and a
// deterministic channel for protocol tests).
#include "gicomm/proxy/backend.h"

namespace gicomm {
namespace proxy {

namespace {
class NullChannel : public Channel {
 public:
  explicit NullChannel(uint32_t depth) : depth_(depth) {}
  uint32_t room() const override { return depth_ - outstanding_; }
  bool post(const Desc*, uint32_t n, std::string*) override {
    outstanding_ += n;
    return true;
  }
  int64_t poll(std::string*) override {
    const int64_t c = outstanding_;
    outstanding_ = 0;
    return c;
  }

 private:
  uint32_t depth_;
  uint32_t outstanding_ = 0;
};

class NullBackend : public Backend {
 public:
  explicit NullBackend(uint32_t depth) : depth_(depth) {}
  const char* name() const override { return "none"; }
  std::unique_ptr<Channel> open(uint32_t, std::string*) override {
    return std::unique_ptr<Channel>(new NullChannel(depth_));
  }

 private:
  uint32_t depth_;
};
}  // namespace

std::unique_ptr<Backend> make_null_backend(uint32_t queue_depth) {
  return std::unique_ptr<Backend>(new NullBackend(queue_depth));
}

}  // namespace proxy
}  // namespace gicomm
