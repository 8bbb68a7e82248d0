// cuStreamWriteValue64 completion publisher (see gpu_completion.h). The driver function is looked
// up through cudaGetDriverEntryPointByVersion, so the bench links only the runtime (build hosts
// without a driver have no libcuda.so to link against).
#include "proxy/gpu_completion.h"

namespace gicomm {
namespace proxy_bench {

StreamWritePublisher::StreamWritePublisher(int device, uint64_t* gpu_counters, uint32_t workers)
    : device_(device), counters_(gpu_counters), workers_(workers) {
  cudaDriverEntryPointQueryResult q{};
  void* fn = nullptr;
  cudaError_t e = cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &fn, 12000, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn) {
    init_error_ = "cuStreamWriteValue64 is not available from this driver";
    return;
  }
  write_value64_ = reinterpret_cast<WriteValue64>(fn);
  for (uint32_t w = 0; w < workers && init_error_.empty(); ++w) {
    cudaStream_t s = nullptr;
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) init_error_ = std::string("cudaStreamCreate: ") + cudaGetErrorString(e);
    streams_.push_back(s);
  }
}

StreamWritePublisher::~StreamWritePublisher() {
  for (cudaStream_t s : streams_)
    if (s) cudaStreamDestroy(s);
}

bool StreamWritePublisher::ok(std::string* error) const {
  if (!init_error_.empty() && error) *error = init_error_;
  return init_error_.empty();
}

bool StreamWritePublisher::publish(uint32_t ring, uint64_t done, std::string* error) {
  // Worker threads are created by the pool: bind each to the device (its primary context) once.
  thread_local int bound = -1;
  if (bound != device_) {
    const cudaError_t e = cudaSetDevice(device_);
    if (e != cudaSuccess) {
      *error = std::string("cudaSetDevice: ") + cudaGetErrorString(e);
      return false;
    }
    bound = device_;
  }
  // Ring r belongs to worker r % W (pool.h), so each stream is used by one thread only.
  const CUresult r = write_value64_(reinterpret_cast<CUstream>(streams_[ring % workers_]),
                                    reinterpret_cast<CUdeviceptr>(counters_ + ring), done, CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r != CUDA_SUCCESS) {
    *error = "cuStreamWriteValue64 (ring " + std::to_string(ring) + ", value " + std::to_string(done) +
             ") failed with CUresult " + std::to_string(static_cast<int>(r));
    return false;
  }
  return true;
}

bool StreamWritePublisher::drain(std::string* error) {
  for (cudaStream_t s : streams_) {
    const cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) {
      if (error) *error = std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e);
      return false;
    }
  }
  return true;
}

}  // namespace proxy_bench
}  // namespace gicomm
