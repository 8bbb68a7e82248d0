// mini-proxy verbs backend: each worker owns an RC QP on a real RDMA NIC and posts its descriptors
// with one ibv_post_send of a chain of work requests (inline 8-byte writes, only the last one
// signaled), as the paper's mini-proxy does. Host only; built wherever rdma-core is present. On a
// machine with no RDMA device, opening fails with one line saying so (the bench turns that into
// exit code 3).
//
// Two topologies, one connection path (QP to RTR/RTS against a peer's net::Endpoint):
//   loopback   make_verbs_backend(): each worker's QP is connected to a second QP on the same port,
//              so one process measures post -> NIC -> CQE (records say topology: loopback)
//   two ports  VerbsEndpoint on each side (two ranks, or two devices of one host): exchange
//              local() through the out-of-band session (gicomm/net/oob.h), connect() each side
//              to the other's, then backend() posts into the peer's buffer
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gicomm/net/oob.h"
#include "gicomm/proxy/backend.h"

namespace gicomm {
namespace verbs {

struct VerbsConfig {
  std::string device;      // ibv device name; empty: the first one
  int port = 1;
  int gid_index = 0;       // RoCE needs a GID (Soft-RoCE: 1, the IPv4-mapped RoCE v2 GID); IB uses the LID
  void* remote = nullptr;  // the RDMA-write destination: slot s -> remote + 8 s. Loopback: registered
  size_t remote_bytes = 0; // for the peer QP; VerbsEndpoint: the buffer this side lets its peer write
  void* local = nullptr;   // source of Op::write (pointer) requests
  size_t local_bytes = 0;
  uint32_t sq_depth = 256;
  bool zero_psn = false;   // start every QP at PSN 0 (a DEVX peer, mini-gda's mlx5 QPs, expects it)
};

// Lists the RDMA devices; empty when none (or when the verbs library finds no provider).
std::string describe_devices(int* count);

// Loopback on one port (see above). cfg.remote is required.
std::unique_ptr<proxy::Backend> make_verbs_backend(const VerbsConfig& cfg, std::string* error);

// QPs of one endpoint at most: the connection-scaling sweep's largest point (the paper's 32,768
// active connections), whose QP numbers and PSNs still fit one out-of-band message.
inline constexpr uint32_t kMaxEndpointQps = 32768;

class VerbsEndpoint {
 public:
  // Opens cfg.device, registers cfg.remote (optional: the side that only sends needs none) and
  // cfg.local, and creates `qps` RC QPs (1..kMaxEndpointQps), each with its own completion queue.
  static std::unique_ptr<VerbsEndpoint> open(const VerbsConfig& cfg, uint32_t qps, std::string* error);
  ~VerbsEndpoint();
  VerbsEndpoint(const VerbsEndpoint&) = delete;
  VerbsEndpoint& operator=(const VerbsEndpoint&) = delete;

  // What the peer needs: device, port, link, LID/GID, active MTU, QPNs and PSNs, buffer and rkey.
  const net::Endpoint& local() const;
  // Connects QP i to the peer's QP i (path MTU: the smaller of the two). The peer must offer at
  // least as many QPs, and a GID when the link is RoCE.
  bool connect(const net::Endpoint& peer, std::string* error);
  // Worker w posts on QP w into the peer's buffer. After connect(); it keeps the QPs alive.
  std::unique_ptr<proxy::Backend> backend(std::string* error);
  // The same, into a buffer of the peer announced after the QPs connected (its address and rkey
  // came in a later message: mini-gda registers its memory only once its QPs exist).
  std::unique_ptr<proxy::Backend> backend_to(uint64_t addr, uint32_t rkey, std::string* error);

  struct Impl;

 private:
  explicit VerbsEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace verbs
}  // namespace gicomm
