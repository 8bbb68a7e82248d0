// mini-gda's DEVX QP addresses survive the exchange's wire form (gicomm/net/devx_endpoint.h).
#include <cstring>
#include <string>

#include "check.h"
#include "gicomm/net/devx_endpoint.h"

using namespace gicomm;

int main() {
  mlx5dev::QpAddress a{};
  a.qpn = 0x1234;
  a.lid = 0;
  a.roce = true;
  const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 1, 7};
  std::memcpy(a.gid, gid, 16);
  mlx5dev::QpAddress b = a;
  b.qpn = 0x1235;

  net::Endpoint ep;
  ep.device = "mlx5_0";
  ep.mtu = 4096;
  net::add_devx_qp(&ep, a);
  net::add_devx_qp(&ep, b);
  net::Message m;
  net::put_endpoint(ep, &m);
  net::Endpoint peer;
  std::string err;
  REQUIRE(net::get_endpoint(m, &peer, &err), "%s", err.c_str());
  mlx5dev::QpAddress back{};
  REQUIRE(net::devx_peer_address(peer, 1, &back, &err), "%s", err.c_str());
  REQUIRE(back.qpn == 0x1235 && back.roce && back.lid == 0 && std::memcmp(back.gid, gid, 16) == 0);
  REQUIRE(!net::devx_peer_address(peer, 2, &back, &err) && err.find("offers 2 QPs, not QP 2") != std::string::npos);
  peer.qps[0].psn = 77;  // a verbs peer with a random PSN: DEVX cannot follow it
  REQUIRE(!net::devx_peer_address(peer, 0, &back, &err) && err.find("expects PSN 0") != std::string::npos);
  net::Endpoint small = ep;
  small.mtu = 1024;
  REQUIRE(net::devx_path_mtu(ep, small) == 3 && net::devx_path_mtu(ep, ep) == 5);
  std::printf("net_devx_endpoint_test: ok\n");
  return 0;
}
