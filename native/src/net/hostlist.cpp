// Slurm host and task list expansion (see gicomm/net/hostlist.h).
#include "gicomm/net/hostlist.h"

#include <cctype>
#include <cstdlib>

namespace gicomm::net {
namespace {

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string pad(unsigned long long v, size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// "01-03,7" -> 01 02 03 7
bool expand_ranges(const std::string& body, const std::string& whole, std::vector<std::string>* out,
                   std::string* error) {
  size_t start = 0;
  while (start <= body.size()) {
    const size_t comma = body.find(',', start);
    const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 18 || hi.size() > 18) {
      *error = "hostlist '" + whole + "': range '" + item + "' is not N or N-M with decimal numbers";
      return false;
    }
    const unsigned long long a = std::strtoull(lo.c_str(), nullptr, 10);
    const unsigned long long b = std::strtoull(hi.c_str(), nullptr, 10);
    if (b < a) {
      *error = "hostlist '" + whole + "': range '" + item + "' runs backwards";
      return false;
    }
    if (b - a >= kMaxHosts || out->size() + (b - a) >= kMaxHosts) {
      *error = "hostlist '" + whole + "': more than " + std::to_string(kMaxHosts) + " hosts";
      return false;
    }
    for (unsigned long long v = a; v <= b; ++v) out->push_back(pad(v, lo.size()));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

// One top-level item: a name with zero or more bracket groups.
bool expand_item(const std::string& item, const std::string& whole, std::vector<std::string>* hosts,
                 std::string* error) {
  std::vector<std::string> partial{""};
  size_t i = 0;
  while (i < item.size()) {
    const size_t open = item.find('[', i);
    const std::string literal = item.substr(i, open == std::string::npos ? std::string::npos : open - i);
    if (literal.find(']') != std::string::npos) {
      *error = "hostlist '" + whole + "': unmatched ']' in '" + item + "'";
      return false;
    }
    for (auto& p : partial) p += literal;
    if (open == std::string::npos) break;
    const size_t close = item.find(']', open);
    if (close == std::string::npos) {
      *error = "hostlist '" + whole + "': unmatched '[' in '" + item + "'";
      return false;
    }
    std::vector<std::string> values;
    if (!expand_ranges(item.substr(open + 1, close - open - 1), whole, &values, error)) return false;
    if (partial.size() * values.size() > kMaxHosts) {
      *error = "hostlist '" + whole + "': more than " + std::to_string(kMaxHosts) + " hosts";
      return false;
    }
    std::vector<std::string> next;
    next.reserve(partial.size() * values.size());
    for (const auto& p : partial)
      for (const auto& v : values) next.push_back(p + v);
    partial.swap(next);
    i = close + 1;
  }
  if (partial.size() == 1 && partial[0].empty()) {
    *error = "hostlist '" + whole + "': empty host name";
    return false;
  }
  hosts->insert(hosts->end(), partial.begin(), partial.end());
  return true;
}

}  // namespace

bool expand_hostlist(const std::string& list, std::vector<std::string>* hosts, std::string* error) {
  hosts->clear();
  if (list.empty()) {
    *error = "hostlist is empty";
    return false;
  }
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) {
      *error = "hostlist '" + list + "': brackets do not pair up";
      return false;
    }
    if (c == ',' && depth == 0) {
      if (!expand_item(list.substr(start, i - start), list, hosts, error)) return false;
      if (hosts->size() > kMaxHosts) {
        *error = "hostlist '" + list + "': more than " + std::to_string(kMaxHosts) + " hosts";
        return false;
      }
      start = i + 1;
    }
  }
  if (depth != 0) {
    *error = "hostlist '" + list + "': unmatched '['";
    return false;
  }
  return true;
}

bool expand_tasks_per_node(const std::string& spec, std::vector<int>* counts, std::string* error) {
  counts->clear();
  size_t start = 0;
  while (true) {
    const size_t comma = spec.find(',', start);
    const std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t paren = item.find("(x");
    const std::string n = item.substr(0, paren);
    std::string reps = "1";
    if (paren != std::string::npos) {
      if (item.back() != ')') {
        *error = "tasks per node '" + spec + "': '" + item + "' is not N or N(xM)";
        return false;
      }
      reps = item.substr(paren + 2, item.size() - paren - 3);
    }
    if (!all_digits(n) || !all_digits(reps) || n.size() > 6 || reps.size() > 6) {
      *error = "tasks per node '" + spec + "': '" + item + "' is not N or N(xM)";
      return false;
    }
    const long r = std::strtol(reps.c_str(), nullptr, 10);
    if (counts->size() + static_cast<size_t>(r) > kMaxHosts) {
      *error = "tasks per node '" + spec + "': more than " + std::to_string(kMaxHosts) + " nodes";
      return false;
    }
    counts->insert(counts->end(), static_cast<size_t>(r), static_cast<int>(std::strtol(n.c_str(), nullptr, 10)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

}  // namespace gicomm::net
