// The floors experiment (floors.cu registers it): one kind of physical floor per point
// (`floor`), each measured by the file named beside it, so the layout says what is measured where:
//   floors_stores.cu    wqe_doorbell (the bare WQE store + ordering + doorbell: its latency into
//                       each target and the rate a GPU thread posts it at) and ring_store
//   floors_pingpong.cu  host_pingpong (GPU-CPU) and nvlink_pingpong (every ordered GPU pair)
//   floors_nic.cu       nic_loopback: a GPU thread's RDMA writes through mini-gda's mlx5 placement
//   floors_verbs.cpp    nic_verbs: a CPU thread's RDMA writes through rdma-core verbs, looped back or
//                       to the peer rank (two ranks), with the NIC's port counters checked
// What the host lacks is a skipped record saying why, never exit 3, so one run on any host says
// what it could and could not measure. Host code only: the GPU helpers are floors_gpu.cuh.
#pragma once

#include <string>
#include <vector>

#include "harness/harness.h"

namespace gicomm::bench::floors {

inline Record skipped(const std::string& metric, const std::string& unit, const std::string& why) {
  Record r = Record::failed(metric, unit, why);
  r.status = "skipped";
  return r;
}

// The same reason on every metric a floor kind records (unit Mmsg/s for the *_rate metrics).
inline std::vector<Record> skip_all(const std::vector<std::string>& metrics, const std::string& why) {
  std::vector<Record> out;
  for (const auto& m : metrics)
    out.push_back(skipped(m, m.size() > 5 && m.compare(m.size() - 5, 5, "_rate") == 0 ? "Mmsg/s" : "ns", why));
  return out;
}

std::vector<Record> wqe_doorbell(Run& run);
std::vector<Record> ring_store(Run& run);
std::vector<Record> host_pingpong(Run& run);
std::vector<Record> nvlink_pingpong(Run& run);
std::vector<Record> nic_loopback(Run& run);
std::vector<Record> nic_verbs(Run& run);

}  // namespace gicomm::bench::floors
