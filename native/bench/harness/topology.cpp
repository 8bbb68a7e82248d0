#include "harness/topology.h"

namespace gicomm::bench {

namespace {
std::unique_ptr<Launcher>& installed() {
  static std::unique_ptr<Launcher> l;
  return l;
}
LauncherFactory& factory() {
  static LauncherFactory f = nullptr;
  return f;
}
std::string& provider() {
  static std::string p;
  return p;
}
}  // namespace

void install_launcher(std::unique_ptr<Launcher> l) { installed() = std::move(l); }
Launcher* launcher() { return installed().get(); }
void register_launcher_factory(LauncherFactory f) { factory() = f; }
LauncherFactory launcher_factory() { return factory(); }
void set_rdma_provider(const std::string& name) { provider() = name; }
std::string rdma_provider() { return provider(); }

}  // namespace gicomm::bench
