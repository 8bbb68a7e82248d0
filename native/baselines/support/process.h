// Child processes of the baseline drivers (host code): the folder of the running executable
// (sibling harnesses live beside it), and running a program with a deadline.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gicomm::baselines {

// The folder of /proc/self/exe ("." when unknown).
std::string self_dir();

// Runs `argv` with `env` added, kills it after `deadline_s`; returns how it ended ("" for exit 0).
// `search_path`: look argv[0] up in PATH. With `stderr_path`, the child's stderr goes there, is
// copied to ours when it ends, and a failure's text ends with its last line.
std::string run_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                      double deadline_s, bool search_path = false, const std::string& stderr_path = "");

}  // namespace gicomm::baselines
