// libibverbs helpers that need no device: names of enum values, rate conversions, sysfs paths,
// and the import calls (which have no kernel objects to import here).
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "verbs_objects.h"

using namespace gicomm::emu;

#pragma GCC visibility push(default)  // the public entry points (the version script picks them)
extern "C" {

const char* ibv_node_type_str(enum ibv_node_type node_type) {
  switch (node_type) {
    case IBV_NODE_CA: return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH: return "InfiniBand switch";
    case IBV_NODE_ROUTER: return "InfiniBand router";
    case IBV_NODE_RNIC: return "iWARP NIC";
    case IBV_NODE_USNIC: return "usNIC";
    case IBV_NODE_USNIC_UDP: return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED: return "unspecified";
    default: return "unknown";
  }
}

const char* ibv_port_state_str(enum ibv_port_state port_state) {
  static const char* const names[] = {"no state", "down", "init", "armed", "active", "active defer"};
  const unsigned i = static_cast<unsigned>(port_state);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}

const char* ibv_event_type_str(enum ibv_event_type event) {
  static const char* const names[] = {
      "CQ error",           "local work queue catastrophic error", "invalid request local work queue error",
      "local access violation work queue error", "communication established", "send queue drained",
      "path migrated",      "path migration request error",        "local catastrophic error",
      "port active",        "port error",                          "LID change",
      "P_Key change",       "SM change",                           "SRQ catastrophic error",
      "SRQ limit reached",  "last WQE reached",                    "client reregistration",
      "GID table change",   "WQ fatal"};
  const unsigned i = static_cast<unsigned>(event);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}

const char* ibv_wc_status_str(enum ibv_wc_status status) {
  static const char* const names[] = {"success",
                                      "local length error",
                                      "local QP operation error",
                                      "local EE context operation error",
                                      "local protection error",
                                      "Work Request Flushed Error",
                                      "memory management operation error",
                                      "bad response error",
                                      "local access error",
                                      "remote invalid request error",
                                      "remote access error",
                                      "remote operation error",
                                      "transport retry counter exceeded",
                                      "RNR retry counter exceeded",
                                      "local RDD violation error",
                                      "remote invalid RD request",
                                      "aborted error",
                                      "invalid EE context number",
                                      "invalid EE context state",
                                      "fatal error",
                                      "response timeout error",
                                      "general error",
                                      "TM error",
                                      "TM rendezvous incomplete"};
  const unsigned i = static_cast<unsigned>(status);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}

// IB static rate encoding <-> multiples of 2.5 Gb/s and Mb/s (the common rates).
namespace {
struct Rate {
  ibv_rate rate;
  int mult;
  int mbps;
};
const Rate kRates[] = {{IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},     {IBV_RATE_10_GBPS, 4, 10000},
                       {IBV_RATE_20_GBPS, 8, 20000},     {IBV_RATE_30_GBPS, 12, 30000},  {IBV_RATE_40_GBPS, 16, 40000},
                       {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},  {IBV_RATE_120_GBPS, 48, 120000},
                       {IBV_RATE_25_GBPS, 10, 25000},    {IBV_RATE_50_GBPS, 20, 50000},  {IBV_RATE_100_GBPS, 40, 100000},
                       {IBV_RATE_200_GBPS, 80, 200000},  {IBV_RATE_300_GBPS, 120, 300000},
                       {IBV_RATE_400_GBPS, 160, 400000}, {IBV_RATE_600_GBPS, 240, 600000}};
}  // namespace

int ibv_rate_to_mult(enum ibv_rate rate) {
  for (const Rate& r : kRates)
    if (r.rate == rate) return r.mult;
  return -1;
}
enum ibv_rate mult_to_ibv_rate(int mult) {
  for (const Rate& r : kRates)
    if (r.mult == mult) return r.rate;
  return IBV_RATE_MAX;
}
int ibv_rate_to_mbps(enum ibv_rate rate) {
  for (const Rate& r : kRates)
    if (r.rate == rate) return r.mbps;
  return -1;
}
enum ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const Rate& r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}

const char* ibv_get_sysfs_path(void) { return "/sys"; }

// Tells a program which rdma-core answers (gicomm/mlx5dev/devx.h rdma_provider() looks for it).
const char* gicomm_emu_provider(void) { return kFwVersion; }

int ibv_read_sysfs_file(const char* dir, const char* file, char*, size_t) {
  fail(ENOENT, "ibv_read_sysfs_file", std::string(dir ? dir : "") + "/" + (file ? file : ""),
       "the emulated devices have no sysfs entries");
  return -1;
}

ibv_pd* ibv_import_pd(ibv_context*, uint32_t handle) {
  fail(EOPNOTSUPP, "ibv_import_pd", "PD handle " + std::to_string(handle), "nothing to import in the emulated rdma-core");
  return nullptr;
}
void ibv_unimport_pd(ibv_pd*) {}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t handle) {
  fail(EOPNOTSUPP, "ibv_import_mr", "MR handle " + std::to_string(handle), "nothing to import in the emulated rdma-core");
  return nullptr;
}
void ibv_unimport_mr(ibv_mr*) {}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t handle) {
  fail(EOPNOTSUPP, "ibv_import_dm", "DM handle " + std::to_string(handle), "device memory is not emulated");
  return nullptr;
}
void ibv_unimport_dm(ibv_dm*) {}

}  // extern "C"
#pragma GCC visibility pop
