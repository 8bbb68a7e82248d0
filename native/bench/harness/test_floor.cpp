// The same-run floor on a transport's records (floor.h): the latencies named get the floor's id
// and p50 from the same list; other metrics, failed records, or a list whose floor record failed
// get nothing (a floor is never borrowed); the record's JSON carries both fields, only when set.
#include "check.h"
#include "harness/floor.h"
#include "harness/harness.h"

using namespace gicomm::bench;

int main() {
  std::vector<Record> recs = {Record::ok("issue_ns", "ns", compute_stats({700, 710, 720})),
                              Record::ok("completion_ns", "ns", compute_stats({4000})),
                              Record::ok("floor_issue_ns", "ns", compute_stats({300, 310, 320})),
                              Record::failed("issue_ns", "ns", "a failed twin")};
  attach_same_run_floor(recs, "floor_issue_ns", "wqe_doorbell_same_point", {"issue_ns"});
  CHECK(recs[0].floor == "wqe_doorbell_same_point" && recs[0].floor_ns == 310.0, "issue_ns got the floor");
  CHECK(recs[1].floor.empty() && !recs[1].floor_ns, "completion_ns stands on another floor");
  CHECK(recs[2].floor.empty() && recs[3].floor.empty(), "neither the floor itself nor a failed record");

  std::vector<Record> no_floor = {Record::ok("issue_ns", "ns", compute_stats({700})),
                                  Record::failed("floor_issue_ns", "ns", "the floor kernel timed out")};
  attach_same_run_floor(no_floor, "floor_issue_ns", "wqe_doorbell_same_point", {"issue_ns"});
  CHECK(no_floor[0].floor.empty() && !no_floor[0].floor_ns, "no floor measured: none attached");

  Options o;
  Point p;
  const Json with = Json::parse(record_to_json(recs[0], o, DriverInfo{}, p));
  CHECK(with["floor"] == "wqe_doorbell_same_point" && with["floor_ns"] == 310.0, "%s", with.dump().c_str());
  const Json without = Json::parse(record_to_json(recs[1], o, DriverInfo{}, p));
  CHECK(!without.contains("floor") && !without.contains("floor_ns"), "%s", without.dump().c_str());
  return gicomm::test::check_result("test_bench_floor");
}
