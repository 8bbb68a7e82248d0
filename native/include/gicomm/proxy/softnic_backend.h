// mini-proxy on the software NIC: each worker owns one softnic QP, builds mlx5 WQEs with the shared
// encoders (gicomm/mlx5/wqe.h), copies them into the softnic's send queue and rings its doorbell
// (gicomm/mlx5/host_post.h), then reaps CQEs. mini-proxy and mini-gda thus face the same model NIC
// and the same submission code path as a real ConnectX. Host only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gicomm/proxy/backend.h"
#include "gicomm/softnic/softnic.h"

namespace gicomm {
namespace proxy {

struct SoftnicTarget {
  // RDMA-write destination: descriptor slot s writes the 8 bytes at remote_addr + 8 * s.
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  // Source buffer of Op::write (pointer WQEs): value = src offset | len << 40.
  uint64_t local_addr = 0;
  uint32_t lkey = 0;
  uint32_t sq_wqebbs = 256;  // per worker QP; bounds the descriptors a worker has outstanding

  // Writes from the `local` region into the `remote` one.
  static SoftnicTarget between(const softnic::MemoryRegionHandle& local, const softnic::MemoryRegionHandle& remote) {
    SoftnicTarget t;
    t.remote_addr = remote.addr;
    t.rkey = remote.rkey;
    t.local_addr = local.addr;
    t.lkey = local.lkey;
    return t;
  }
};

// The SoftNic (and its engine) belong to the caller and must outlive the backend's channels.
std::unique_ptr<Backend> make_softnic_backend(softnic::SoftNic& nic, const SoftnicTarget& target);

}  // namespace proxy
}  // namespace gicomm
