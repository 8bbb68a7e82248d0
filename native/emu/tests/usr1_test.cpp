// SIGUSR1 on a process with the emulated NIC running: the signal handler's line names what the
// engine thread is doing (so a stuck engine still answers), and the engine's state dump follows at
// its next pass, listing the QP this program created.
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "one_qp.h"

int main() {
  OneQp o;
  if (o.devices == 0) return 77;
  ibv_qp* qp = o.qp;
  if (!o.ok()) {
    std::printf("usr1_test: FAIL: no QP\n");
    return 1;
  }
  // stderr into a file while the signal is handled
  char path[] = "/tmp/gicomm-usr1-XXXXXX";
  const int fd = mkstemp(path);
  const int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  raise(SIGUSR1);
  std::string text;
  for (int i = 0; i < 200 && text.find("engine state (SIGUSR1)") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    char buf[4096];
    const ssize_t got = pread(fd, buf, sizeof buf, 0);
    text.assign(buf, got > 0 ? static_cast<size_t>(got) : 0);
  }
  dup2(saved, STDERR_FILENO);
  close(fd);
  unlink(path);
  std::fprintf(stderr, "%s", text.c_str());
  char qpn[32];
  std::snprintf(qpn, sizeof qpn, "QP 0x%x", qp->qp_num);
  const bool line = text.find("]: engine thread: ") != std::string::npos && text.find(" us\n") != std::string::npos;
  const bool dump = text.find("engine state (SIGUSR1)") != std::string::npos && text.find(qpn) != std::string::npos;
  ibv_destroy_qp(o.qp);
  ibv_destroy_cq(o.cq);
  ibv_dealloc_pd(o.pd);
  ibv_close_device(o.ctx);
  ibv_free_device_list(o.list);
  if (!line || !dump) {
    std::printf("usr1_test: FAIL: %s%s\n", line ? "" : "no 'engine thread' line from the handler; ",
                dump ? "" : "no state dump naming the QP");
    return 1;
  }
  std::printf("usr1_test: ok\n");
  return 0;
}
