// An RC QP's address as its peer needs it: the mlx5 placement of mini-gda between two ranks
// (SessionConfig::connect_peer). Plain C++, so host-only code (the harness's two-rank side) can
// fill it without the CUDA headers.
#pragma once

#include <cstdint>

namespace gicomm::gda {

struct PeerQp {
  uint32_t qpn = 0;
  uint16_t lid = 0;      // InfiniBand
  uint8_t gid[16] = {};  // RoCE (or IB with GRH)
  bool roce = false;
};

}  // namespace gicomm::gda
