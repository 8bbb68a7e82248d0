#include "support/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gicomm::baselines {

std::string self_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

std::string run_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                      double deadline_s) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return "could not fork";
  if (pid == 0) {
    for (const auto& kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "gicomm baselines: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  const auto t_end = std::chrono::steady_clock::now() + std::chrono::duration<double>(deadline_s);
  int status = 0;
  std::string ended;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > t_end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ended = "killed after " + std::to_string(static_cast<int>(deadline_s)) + " s";
      break;
    }
    usleep(20000);
  }
  if (ended.empty() && WIFEXITED(status))
    ended = WEXITSTATUS(status) == 0 ? "" : "exited with code " + std::to_string(WEXITSTATUS(status));
  else if (ended.empty())
    ended = "killed by signal " + std::to_string(WTERMSIG(status));
  return ended;
}

}  // namespace gicomm::baselines
