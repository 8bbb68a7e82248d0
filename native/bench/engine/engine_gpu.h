// The gpu engine's ceiling (gpu_ceiling.cu); without CUDA it throws HardwareMissing.
#pragma once

#include <vector>

#include "common/harness.h"

std::vector<gicomm::bench::Record> gpu_engine_ceiling(const gicomm::bench::Point& p, const gicomm::bench::Options& o);
