// A program that leaves a context, a QP and posted work behind and returns from main (many
// programs do): it must exit cleanly, with the emulated NIC's engine stopped at exit.
#include <infiniband/verbs.h>

#include <cstdio>
#include <vector>

#include "one_qp.h"

int main() {
  OneQp o;  // left open on purpose
  if (o.devices == 0) return 77;
  ibv_context* ctx = o.ctx;
  ibv_pd* pd = o.pd;
  ibv_qp* qp = o.qp;
  std::vector<char> mem(4096);
  ibv_mr* mr = ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
  std::printf("exit_test: left open: context %p, QP %u, MR %x\n", static_cast<void*>(ctx), qp ? qp->qp_num : 0, mr ? mr->lkey : 0);
  return ctx && qp && mr ? 0 : 1;
}
