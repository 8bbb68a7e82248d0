// gicomm-bench-baselines-nvshmem: NVSHMEM over a NIC (transports nvshmem-ibgda and nvshmem-ibrc)
// through the same dissection kernels and the same NVSHMEM calls as the P2P harness
// (nvshmem/path.cuh, nvlink/dissect.cuh): put = nvshmem_putmem_nbi, p = nvshmem_uint64_p,
// completion = nvshmem_quiet, round trip = put-with-signal / p on a flag. Two PEs, one per GPU, as
// forked processes joined by the unique-id bootstrap; NVSHMEM_DISABLE_P2P=1 keeps the two PEs of
// one node off NVLink, so every op goes out through the NIC and back (loopback through the switch
// or the NIC); the harness checks that the peer's heap is not mapped (nvshmem_ptr == NULL).
//   nvshmem-ibgda: NVSHMEM_IB_ENABLE_IBGDA=1 (the GPU builds WQEs and rings the doorbell)
//   nvshmem-ibrc:  NVSHMEM_IB_ENABLE_IBGDA=0, NVSHMEM_REMOTE_TRANSPORT=ibrc (a CPU proxy thread)
// The IBGDA knobs (NVSHMEM_IBGDA_NUM_RC_PER_PE, _NIC_HANDLER, _NUM_REQUESTS_IN_BATCH) come in the
// environment from the pipeline's batch runner, one process per set of values. Serves the transport
// of its first point; the runner (workflow/gicomm/baselines/dispatch.py) checks knobs and the NIC
// first.

#include <string>

#include "nvlink/dissect.cuh"
#include "nvshmem/path.cuh"

namespace {

using namespace gicomm::dissect;
using namespace gicomm::nvshmem_path;
namespace gb = gicomm::baselines;

int nic_body(gb::RankContext& ctx, bool ibgda) {
  multicast_off();
  // The transport is what the point names; everything else stays NVSHMEM's default unless set.
  setenv("NVSHMEM_REMOTE_TRANSPORT", "ibrc", 1);
  setenv("NVSHMEM_IB_ENABLE_IBGDA", ibgda ? "1" : "0", 1);
  setenv("NVSHMEM_DISABLE_P2P", "1", 1);
  default_env();
  const char* name = ibgda ? "nvshmem-ibgda" : "nvshmem-ibrc";
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2)
    return gb::hardware_missing(ctx, std::string(name) + " needs 2 GPUs (one PE per GPU, talking through the NIC), found " +
                                         std::to_string(n));
  check(cudaSetDevice(ctx.rank), "cudaSetDevice");

  const int me = init_two_pes(ctx, std::string(" (") + name + ": NVSHMEM_REMOTE_TRANSPORT=ibrc NVSHMEM_IB_ENABLE_IBGDA=" +
                                       (ibgda ? "1" : "0") +
                                       " NVSHMEM_DISABLE_P2P=1; run with NVSHMEM_DEBUG=INFO for its reason)");
  const int peer = 1 - me;
  char* sym = static_cast<char*>(nvshmem_malloc(kRegionBytes));
  if (!sym) throw std::runtime_error("nvshmem_malloc failed");
  if (nvshmem_ptr(sym, peer) != nullptr) {
    nvshmem_finalize();
    throw std::runtime_error("NVSHMEM mapped the peer PE's heap over P2P despite NVSHMEM_DISABLE_P2P=1: the ops "
                             "would not go through the NIC");
  }
  return measure_and_finalize(ctx, sym, me);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string transport = gb::first_point_transport(argc, argv, {"nvshmem-ibgda", "nvshmem-ibrc"});
  const bool ibgda = transport == "nvshmem-ibgda";
  const gicomm::bench::DriverInfo info{"gicomm-bench-baselines-nvshmem", transport, "mlx5"};
  return gb::run_baseline_driver(argc, argv, info, {transport}, 2, metric_names(),
                                 [ibgda](gb::RankContext& ctx) { return nic_body(ctx, ibgda); });
}
