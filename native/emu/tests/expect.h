// EXPECT: a check that counts its failures and goes on, so a test reports every failed check
// (with where, what and why) before it exits non-zero. expect_label() names what is being checked
// (a case, a device) in each report.
#pragma once

#include <cstdio>
#include <string>

inline int& expect_failures() {
  static int n = 0;
  return n;
}
inline std::string& expect_label() {
  static std::string label;
  return label;
}

#define EXPECT(cond, ...)                                                                             \
  do {                                                                                                \
    if (!(cond)) {                                                                                    \
      ++expect_failures();                                                                            \
      std::fprintf(stderr, "FAIL [%s] %s:%d: %s: ", expect_label().c_str(), __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                              \
      std::fprintf(stderr, "\n");                                                                     \
    }                                                                                                 \
  } while (0)
