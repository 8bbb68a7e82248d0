// gicomm-bench-baselines-nvshmem: NVSHMEM over a NIC (transports nvshmem-ibgda and nvshmem-ibrc)
// through the same dissection kernels and the same NVSHMEM calls as the P2P harness
// (nvshmem/path.cuh, nvlink/dissect.cuh): put = nvshmem_putmem_nbi, p = nvshmem_uint64_p,
// completion = nvshmem_quiet, round trip = put-with-signal / p on a flag. Two PEs joined by the
// unique-id bootstrap: forked processes of one node (the default), or one PE per process started by
// a launcher (--rank R --world-size 2 [--rendezvous HOST], mpirun -np 2 or srun -n2 across two
// nodes: support/launched.h; the unique id then travels over the out-of-band exchange). Placed by
// nvshmem/placement.h: one per GPU (a node's local rank), or both on one GPU when only one is
// present and the emulated rdma-core answers. NVSHMEM_DISABLE_P2P=1
// keeps the two PEs of one node off NVLink and CUDA IPC, so every op goes out through the NIC (or
// the emulation) and back; the harness checks that the peer's heap is not mapped
// (nvshmem_ptr == NULL).
//   nvshmem-ibgda: NVSHMEM_IB_ENABLE_IBGDA=1 (the GPU builds WQEs and rings the doorbell; on the
//                  emulation NVSHMEM's CPU rings it: NVSHMEM_IBGDA_NIC_HANDLER=cpu_host_memory)
//   nvshmem-ibrc:  NVSHMEM_IB_ENABLE_IBGDA=0, NVSHMEM_REMOTE_TRANSPORT=ibrc (a CPU proxy thread)
// Before any point is timed both PEs run NVSHMEM's correctness checks (nvshmem/checks.cuh: put,
// get, p/g, atomics, fence and put-with-signal, with payload checks); a failed check fails every
// point with the checks that failed. Every record says which rdma-core answered (rdma_provider),
// topology two-rank, and how the PEs were placed (params pes_per_gpu, mps).
// Path proof (support/path_proof.h): both PEs read the port counters of the NIC NVSHMEM uses (its
// HCA selection, pinned with NVSHMEM_HCA_LIST when the environment names none) before and after
// each point; rank 0 records path_check and peer, and a point whose counters moved less than the
// traffic it claims is failed with the reason. On the emulated rdma-core each forked PE is an
// emulated host of its own with its own sysfs view (GICOMM_EMU_SYSFS_DIR/pe<rank>).
// The IBGDA knobs (NVSHMEM_IBGDA_NUM_RC_PER_PE, _NIC_HANDLER, _NUM_REQUESTS_IN_BATCH) come in the
// environment from the pipeline's batch runner, one process per set of values, as does the MPS
// daemon's pipe directory when two PEs share a GPU. Serves the transport of its first point; the
// runner (workflow/gicomm/baselines/dispatch.py) checks knobs and the NIC first.

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nvlink/dissect.cuh"
#include "nvshmem/checks.cuh"
#include "nvshmem/path.cuh"
#include "nvshmem/placement.h"

#include "gicomm/net/launcher.h"
#include "support/path_proof.h"

#ifdef GICOMM_HAVE_MLX5DEV
#include <infiniband/verbs.h>

#include "gicomm/mlx5dev/devx.h"
#endif

namespace {

using namespace gicomm::dissect;
using namespace gicomm::nvshmem_path;
namespace gb = gicomm::baselines;
namespace nc = gicomm::nvshmem_checks;

// Which rdma-core answers this process: "emulated" under gicomm-emu-run, else the system's.
std::string rdma_provider() {
#ifdef GICOMM_HAVE_MLX5DEV
  return gicomm::mlx5dev::rdma_provider();
#else
  return "unknown (built without rdma-core's headers)";
#endif
}

// The RDMA devices rdma-core lists, in its order (what NVSHMEM's HCA selection walks).
std::vector<std::string> listed_devices() {
  std::vector<std::string> names;
#ifdef GICOMM_HAVE_MLX5DEV
  int n = 0;
  if (ibv_device** list = ibv_get_device_list(&n)) {
    for (int i = 0; i < n; ++i) names.push_back(ibv_get_device_name(list[i]));
    ibv_free_device_list(list);
  }
#endif
  return names;
}

// PEs on the emulated rdma-core: each is an emulated host of its own and writes its own sysfs view
// (its port counters). Forked PEs: GICOMM_EMU_SYSFS_DIR/pe<rank> when given, else in the job's
// private directory; a launched PE keeps the view its runner gave it, else gets one in its
// private directory. Set before anything opens an emulated device.
void own_sysfs_view(const gb::RankContext& ctx) {
  const char* given = std::getenv("GICOMM_EMU_SYSFS_DIR");
  const bool set = given && *given;
  if (ctx.oob && set) return;
  const std::string base = set ? given : ctx.rendezvous_dir + "/sysfs";
  setenv("GICOMM_EMU_SYSFS_DIR", (ctx.oob ? base : base + "/pe" + std::to_string(ctx.rank)).c_str(), 1);
}

int gid_index_of_env() {
  const char* v = std::getenv("NVSHMEM_IB_GID_INDEX");
  return v && *v ? std::atoi(v) : 0;
}

// The checks on both PEs; "" when every check passed on both, else what failed on each.
std::string check_step(gb::RankContext& ctx, int me, bool ibrc) {
  const std::vector<nc::Check> checks = nc::run_checks(me, ibrc);
  for (const nc::Check& c : checks)
    std::fprintf(stderr, "[gicomm] rank %d: CHECK %s %s%s%s\n", ctx.rank, c.name.c_str(), c.ok ? "PASS" : "FAIL",
                 c.detail.empty() ? "" : ": ", c.detail.c_str());
  const int both = nc::failures_of_both(me, nc::failed_count(checks));
  if (both == 0) return "";
  // Rank 1 hands rank 0 what failed on its side (rank 0 writes the records).
  char theirs[1024] = {};
  if (me == 1) {
    const std::string mine = nc::failures_text(checks);
    std::strncpy(theirs, mine.c_str(), sizeof theirs - 1);
    gb::publish_blob(ctx, "checks1", theirs, sizeof theirs);
    return "failed";
  }
  try {
    gb::fetch_blob(ctx, "checks1", theirs, sizeof theirs, 10000);
  } catch (const std::exception& e) {
    std::strncpy(theirs, e.what(), sizeof theirs - 1);
  }
  std::string why = std::to_string(both) + " of NVSHMEM's correctness checks failed before the metrics";
  const std::string mine = nc::failures_text(checks);
  if (!mine.empty()) why += "; PE 0: " + mine;
  if (theirs[0] != '\0') why += "; PE 1: " + std::string(theirs);
  return why;
}

int nic_body(gb::RankContext& ctx, bool ibgda) {
  multicast_off();
  // The transport is what the point names; everything else stays NVSHMEM's default unless set.
  setenv("NVSHMEM_REMOTE_TRANSPORT", "ibrc", 1);
  setenv("NVSHMEM_IB_ENABLE_IBGDA", ibgda ? "1" : "0", 1);
  setenv("NVSHMEM_DISABLE_P2P", "1", 1);
  default_env();
  const std::string name = ibgda ? "nvshmem-ibgda" : "nvshmem-ibrc";
  ctx.rdma_provider = rdma_provider();
  const bool emulated = ctx.rdma_provider == "emulated";
  // The GPU cannot map an emulated UAR: NVSHMEM's CPU rings the doorbell (unless the point says).
  if (emulated && ibgda) setenv("NVSHMEM_IBGDA_NIC_HANDLER", "cpu_host_memory", 0);
  if (emulated) own_sysfs_view(ctx);
  // The NIC whose counters prove the path: NVSHMEM's choice, pinned so that it is the one used.
  const gb::HcaChoice hca = gb::choose_nvshmem_hca(listed_devices(), gicomm::net::process_env());
  if (hca.device.empty() && hca.error.rfind("NVSHMEM_HCA_LIST", 0) == 0) throw std::runtime_error(hca.error);
  if (hca.device.empty()) return gb::hardware_missing(ctx, name + ": " + hca.error);
  if (!hca.pin.empty()) setenv("NVSHMEM_HCA_LIST", hca.pin.c_str(), 1);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  const Placement place = place_pe(ctx.local_rank, n, emulated, name, ctx.local_ranks);
  if (!place.refusal.empty()) return gb::hardware_missing(ctx, place.refusal);
  check(cudaSetDevice(place.device), "cudaSetDevice");
  ctx.topology = "two-rank";
  ctx.extra_params = {{"pes_per_gpu", static_cast<long long>(place.pes_per_gpu)},
                      {"mps", std::string(mps_daemon_present() ? "on" : "off")}};

  const int me = init_two_pes(ctx, " (" + name + ": NVSHMEM_REMOTE_TRANSPORT=ibrc NVSHMEM_IB_ENABLE_IBGDA=" +
                                       (ibgda ? "1" : "0") +
                                       " NVSHMEM_DISABLE_P2P=1; run with NVSHMEM_DEBUG=INFO for its reason)");
  const std::string failed = check_step(ctx, me, !ibgda);
  if (!failed.empty()) {
    if (me == 0)
      for (const gicomm::bench::Point& p : ctx.points)
        gb::write_point(ctx, p, gb::status_records(metric_names(), "failed", failed));
    nvshmem_barrier_all();
    nvshmem_finalize();
    return 0;
  }
  char* sym = static_cast<char*>(nvshmem_malloc(kRegionBytes));
  if (!sym) throw std::runtime_error("nvshmem_malloc failed");
  if (nvshmem_ptr(sym, 1 - me) != nullptr) {
    nvshmem_finalize();
    throw std::runtime_error("NVSHMEM mapped the peer PE's heap over P2P despite NVSHMEM_DISABLE_P2P=1: the ops "
                             "would not go through the NIC");
  }
  // After init: the emulated devices' sysfs views exist once NVSHMEM has opened them.
  gb::RankPathProof proof(ctx, gicomm::net::sysfs_root(), hca, gid_index_of_env());
  return measure_and_finalize(ctx, sym, me, &proof);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string transport = gb::first_point_transport(argc, argv, {"nvshmem-ibgda", "nvshmem-ibrc"});
  const bool ibgda = transport == "nvshmem-ibgda";
  const gicomm::bench::DriverInfo info{"gicomm-bench-baselines-nvshmem", transport, "mlx5"};
  return gb::run_baseline_driver(argc, argv, info, {transport}, 2, metric_names(),
                                 [ibgda](gb::RankContext& ctx) { return nic_body(ctx, ibgda); });
}
