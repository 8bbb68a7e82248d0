// sm_clock: gda_one_op's one op (issue_cycles, issue_ns, completion_ns), each record with the SM
// clock measured in the same kernel. The driver never changes clocks: clock=observed (the clock the
// GPU runs at) is the only value its YAML allows; a fit of T = C/f + B needs several clocks, i.e.
// a platform that permits locking them and a driver mode that does it, neither of which exists.
#include "gda.cuh"

namespace gicomm::bench {

namespace {

std::vector<Record> sm_clock(Run& run) {
  std::vector<Record> out;
  for (Record& r : measure_one_op(run))
    if (r.metric == "issue_cycles" || r.metric == "issue_ns" || r.metric == "completion_ns") out.push_back(r);
  return out;
}

}  // namespace

GICOMM_EXPERIMENT(sm_clock, sm_clock);

}  // namespace gicomm::bench
