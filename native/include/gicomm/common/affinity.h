// Pinning a thread to one cpu, for the proxy's workers and the softnic's cpu engine alike (the
// softnic library sits below the proxy library, so the helper lives here, under both).
#pragma once

#include <pthread.h>
#include <sched.h>

#include <cerrno>

namespace gicomm {

// Runs `thread` on `cpu` only. Returns 0, or the error pthread_setaffinity_np returned (EINVAL for
// a cpu outside the machine or the process's allowed set); a cpu outside what cpu_set_t holds is
// EINVAL too, without touching the set.
inline int pin_thread(pthread_t thread, int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return EINVAL;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(thread, sizeof(set), &set);
}

}  // namespace gicomm
