// The smallest verbs set-up the single-process tests need: the first device, a PD, a CQ and one RC
// QP (RESET state) on it. ok() is false when any of them could not be made.
#pragma once

#include <infiniband/verbs.h>

struct OneQp {
  ibv_device** list = nullptr;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  int devices = 0;

  OneQp() {
    list = ibv_get_device_list(&devices);
    if (devices == 0) return;
    ctx = ibv_open_device(list[0]);
    if (ctx == nullptr) return;
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    if (pd == nullptr || cq == nullptr) return;
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    qp = ibv_create_qp(pd, &ia);
  }
  bool ok() const { return qp != nullptr; }
};
