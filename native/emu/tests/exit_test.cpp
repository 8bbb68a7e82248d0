// A program that leaves a context, a QP and posted work behind and returns from main (many
// programs do): it must exit cleanly, with the emulated NIC's engine stopped at exit.
#include <infiniband/verbs.h>

#include <cstdio>
#include <vector>

int main() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (n == 0) return 77;
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  std::vector<char> mem(4096);
  ibv_mr* mr = ibv_reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
  std::printf("exit_test: left open: context %p, QP %u, MR %x\n", static_cast<void*>(ctx), qp ? qp->qp_num : 0, mr ? mr->lkey : 0);
  return ctx && qp && mr ? 0 : 1;
}
