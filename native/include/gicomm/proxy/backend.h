// mini-proxy NIC backends: what a worker posts its descriptors to. Host only.
//
// Each worker owns one Channel (its own send queue / QP, so workers never share a doorbell).
// Implementations: softnic (src/proxy/softnic_backend.*: mlx5 WQEs into the software NIC), verbs
// (src/nic/verbs: ibv_post_send with chained work requests) and null (completes at once; the
// worker's own ceiling).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gicomm/proxy/ring.h"

namespace gicomm {
namespace proxy {

class Channel {
 public:
  virtual ~Channel() = default;
  // How many more descriptors may be outstanding (posted, not yet retired by poll).
  virtual uint32_t room() const = 0;
  // Post n (1..kMaxBatch, n <= room()) descriptors as one chained submission with one doorbell;
  // only the last one asks for a completion (it retires the others, as on an RC send queue).
  virtual bool post(const Desc* d, uint32_t n, std::string* error) = 0;
  // Reap completions. Returns how many descriptors were retired, in post order; -1 on error.
  virtual int64_t poll(std::string* error) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // nic_backend value of the records: softnic-cpu, verbs, none.
  virtual const char* name() const = 0;
  // Open worker `worker`'s channel; called before the workers start.
  virtual std::unique_ptr<Channel> open(uint32_t worker, std::string* error) = 0;
};

// A backend with no NIC: every post completes immediately. Measures the worker loop alone.
std::unique_ptr<Backend> make_null_backend(uint32_t queue_depth = 256);

}  // namespace proxy
}  // namespace gicomm
