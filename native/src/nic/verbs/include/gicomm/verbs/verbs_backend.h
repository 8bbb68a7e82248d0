// mini-proxy verbs backend: each worker owns an RC QP on a real RDMA NIC and posts its descriptors
// with one ibv_post_send of a chain of work requests (inline 8-byte writes, only the last one
// signaled), as the paper's mini-proxy does. The QP is connected in loopback to a second QP on the
// same port, so one process measures the full post -> wire -> CQE path. Host only; built wherever
// rdma-core is present. On a machine with no RDMA device, make_verbs_backend fails with one line
// saying so (the bench turns that into exit code 3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gicomm/proxy/backend.h"

namespace gicomm {
namespace verbs {

struct VerbsConfig {
  std::string device;     // ibv device name; empty: the first one
  int port = 1;
  int gid_index = 0;      // RoCE needs a GID; InfiniBand uses the LID
  void* remote = nullptr; // RDMA-write destination: slot s -> remote + 8 s
  size_t remote_bytes = 0;
  void* local = nullptr;  // source of Op::write (pointer) requests
  size_t local_bytes = 0;
  uint32_t sq_depth = 256;
};

// Lists the RDMA devices; empty when none (or when the verbs library finds no provider).
std::string describe_devices(int* count);

std::unique_ptr<proxy::Backend> make_verbs_backend(const VerbsConfig& cfg, std::string* error);

}  // namespace verbs
}  // namespace gicomm
