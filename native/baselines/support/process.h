// Child processes of the baseline drivers (host code): the folder of the running executable
// (sibling harnesses live beside it), and running a program with a deadline.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gicomm::baselines {

// The folder of /proc/self/exe ("." when unknown).
std::string self_dir();

// Runs the program `argv` (a path, not looked up in PATH) with `env` added, kills it after
// `deadline_s`; returns how it ended ("" for exit 0).
std::string run_child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                      double deadline_s);

}  // namespace gicomm::baselines
