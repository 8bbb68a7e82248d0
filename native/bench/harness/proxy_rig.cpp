#include "harness/proxy_rig.h"

#include <algorithm>

#include "gicomm/proxy/softnic_backend.h"
#include "harness/two_rank.h"
#if defined(GICOMM_BENCH_WITH_VERBS)
#include "gicomm/verbs/verbs_backend.h"
#endif
#if defined(GICOMM_BENCH_WITH_MLX5)
#include "gicomm/mlx5dev/devx.h"
#endif

namespace gicomm::bench {

ProxyRig::ProxyRig(const ProxyRigSpec& s)
    : slots(size_t(s.rings) * s.capacity),
      counters(s.rings),
      reserve(s.rings),
      views(s.rings),
      device_views(s.rings),
      host_views(s.rings),
      spec(s) {
  for (uint32_t r = 0; r < s.rings; ++r) {
    const auto v = proxy::mapped_ring_views(r, s.capacity, slots.p, slots.d, counters.p, counters.d, reserve.p);
    host_views[r] = v.host;
    device_views[r] = v.dev;
  }
  GICOMM_CUDA(cudaMemcpy(views.p, device_views.data(), sizeof(proxy::RingView) * s.rings, cudaMemcpyHostToDevice));
}

ProxyRig::~ProxyRig() {
  if (pool) {
    std::string e;
    pool->stop(nullptr, spec.timeout_ns, &e);
  }
  if (engine) engine->stop();
}

std::string require_proxy_backend(NicBackend backend) {
  if (backend == NicBackend::verbs) {
#if defined(GICOMM_BENCH_WITH_VERBS)
    int ndev = 0;
    gicomm::verbs::describe_devices(&ndev);
    if (ndev == 0)
      throw HardwareMissing(
          "verbs: no RDMA device found (ibv_get_device_list returned none); nic_backend verbs needs an RDMA NIC");
#if defined(GICOMM_BENCH_WITH_MLX5)
    return gicomm::mlx5dev::rdma_provider();
#else
    return "system rdma-core";
#endif
#else
    throw HardwareMissing("verbs: this build has no rdma-core (libibverbs headers were not found at configure time)");
#endif
  } else if (backend != NicBackend::softnic_cpu && backend != NicBackend::none) {
    throw PointFailure(std::string("mini-proxy workers post to softnic-cpu, none or verbs, not ") + name_of(backend));
  }
  return "";
}

void ProxyRig::start(NicBackend b, HostRegion remote, HostRegion local, bool parked) {
  std::string err;
  if (b == NicBackend::softnic_cpu) {
    nic = std::make_unique<softnic::SoftNic>();
    const auto rmr = nic->register_mr(remote.p, remote.bytes, softnic::kAccessLocalWrite | softnic::kAccessRemoteWrite);
    const auto lmr = local.p == remote.p ? rmr : nic->register_mr(local.p, local.bytes, softnic::kAccessLocalWrite);
    backend = proxy::make_softnic_backend(*nic, proxy::SoftnicTarget::between(lmr, rmr));
  } else if (b == NicBackend::none) {
    backend = proxy::make_null_backend(256);
  } else {
    require_proxy_backend(b);
    // Between two ranks (the writes land in the peer's buffer) or looped back on one device.
    Run* run = current_run();
    if (!run) throw PointFailure("mini-proxy verbs: no point is being measured");
    backend = open_verbs_path(*run, spec.workers, remote.p, remote.bytes, local.p, local.bytes);
    remote_ = remote;
  }
  proxy::PoolConfig pc;
  pc.workers = spec.workers;
  pc.batch = spec.batch;
  pc.numa_node = spec.numa_node;
  pc.stall_timeout_ns = spec.timeout_ns;
  pool = proxy::WorkerPool::create(pc, host_views, *backend, spec.publisher, &err);
  if (!pool && spec.unpinned_fallback) {
    pc.numa_node = -1;  // the pool refuses a NUMA node it cannot see: unpinned workers
    pool = proxy::WorkerPool::create(pc, host_views, *backend, spec.publisher, &err);
  }
  if (!pool) throw PointFailure("bad parameter: mini-proxy pool: " + err);
  if (nic) {
    // Beside the pool's workers, as the engine ceiling measures it (harness/ceiling_cpu.cpp).
    engine = std::make_unique<softnic::CpuEngine>(*nic, static_cast<int>(spec.engine_threads),
                                                  proxy::engine_cpus_beside(pc, spec.engine_threads));
    engine->start();
  }
  if (!pool->start(parked, &err)) throw PointFailure("mini-proxy pool: " + err);
}

bool ProxyRig::drain(const std::vector<uint64_t>& expected, std::string* err) {
  if (!pool->stop(&expected, spec.timeout_ns, err)) return false;
  // Every write completed (RC: placed at the target): the peer's buffer, where the checks look.
  if (remote_.p && current_run())
    fetch_peer_buffer(*current_run(), remote_.p, std::min(remote_.bytes, spec.fetch_bytes));
  return true;
}

void ProxyRig::stop_engine() {
  if (!engine) return;
  engine->stop();
  const softnic::Counters c = engine->counters();
  if (c.errors) throw PointFailure("softnic reported " + std::to_string(c.errors) + " error CQEs");
}

softnic::Counters ProxyRig::engine_counters() const { return engine ? engine->counters() : softnic::Counters{}; }

}  // namespace gicomm::bench
