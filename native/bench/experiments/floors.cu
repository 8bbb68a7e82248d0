// floors: the physical floors of this host, one kind per point (`floor`), each with its SM clock
// (the GPU's) or the wall clock (the CPU's), so `gicomm doctor` can set every transport's latency
// and rate beside the sequence it stands on. floors.h lists the kinds and the file measuring each.
// --warmup untimed and --iters timed repetitions per sample kind; every wait is bounded by
// --timeout-ms.
#include <string>
#include <vector>

#include "floors.h"
#include "harness/cuda.h"

namespace gicomm::bench {
namespace {

std::vector<Record> measure(Run& run) {
  using namespace floors;
  const std::string floor = run.param<std::string>("floor");
  if (floor == "nic_verbs") return nic_verbs(run);  // a host thread posts: no GPU needed
  if (gpu_count() == 0) {
    const std::string why = "needs a CUDA GPU; none visible on this host";
    if (floor == "wqe_doorbell") return {skipped("floor_wqe_doorbell_ns", "ns", why)};
    if (floor == "ring_store") return {skipped("floor_ring_store_ns", "ns", why)};
    if (floor == "host_pingpong") return {skipped("floor_host_pingpong_ns", "ns", why)};
    if (floor == "nvlink_pingpong") return {skipped("floor_nvlink_pingpong_ns", "ns", why)};
    return {skipped("floor_nic_write_ns", "ns", why)};
  }
  if (floor == "wqe_doorbell") return wqe_doorbell(run);
  if (floor == "ring_store") return ring_store(run);
  if (floor == "host_pingpong") return host_pingpong(run);
  if (floor == "nvlink_pingpong") return nvlink_pingpong(run);
  return nic_loopback(run);
}

}  // namespace

GICOMM_EXPERIMENT(floors, measure);

}  // namespace gicomm::bench
