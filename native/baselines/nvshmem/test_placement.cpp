// The NIC harness's PE placement (nvshmem/placement.h) and its MPS detection, on the CPU.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nvshmem/placement.h"

namespace {
int failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}
}  // namespace

int main() {
  using gicomm::nvshmem_path::mps_daemon_present;
  using gicomm::nvshmem_path::place_pe;
  // Two GPUs: one PE per GPU, whatever NIC answers.
  for (bool emulated : {false, true})
    for (int rank : {0, 1}) {
      const auto p = place_pe(rank, 2, emulated, "nvshmem-ibgda");
      expect(p.refusal.empty() && p.device == rank && p.pes_per_gpu == 1, "two GPUs: rank on its own GPU");
    }
  // One GPU on the emulated NIC: both PEs on GPU 0.
  for (int rank : {0, 1}) {
    const auto p = place_pe(rank, 1, true, "nvshmem-ibrc");
    expect(p.refusal.empty() && p.device == 0 && p.pes_per_gpu == 2, "one GPU, emulated: both on GPU 0");
  }
  // One GPU on a real NIC, or none: refused with the reason.
  const auto real = place_pe(1, 1, false, "nvshmem-ibgda");
  expect(real.refusal.find("nvshmem-ibgda needs 2 GPUs") == 0 && real.refusal.find("found 1") != std::string::npos,
         "one GPU, real NIC: refused naming the transport and the GPUs found: " + real.refusal);
  expect(!place_pe(0, 0, true, "nvshmem-ibgda").refusal.empty(), "no GPU: refused");
  // One PE per node (launched on two nodes): GPU 0 of a one-GPU node, real NIC or not; none: refused.
  const auto alone = place_pe(0, 1, false, "nvshmem-ibgda", 1);
  expect(alone.refusal.empty() && alone.device == 0 && alone.pes_per_gpu == 1, "one PE per node: GPU 0, alone");
  expect(place_pe(0, 0, false, "nvshmem-ibrc", 1).refusal == "nvshmem-ibrc needs a GPU, found none",
         "one PE per node without a GPU: refused");
  // Two local launched ranks on a two-GPU node: local rank r on GPU r.
  expect(place_pe(1, 2, false, "nvshmem-ibgda", 2).device == 1, "local rank 1 of 2 on GPU 1");

  // MPS: a control FIFO or socket in CUDA_MPS_PIPE_DIRECTORY is a daemon; a missing one or a plain file
  // is not.
  char tmpl[] = "/tmp/gicomm-mps-test-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  setenv("CUDA_MPS_PIPE_DIRECTORY", dir.c_str(), 1);
  expect(!mps_daemon_present(), "empty pipe directory: no daemon");
  const std::string control = dir + "/control";
  FILE* f = std::fopen(control.c_str(), "w");
  if (f) std::fclose(f);
  expect(!mps_daemon_present(), "a plain file named control is no daemon");
  unlink(control.c_str());
  expect(mkfifo(control.c_str(), 0600) == 0, "mkfifo");
  expect(mps_daemon_present(), "a control FIFO: a daemon listens");
  unlink(control.c_str());
  // A UNIX socket named control: a daemon listens too.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, control.c_str(), sizeof(addr.sun_path) - 1);
  expect(fd >= 0 && bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0, "bind a UNIX socket");
  expect(mps_daemon_present(), "a control socket: a daemon listens");
  if (fd >= 0) close(fd);
  unlink(control.c_str());
  rmdir(dir.c_str());
  if (failures == 0) std::printf("test_nvshmem_placement: all passed\n");
  return failures == 0 ? 0 : 1;
}
