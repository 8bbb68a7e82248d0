// The library knobs of the NIC baselines (sweep parameters passed to the ranks as env) and the
// NIC scan (/sys/class/infiniband, as the pipeline's probe reads it). Host code only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "harness/harness.h"

namespace gicomm::baselines::nic {

// One sweep parameter that becomes a library environment variable.
struct Knob {
  const char* param;                // the sweep parameter, e.g. ibgda_num_rc_per_pe
  const char* env;                  // the variable the library reads, e.g. NVSHMEM_IBGDA_NUM_RC_PER_PE
  std::vector<std::string> transports;  // the transports it applies to
  enum Kind { kInt, kPow2, kEnum } kind;
  long long lo, hi;                 // kInt / kPow2: inclusive range
  std::vector<std::string> values;  // kEnum
  const char* note;                 // why the range is what it is
};

const std::vector<Knob>& knobs();

// What a knob accepts, in words ("an integer from 1 to 1024", "auto | gpu | ...").
std::string allowed_text(const Knob& k);

// Checks every knob parameter of a point of `transport` and fills `env` with the variables to set.
// Returns "" or the reason the point cannot run: names the parameter, its value and what is allowed
// (or the transports the parameter applies to).
std::string knob_env(const gicomm::bench::Params& params, const std::string& transport,
                     std::map<std::string, std::string>* env);

// RDMA devices under <sysfs_root>/class/infiniband.
struct NicDevice {
  std::string name, driver;
  bool mlx5 = false;
  bool active = false;  // at least one port in state ACTIVE
};
struct NicScan {
  std::string where;  // the folder read
  std::vector<NicDevice> devices;
};
NicScan scan_nics(const std::string& sysfs_root);

// "" when the scan has what `transport` needs (an active port; an mlx5 device when `needs_mlx5`),
// else the reason.
std::string nic_unmet(const NicScan& scan, bool needs_mlx5, const std::string& transport);

}  // namespace gicomm::baselines::nic
