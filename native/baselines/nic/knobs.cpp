// See knobs.h.
#include "nic/knobs.h"

#include <dirent.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <variant>

namespace gicomm::baselines::nic {

const std::vector<Knob>& knobs() {
  // Names and values as NVSHMEM 3.4.5 and NCCL 2.28.9 read them (strings in nvshmem_transport_ibgda.so.3
  // and libnccl.so.2; REFERENCE.md 1.2/1.3). Ranges are this harness's: a value the library would
  // silently replace is refused here instead.
  static const std::vector<Knob> k = {
      {"ibgda_num_rc_per_pe", "NVSHMEM_IBGDA_NUM_RC_PER_PE", {"nvshmem-ibgda"}, Knob::kInt, 1, 1024, {},
       "RC QPs per peer PE (NVSHMEM default 2; 0 would leave only DC, which this harness does not measure)"},
      {"ibgda_nic_handler", "NVSHMEM_IBGDA_NIC_HANDLER", {"nvshmem-ibgda"}, Knob::kEnum, 0, 0,
       {"auto", "gpu", "cpu", "cpu_host_memory"},
       "who rings the doorbell (NVSHMEM default auto; cpu needs GDRCopy)"},
      {"ibgda_num_requests_in_batch", "NVSHMEM_IBGDA_NUM_REQUESTS_IN_BATCH", {"nvshmem-ibgda"}, Knob::kInt, 1, 1024, {},
       "WQEs per doorbell (NVSHMEM default 32; NVSHMEM also refuses a value above NVSHMEM_QP_DEPTH)"},
      {"gin_gdaki_qp_depth", "NCCL_GIN_GDAKI_QP_DEPTH", {"nccl-gin-gdaki"}, Knob::kPow2, 1, 65536, {},
       "GDAKI send queue depth (NCCL default 128)"},
      {"gin_proxy_queue_size", "NCCL_GIN_PROXY_QUEUE_SIZE", {"nccl-gin-proxy"}, Knob::kPow2, 1, 65536, {},
       "GPU-to-proxy queue entries (NCCL replaces a value that is not a power of two with its default)"},
  };
  return k;
}

std::string allowed_text(const Knob& k) {
  switch (k.kind) {
    case Knob::kInt: return "an integer from " + std::to_string(k.lo) + " to " + std::to_string(k.hi);
    case Knob::kPow2:
      return "a power of two from " + std::to_string(k.lo) + " to " + std::to_string(k.hi);
    case Knob::kEnum: {
      std::string s;
      for (const auto& v : k.values) s += (s.empty() ? "" : " | ") + v;
      return s;
    }
  }
  return "";
}

namespace {

std::string scalar_text(const gicomm::bench::Scalar& v) {
  if (std::holds_alternative<bool>(v)) return std::get<bool>(v) ? "true" : "false";
  if (std::holds_alternative<long long>(v)) return std::to_string(std::get<long long>(v));
  if (std::holds_alternative<double>(v)) return std::to_string(std::get<double>(v));
  if (std::holds_alternative<std::string>(v)) return std::get<std::string>(v);
  return "null";
}

// An integer value: a JSON integer, or a string of decimal digits (hand use, --param k=v).
bool as_int(const gicomm::bench::Scalar& v, long long* out) {
  if (std::holds_alternative<long long>(v)) {
    *out = std::get<long long>(v);
    return true;
  }
  if (std::holds_alternative<std::string>(v)) {
    const std::string& s = std::get<std::string>(v);
    if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    *out = std::stoll(s);
    return true;
  }
  return false;
}

}  // namespace

std::string knob_env(const gicomm::bench::Params& params, const std::string& transport,
                     std::map<std::string, std::string>* env) {
  for (const auto& kv : params.items()) {
    const Knob* knob = nullptr;
    for (const Knob& k : knobs())
      if (kv.first == k.param) knob = &k;
    if (!knob) continue;
    if (std::holds_alternative<std::monostate>(kv.second)) continue;  // null: the library's default
    const std::string value = scalar_text(kv.second);
    if (std::find(knob->transports.begin(), knob->transports.end(), transport) == knob->transports.end()) {
      std::string ts;
      for (const auto& t : knob->transports) ts += (ts.empty() ? "" : ", ") + t;
      return "bad parameter " + std::string(knob->param) + "=" + value + ": it sets " + knob->env +
             ", which applies to " + ts + " only, not to " + transport;
    }
    const std::string bad = "bad parameter " + std::string(knob->param) + "=" + value + " (" + knob->env +
                            "): allowed " + allowed_text(*knob) + "; " + knob->note;
    if (knob->kind == Knob::kEnum) {
      if (!std::holds_alternative<std::string>(kv.second) ||
          std::find(knob->values.begin(), knob->values.end(), value) == knob->values.end())
        return bad;
      (*env)[knob->env] = value;
      continue;
    }
    long long n = 0;
    if (!as_int(kv.second, &n) || n < knob->lo || n > knob->hi) return bad;
    if (knob->kind == Knob::kPow2 && (n & (n - 1)) != 0) return bad;
    (*env)[knob->env] = std::to_string(n);
  }
  return "";
}

namespace {

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = opendir(path.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

NicScan scan_nics(const std::string& sysfs_root) {
  NicScan scan;
  scan.where = sysfs_root + "/class/infiniband";
  for (const std::string& name : list_dir(scan.where)) {
    NicDevice dev;
    dev.name = name;
    const std::string base = scan.where + "/" + name;
    char buf[PATH_MAX];
    const ssize_t n = readlink((base + "/device/driver").c_str(), buf, sizeof(buf) - 1);
    if (n > 0) {
      std::string target(buf, static_cast<size_t>(n));
      dev.driver = target.substr(target.rfind('/') + 1);
    }
    dev.mlx5 = name.rfind("mlx5", 0) == 0 || dev.driver == "mlx5_core";
    for (const std::string& port : list_dir(base + "/ports"))
      if (read_line(base + "/ports/" + port + "/state").find("ACTIVE") != std::string::npos) dev.active = true;
    scan.devices.push_back(dev);
  }
  return scan;
}

std::string nic_unmet(const NicScan& scan, bool needs_mlx5, const std::string& transport) {
  const std::string what = needs_mlx5 ? "an mlx5 (ConnectX) RDMA device with an ACTIVE port"
                                      : "an RDMA (InfiniBand/RoCE verbs) device with an ACTIVE port";
  const std::string why = transport + " needs " + what +
                          (needs_mlx5 ? " (the GPU rings the NIC's doorbell)" : " (a CPU proxy posts verbs)");
  if (scan.devices.empty()) return why + "; found no RDMA device in " + scan.where;
  std::string seen;
  for (const NicDevice& d : scan.devices) {
    if (d.active && (d.mlx5 || !needs_mlx5)) return "";
    seen += (seen.empty() ? "" : ", ") + d.name + " (" + (d.mlx5 ? "mlx5" : d.driver.empty() ? "unknown driver" : d.driver) +
            (d.active ? ", active" : ", no ACTIVE port") + ")";
  }
  return why + "; found only " + seen + " in " + scan.where;
}

}  // namespace gicomm::baselines::nic
