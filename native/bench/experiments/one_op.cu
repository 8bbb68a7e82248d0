// one_op: the pipeline's Table 3 experiment: issue, put+completion and round trip of one 8-byte
// write on mini-gda, with the default ordering (GPU-scope fence) unless the point names a variant:
// everything gda_one_op records, plus gda_rtt's rtt_ns.
#include "gda.cuh"

namespace gicomm::bench {

namespace {

std::vector<Record> one_op(Run& run) {
  std::vector<Record> out = measure_one_op(run);
  for (Record& r : measure_rtt(run)) out.push_back(r);
  return out;
}

}  // namespace

GICOMM_EXPERIMENT(one_op, one_op);

}  // namespace gicomm::bench
