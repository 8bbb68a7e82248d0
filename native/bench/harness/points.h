// Sweep points: the points file a driver reads, one JSON object per line,
//   {"point_id": "...", "transport": "mini-gda", "nic_backend": "softnic-gpu", "params": {...}}
// (transport and nic_backend absent when the experiment's declared default applies), or the one
// point of a hand run (--param, --transport, --nic-backend).
#pragma once

#include <string>
#include <vector>

#include "harness/options.h"
#include "harness/params.h"

namespace gicomm::bench {

struct Point {
  std::string point_id;
  std::string transport, nic_backend;  // names as given ("" when the point names none)
  Params params;                       // never transport or nic_backend
};

// Throws std::runtime_error naming the file, the line and what is wrong (malformed JSON, text that
// is not UTF-8 with the key it is in, a value that is not a scalar). A line in the shape of the
// first points files (transport and nic_backend inside params) is read the same way.
std::vector<Point> load_points(const Options& o);
// The point as a points-file line (no newline).
std::string point_to_json(const Point& p);
// A stable id for a point without one (hand use): experiment and every parameter, order-free.
std::string point_id_of(const std::string& experiment, const Point& p);

}  // namespace gicomm::bench
