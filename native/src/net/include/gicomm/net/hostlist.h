// Slurm's compact host and task lists, expanded without calling scontrol (the same answers as
// `scontrol show hostnames`), so a rank can find its peer's host on any node of the job.
#pragma once

#include <string>
#include <vector>

namespace gicomm::net {

// "gpu[01-03,7],login1" -> gpu01 gpu02 gpu03 gpu7 login1; several bracket groups in one name
// expand as a product in order ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2). A range keeps the width of
// its lower bound ("[08-10]" -> 08 09 10). At most kMaxHosts names. false and a reason naming the
// offending piece on malformed input.
constexpr size_t kMaxHosts = 1u << 16;
bool expand_hostlist(const std::string& list, std::vector<std::string>* hosts, std::string* error);

// SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE: "2(x3),1" -> 2 2 2 1.
bool expand_tasks_per_node(const std::string& spec, std::vector<int>* counts, std::string* error);

}  // namespace gicomm::net
