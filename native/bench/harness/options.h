// The drivers' command line (native/bench/README.md).
#pragma once

#include <map>
#include <string>

#include "harness/params.h"

namespace gicomm::bench {

struct Options {
  std::string experiment, points_path, out_path, campaign, host, platform, provenance_id;
  int run_index = 0;
  // --warmup / --iters, else the experiment's declared values (its YAML); -1 when neither.
  int warmup = -1;
  int iters = -1;
  int timeout_ms = 2000;
  // Hand use: the transport and NIC backend of the --param point. With --points each point names
  // its own; --nic-backend is then only checked against them (bench.py passes it).
  std::string transport, nic_backend;
  Params cli_params;  // --param key=value (a single point for hand use)
  // Two ranks: --rank, --world-size, --rendezvous, --rendezvous-port (name without dashes ->
  // value), for the launcher library (harness/topology.h).
  std::map<std::string, std::string> launch_flags;
  // The RDMA port of the mlx5 and verbs backends (--nic-device, --nic-port, --gid-index; "": the
  // first device), and --topology loopback: one process connects its QPs to its own device (a NIC
  // point on one rank is refused without it).
  std::string nic_device;
  int nic_port = 1;
  int gid_index = 0;
  std::string topology;
  bool list = false;  // --list: print the experiments this driver serves
};

// Fills `out`; returns 0, or 2 with `error` set (the message names the flag and the value).
int parse_options(int argc, char** argv, Options* out, std::string* error);

// The usage line of `program`.
std::string usage(const std::string& program);

}  // namespace gicomm::bench
