// realpath() of an emulated device's /sys/class/infiniband/<dev>/device under gicomm-emu-run
// --sysfs (the mount namespace or the preload shim): it resolves to GICOMM_EMU_PCI_DEVICE, a path
// under it resolves under the PCI directory, and other devices and paths are left alone.
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main() {
  const char* pci = std::getenv("SYSFS_TEST_PCI");  // what the test asked gicomm-emu-run to use
  if (pci == nullptr) {
    std::fprintf(stderr, "sysfs_realpath_test: set SYSFS_TEST_PCI\n");
    return 2;
  }
  int bad = 0;
  char buf[PATH_MAX];
  const char* got = realpath("/sys/class/infiniband/mlx5_0/device", buf);
  if (got == nullptr || std::string(got) != pci) {
    std::fprintf(stderr, "FAIL: mlx5_0/device -> %s, expected %s\n", got ? got : "(error)", pci);
    ++bad;
  }
  char* heap = realpath("/sys/class/infiniband/mlx5_0/device/vendor", nullptr);
  if (heap == nullptr || std::string(heap) != std::string(pci) + "/vendor") {
    std::fprintf(stderr, "FAIL: mlx5_0/device/vendor -> %s\n", heap ? heap : "(error)");
    ++bad;
  }
  std::free(heap);
  if (realpath("/sys/class/infiniband/mlx5_77/device", buf) != nullptr && std::string(buf) == pci) {
    std::fprintf(stderr, "FAIL: a device that is not emulated resolved to the PCI directory\n");
    ++bad;
  }
  if (realpath("/", buf) == nullptr || std::strcmp(buf, "/") != 0) {
    std::fprintf(stderr, "FAIL: realpath(\"/\") -> %s\n", buf);
    ++bad;
  }
  std::printf("sysfs_realpath_test: %s\n", bad ? "FAIL" : "ok");
  return bad ? 1 : 0;
}
