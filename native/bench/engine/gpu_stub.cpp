#include "engine_gpu.h"

std::vector<gicomm::bench::Record> gpu_engine_ceiling(const gicomm::bench::Point&, const gicomm::bench::Options&) {
  throw gicomm::bench::HardwareMissing("this build has no CUDA: the gpu engine ceiling needs two GPUs");
}
