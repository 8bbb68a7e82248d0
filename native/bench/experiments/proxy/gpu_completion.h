// Tuned completion for mini-proxy without GDRCopy: the worker updates a counter in GPU memory with
// a CUDA stream memory operation (cuStreamWriteValue64), so the GPU polls its own memory instead of
// reading a host-resident counter across PCIe on every poll.
//
// Why this and not the alternatives CUDA offers:
//  - mapped pinned host memory (cudaHostAlloc Mapped) is the baseline itself: the counter stays in
//    host memory and every GPU poll is a PCIe read;
//  - cudaMemcpyAsync of a host word into the counter needs a copy engine and a staging word per
//    update; the stream memory operation is executed by the GPU front end, carries its value inside
//    the command, and needs no buffer;
//  - a CPU store into GPU memory (what GDRCopy gives) needs the nvidia-peermem/gdrdrv BAR mapping,
//    not available on these hosts.
// Cost: each update is a driver call (~1 us of worker time, measured in the bench as part of the
// round trip), so the pool publishes at most once per ring per polling pass.
#pragma once

#include <cuda.h>  // types only: the driver entry point is fetched through the runtime
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gicomm/proxy/pool.h"

namespace gicomm {
namespace proxy_bench {

class StreamWritePublisher : public proxy::CompletionPublisher {
 public:
  // counters: GPU memory, one uint64_t per ring; one non-blocking stream per worker.
  StreamWritePublisher(int device, uint64_t* gpu_counters, uint32_t workers);
  ~StreamWritePublisher() override;
  bool ok(std::string* error) const;
  bool publish(uint32_t ring, uint64_t done, std::string* error) override;
  // Wait for the streams' pending writes (host side, after a run).
  bool drain(std::string* error);

 private:
  using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  WriteValue64 write_value64_ = nullptr;
  int device_;
  uint64_t* counters_;
  uint32_t workers_;
  std::vector<cudaStream_t> streams_;
  std::string init_error_;
};

}  // namespace proxy_bench
}  // namespace gicomm
