// gicomm-bench-gda: the timed single-op step shared by the one-op kernels (gda_one_op and Fig. 3).
#pragma once

#include "gicomm/gda/gda.cuh"

namespace gicomm::bench_gda {

// One signaled put and its quiet, timed in SM cycles from before the put: issue = until the put
// returns (WQE written, doorbell rung), complete = until quiet saw its CQE. Iteration i < 0 is
// warm-up and records nothing. False when the put or the quiet failed (the failure is in ctx).
template <class Order>
__device__ __forceinline__ bool timed_put_quiet(const gda::Context& ctx, gda::ThreadQp& tq, const gda::PutOp& op, int i,
                                                long long* issue, long long* complete) {
  const long long t0 = clock64();
  if (!tq.put<Order>(ctx, op, true)) return false;
  const long long t1 = clock64();
  if (!tq.quiet(ctx)) return false;
  const long long t2 = clock64();
  if (i >= 0) {
    issue[i] = t1 - t0;
    complete[i] = t2 - t0;
  }
  return true;
}

}  // namespace gicomm::bench_gda
