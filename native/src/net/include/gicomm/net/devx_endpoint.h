// mini-gda's DEVX QPs (mlx5 placement) through the out-of-band exchange: the mapping between
// mlx5dev::QpAddress / ConnectParams and net::Endpoint, in one place. Header only, so gicomm_net
// does not depend on the mlx5 backend; include it where gicomm_mlx5dev is linked.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "gicomm/mlx5dev/devx.h"
#include "gicomm/net/oob.h"

namespace gicomm::net {

// Adds a DEVX QP (its address from DevxDevice::local_address) to `ep`. DEVX's connect starts both
// PSNs at 0, so the QP is announced with PSN 0. The first QP sets the port's LID, GID and link.
inline void add_devx_qp(Endpoint* ep, const mlx5dev::QpAddress& a) {
  if (ep->qps.empty()) {
    ep->lid = a.lid;
    std::copy(std::begin(a.gid), std::end(a.gid), ep->gid.begin());
    ep->roce = a.roce;
  }
  ep->qps.push_back({a.qpn, 0});
}

// The peer's QP i as DevxDevice::connect_rc_qp takes it. false (and a reason) when the peer has no
// QP i or announced a PSN DEVX cannot honour.
inline bool devx_peer_address(const Endpoint& peer, size_t i, mlx5dev::QpAddress* out, std::string* error) {
  if (i >= peer.qps.size()) {
    *error = "the peer's " + peer.device + " offers " + std::to_string(peer.qps.size()) + " QPs, not QP " +
             std::to_string(i);
    return false;
  }
  if (peer.qps[i].psn != 0) {
    *error = "the peer's QP " + std::to_string(peer.qps[i].qpn) + " starts at PSN " + std::to_string(peer.qps[i].psn) +
             "; a DEVX QP expects PSN 0";
    return false;
  }
  *out = mlx5dev::QpAddress{};
  out->qpn = peer.qps[i].qpn;
  out->lid = peer.lid;
  std::copy(peer.gid.begin(), peer.gid.end(), out->gid);
  out->roce = peer.roce;
  return true;
}

// ConnectParams.mtu (PRM encoding) for a path between the two ports: the smaller MTU.
inline uint8_t devx_path_mtu(const Endpoint& local, const Endpoint& peer) {
  return static_cast<uint8_t>(mtu_code(std::min(local.mtu, peer.mtu)));
}

}  // namespace gicomm::net
