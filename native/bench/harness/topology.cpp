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
}  // namespace

void install_launcher(std::unique_ptr<Launcher> l) { installed() = std::move(l); }
Launcher* launcher() { return installed().get(); }
void register_launcher_factory(LauncherFactory f) { factory() = f; }
LauncherFactory launcher_factory() { return factory(); }

}  // namespace gicomm::bench
