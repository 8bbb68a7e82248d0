// The gpu engine's ceiling for one WQE shape (harness/engine_ceiling.h describes the method), by
// softnic::measure_gpu_engine_ceiling: softnic-gpu runs the engine on GPU 1 (the producer's NVLink
// peer), softnic-gpu-same on kSameGpuEngineBlocks SMs of GPU 0 beside the timing kernel, as the
// transport's session places them. Registers itself as the gpu engine's measurer.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "gicomm/softnic/gpu_ceiling.h"
#include "harness/engine_ceiling.h"
#include "harness/errors.h"

namespace gicomm::bench {

namespace {

CeilingSamples measure_gpu(const EngineShape& shape, const CeilingPlan& plan) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) {
    cudaGetLastError();
    ndev = 0;
  }
  const bool same = shape.backend == NicBackend::softnic_gpu_same;
  if (ndev < (same ? 1 : 2))
    throw HardwareMissing(std::string("engine ceiling on ") + name_of(shape.backend) + ": needs " +
                          (same ? "1 GPU" : "2 GPUs (the engine runs on the peer)") + ", found " +
                          std::to_string(ndev));
  softnic::CeilingConfig c;
  c.shape.inline_payload = shape.inline_payload;
  c.shape.bytes = shape.bytes;
  c.qps = shape.qps;
  c.depth = plan.depth;
  c.rounds = plan.rounds;
  c.producer_device = 0;
  c.engine_device = same ? 0 : 1;
  c.engine_blocks = same ? kSameGpuEngineBlocks : 0;
  // 0: the engine's own default; any other value goes to the measurer, which refuses one outside
  // 1..32 naming it (a negative one is not measured at the default instead).
  if (plan.engine_warps_per_block != 0) c.engine_warps_per_block = plan.engine_warps_per_block;
  c.timeout_ms = plan.timeout_ms;
  CeilingSamples out;
  try {
    const softnic::CeilingResult r = softnic::measure_gpu_engine_ceiling(c);
    out.wqe_rate_mps = r.wqe_rate_mps;
    out.sm_clock_mhz = r.sm_clock_mhz;
  } catch (const std::invalid_argument& e) {
    throw PointFailure(std::string("bad parameter: ") + e.what());
  } catch (const std::runtime_error& e) {
    throw PointFailure(e.what());
  }
  cudaSetDevice(0);
  if (out.wqe_rate_mps.empty())
    throw PointFailure("engine ceiling, " + shape.text() + ": no timed round finished (zero elapsed time)");
  return out;
}

const CeilingMeasurerRegistration registration(EngineKind::gpu, measure_gpu);

}  // namespace

}  // namespace gicomm::bench
