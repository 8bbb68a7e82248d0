// The same-run floor of a transport's latency: a driver that times the bare sequence an op stands
// on beside the op (mini-gda's WQE + fence + doorbell, mini-proxy's 16-byte ring store) writes it
// on the op's own records (`floor`: an id of config/floors.yaml, `floor_ns`: that floor's p50 in
// this point), so overhead above the floor needs no join later. One call per driver, after its
// records are made.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "harness/record.h"

namespace gicomm::bench {

// Every ok record of `records` whose metric is one of `latencies` gets floor `floor_id` and the
// p50 of the ok record `floor_metric` of the same list. Nothing changes when that record is absent
// or not ok: a floor is never borrowed from another point.
inline void attach_same_run_floor(std::vector<Record>& records, std::string_view floor_metric,
                                  const std::string& floor_id, std::initializer_list<std::string_view> latencies) {
  const Record* floor = nullptr;
  for (const Record& r : records)
    if (r.metric == floor_metric && r.status == "ok" && r.stats) floor = &r;
  if (!floor) return;
  const double ns = floor->stats->p50;
  for (Record& r : records) {
    if (r.status != "ok") continue;
    for (std::string_view m : latencies) {
      if (r.metric != m) continue;
      r.floor = floor_id;
      r.floor_ns = ns;
    }
  }
}

}  // namespace gicomm::bench
