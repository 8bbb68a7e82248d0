// The one check header of the native tests (host and CUDA):
//   CHECK(cond[, "printf format", args...])    a failure is printed (file:line, the condition, the
//                                                message) and counted; the test goes on
//   REQUIRE(cond[, "printf format", args...])  the same, then the test exits 1 (later steps need it)
//   return check_result("test name");          exit code: 0 when nothing failed, else 1
//   CUDA(call)                                 (CUDA sources) a runtime call that must succeed:
//                                                else the call, its error and file:line, exit 1
// Only the first 20 failures are printed; all are counted. Thread-safe.
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace gicomm::test {

inline std::atomic<int>& failures() {
  static std::atomic<int> n{0};
  return n;
}

// `fmt` always starts with a space (the macros prepend one), so an absent message is " ".
__attribute__((format(printf, 4, 5))) inline void check_failed(const char* file, int line, const char* cond,
                                                              const char* fmt, ...) {
  if (failures().fetch_add(1) >= 20) return;
  std::fprintf(stderr, "%s:%d: CHECK failed: %s;", file, line, cond);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\n");
}

inline int check_result(const char* name) {
  const int n = failures().load();
  if (n) {
    std::fprintf(stderr, "%s: %d failure(s)\n", name, n);
    return 1;
  }
  std::printf("%s: ok\n", name);
  return 0;
}

}  // namespace gicomm::test

#define CHECK(cond, ...)                                                                \
  do {                                                                                  \
    if (!(cond)) ::gicomm::test::check_failed(__FILE__, __LINE__, #cond, " " __VA_ARGS__); \
  } while (0)

#define REQUIRE(cond, ...)                                                                \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      ::gicomm::test::check_failed(__FILE__, __LINE__, #cond, " " __VA_ARGS__);           \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

using gicomm::test::check_result;

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#define CUDA(x)                                                                                      \
  do {                                                                                               \
    cudaError_t e_ = (x);                                                                            \
    if (e_ != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "CUDA %s: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (0)
#endif
