// libgicomm_emu_sysfs.so: an LD_PRELOAD path shim for libraries that resolve
// /sys/class/infiniband/<dev>/device of an emulated device (NVSHMEM does, to find the NIC's PCI
// function and its distance to the GPU). realpath() of that link, or of a path under it, answers
// with a real PCI device directory: GICOMM_EMU_PCI_DEVICE, else the first NVIDIA function (the
// emulated NIC "sits next to" the GPU). Every other path goes to the C library's realpath.
// gicomm-emu-run --sysfs uses it where it cannot mount a private /sys/class/infiniband (not root,
// or the directory does not exist because the kernel has no RDMA core).
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using RealpathFn = char* (*)(const char*, char*);

RealpathFn real_realpath() {
  static RealpathFn fn = reinterpret_cast<RealpathFn>(dlsym(RTLD_NEXT, "realpath"));
  return fn;
}

bool is_emulated_name(const std::string& name) {
  const char* env = std::getenv("GICOMM_EMU_DEVICES");
  const std::string list = env != nullptr ? env : "mlx5_0:ib,mlx5_1:roce";
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.substr(0, item.find(':')) == name) return true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return false;
}

std::string pci_device() {
  if (const char* env = std::getenv("GICOMM_EMU_PCI_DEVICE")) return env;
  DIR* d = opendir("/sys/bus/pci/devices");
  if (d == nullptr) return "";
  std::string found;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string dir = std::string("/sys/bus/pci/devices/") + e->d_name;
    FILE* f = std::fopen((dir + "/vendor").c_str(), "r");
    if (f == nullptr) continue;
    char vendor[16] = {};
    const bool nvidia = std::fgets(vendor, sizeof vendor, f) != nullptr && std::strncmp(vendor, "0x10de", 6) == 0;
    std::fclose(f);
    if (nvidia && (found.empty() || dir < found)) found = dir;
  }
  closedir(d);
  if (found.empty()) return "";
  char buf[PATH_MAX];
  return real_realpath()(found.c_str(), buf) != nullptr ? buf : found;
}

// The PCI path for /sys/class/infiniband/<emulated dev>/device[/rest], or "" for any other path.
std::string rewrite(const char* path) {
  static const std::string prefix = "/sys/class/infiniband/";
  if (path == nullptr || std::strncmp(path, prefix.c_str(), prefix.size()) != 0) return "";
  const std::string rest = path + prefix.size();
  const size_t slash = rest.find('/');
  if (slash == std::string::npos || !is_emulated_name(rest.substr(0, slash))) return "";
  const std::string tail = rest.substr(slash);
  if (tail != "/device" && tail.compare(0, 8, "/device/") != 0) return "";
  const std::string pci = pci_device();
  return pci.empty() ? "" : pci + tail.substr(7);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) char* realpath(const char* path, char* resolved) {
  const std::string target = rewrite(path);
  if (target.empty()) return real_realpath()(path, resolved);
  if (target.size() >= PATH_MAX) {
    errno = ENAMETOOLONG;
    return nullptr;
  }
  char* out = resolved != nullptr ? resolved : static_cast<char*>(std::malloc(PATH_MAX));
  if (out == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  std::memcpy(out, target.c_str(), target.size() + 1);
  return out;
}

// The fortified entry point (_FORTIFY_SOURCE builds call it instead of realpath).
extern "C" __attribute__((visibility("default"))) char* __realpath_chk(const char* path, char* resolved, size_t resolvedlen) {
  if (resolved != nullptr && resolvedlen < PATH_MAX) {
    std::fprintf(stderr, "gicomm-emu sysfs shim: realpath buffer of %zu bytes (PATH_MAX needed)\n", resolvedlen);
    std::abort();
  }
  return realpath(path, resolved);
}
