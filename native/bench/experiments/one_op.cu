// one_op: the pipeline's Table 3 experiment: issue, put+completion and round trip of one 8-byte
// write on mini-gda, with the default ordering (GPU-scope fence) unless the point names a variant:
// everything gda_one_op records, plus gda_rtt's rtt_ns (a failed rtt_ns record, with the reason,
// where the round trip alone fails).
#include "gda.cuh"
#include "harness/responder.h"

namespace gicomm::bench {

namespace {

std::vector<Record> one_op(Run& run) {
  std::vector<Record> out = measure_one_op(run);
  // A round trip that fails (between two ranks it depends on rank 1's responder too) leaves the
  // one-op records standing, beside a failed rtt_ns naming the reason.
  try {
    for (Record& r : measure_rtt(run)) out.push_back(r);
  } catch (const PointFailure& e) {
    out.push_back(Record::failed("rtt_ns", "ns", e.what()));
  }
  return out;
}

}  // namespace

GICOMM_EXPERIMENT(one_op, one_op);
// Rank 1's half of the round trip between two ranks (harness/responder.h).
GICOMM_EXPERIMENT_SERVE(one_op, round_trip_responder);

}  // namespace gicomm::bench
