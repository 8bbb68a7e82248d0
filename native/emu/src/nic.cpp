// The emulated NIC's tables, the QP state machine, and async events.
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "emu.h"

namespace gicomm::emu {

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: the engine thread may outlive static destructors
  return *r;
}

Nic& nic_for(uint32_t device_index) {
  Registry& reg = registry();
  const auto& specs = device_specs();
  if (reg.nics.size() < specs.size()) reg.nics.resize(specs.size());
  if (!reg.nics[device_index]) {
    reg.nics[device_index] = std::make_unique<Nic>(specs[device_index]);
    sysfs_view_open(specs[device_index]);
  }
  return *reg.nics[device_index];
}

Nic::Nic(const DeviceSpec& spec)
    : spec_(spec),
      mrs_(new softnic::MrEntry[kMaxMrs]()),
      info_(new MrInfo[kMaxMrs]()),
      qps_(new std::atomic<Qp*>[kMaxQps]) {
  for (uint32_t i = 0; i < kMaxQps; ++i) qps_[i].store(nullptr, std::memory_order_relaxed);
}

uint32_t Nic::add_mr(uint64_t va, uint64_t iova, uint64_t length, uint32_t access, uint32_t pdn, Loc loc) {
  const uint32_t index = num_mrs_;
  if (index >= kMaxMrs) return 0;
  // Key = index << 8 | an 8-bit tag that differs between emulated hosts (keys stay unique across
  // processes) and is never 0 (so no key equals MLX5_INVALID_LKEY, 0x100, the receive-list end).
  const uint32_t tag = (((index * 0x9du) + 0x5bu + spec_.node * 0x35u + spec_.index * 0x11u) & 0xffu) | 1u;
  const uint32_t key = (index << 8) | tag;
  info_[index] = MrInfo{pdn, loc, va};
  mrs_[index] = softnic::MrEntry{iova, length, key, access};
  __atomic_store_n(&num_mrs_, index + 1, __ATOMIC_RELEASE);  // publish after the entry
  return key;
}

void Nic::remove_mr(uint32_t key) {
  const uint32_t index = key >> 8;
  if (index < kMaxMrs && mrs_[index].key == key) __atomic_store_n(&mrs_[index].key, 0u, __ATOMIC_RELEASE);
}

void Nic::free_pdn(uint32_t pdn) {
  for (auto it = live_pdns_.begin(); it != live_pdns_.end(); ++it)
    if (*it == pdn) {
      live_pdns_.erase(it);
      return;
    }
}

bool Nic::pdn_live(uint32_t pdn) const {
  for (uint32_t p : live_pdns_)
    if (p == pdn) return true;
  return false;
}

softnic::Tables Nic::tables() const {
  softnic::Tables t;
  t.mrs = mrs_.get();
  t.num_mrs = __atomic_load_n(&num_mrs_, __ATOMIC_ACQUIRE);
  return t;
}

uint32_t Nic::add_qp(Qp* qp) {
  for (uint32_t tries = 0; tries < kMaxQps; ++tries) {
    const uint32_t slot = next_qp_slot_++ % kMaxQps;
    if (qps_[slot].load(std::memory_order_relaxed) == nullptr) {
      qp->qpn = kQpnBase + slot;
      qps_[slot].store(qp, std::memory_order_release);
      return qp->qpn;
    }
  }
  return 0;
}

void Nic::remove_qp(Qp* qp) {
  const uint32_t slot = qp->qpn - kQpnBase;
  if (slot < kMaxQps && qps_[slot].load() == qp) qps_[slot].store(nullptr, std::memory_order_release);
}

Qp* Nic::qp(uint32_t qpn) const {
  const uint32_t slot = qpn - kQpnBase;
  if (qpn < kQpnBase || slot >= kMaxQps) return nullptr;
  return qps_[slot].load(std::memory_order_acquire);
}

// ---- QP state machine ----------------------------------------------------------------------------
// The attribute rules of the kernel's ib_modify_qp_is_ok for RC QPs: per transition, the
// attributes that must be given and those that may be; anything else (or a transition the table
// does not allow) is EINVAL, as on hardware.
bool modify_qp_is_ok(int cur, int next, int mask, std::string* why) {
  static const char* names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  if (cur < IBV_QPS_RESET || cur > IBV_QPS_ERR || next < IBV_QPS_RESET || next > IBV_QPS_ERR) {
    *why = "QP state out of range";
    return false;
  }
  const std::string tr = std::string(names[cur]) + "->" + names[next];
  if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR && cur != IBV_QPS_RTS && cur != IBV_QPS_SQD &&
      cur != IBV_QPS_SQE) {
    *why = tr + ": IBV_QP_CUR_STATE is allowed only from RTR, RTS, SQD or SQE";
    return false;
  }
  bool valid = false;
  int req = 0, opt = 0;
  if (next == IBV_QPS_RESET || (next == IBV_QPS_ERR && cur != IBV_QPS_RESET)) {
    valid = true;  // to RESET from anywhere, to ERR from anywhere but RESET: the state alone
  } else if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
    valid = true;
    req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  } else if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) {
    valid = true;
    opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  } else if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
    valid = true;
    req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
          IBV_QP_MIN_RNR_TIMER;
    opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
  } else if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
    valid = true;
    req = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
    opt = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;
  } else if ((cur == IBV_QPS_RTS || cur == IBV_QPS_SQD) && next == IBV_QPS_RTS) {
    valid = true;
    opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER;
  } else if (cur == IBV_QPS_RTS && next == IBV_QPS_SQD) {
    valid = true;
    opt = IBV_QP_EN_SQD_ASYNC_NOTIFY;
  } else if (cur == IBV_QPS_SQD && next == IBV_QPS_SQD) {
    valid = true;
    opt = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
          IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;
  }
  if (!valid) {
    *why = tr + " is not a valid RC QP transition";
    return false;
  }
  if ((mask & req) != req) {
    *why = tr + " requires attribute mask " + hex(req) + ", missing " + hex(req & ~mask);
    return false;
  }
  if (mask & ~(req | opt | IBV_QP_STATE)) {
    *why = tr + " does not accept attribute mask bits " + hex(mask & ~(req | opt | IBV_QP_STATE)) +
           " (required " + hex(req) + ", optional " + hex(opt) + ")";
    return false;
  }
  return true;
}

bool modify_dct_is_ok(int cur, int next, int mask, std::string* why) {
  static const char* names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  if (cur < IBV_QPS_RESET || cur > IBV_QPS_ERR || next < IBV_QPS_RESET || next > IBV_QPS_ERR) {
    *why = "QP state out of range";
    return false;
  }
  const std::string tr = std::string("DCT ") + names[cur] + "->" + names[next];
  int req = 0;
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
    req = 0;
  } else if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
    req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  } else if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
    req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_MIN_RNR_TIMER;
  } else {
    *why = tr + " is not a DC target transition (RESET->INIT->RTR, or to RESET/ERR)";
    return false;
  }
  if ((mask & req) != req) {
    *why = tr + " requires attribute mask " + hex(req) + ", missing " + hex(req & ~mask);
    return false;
  }
  if (mask & ~(req | IBV_QP_STATE)) {
    *why = tr + " does not accept attribute mask bits " + hex(mask & ~(req | IBV_QP_STATE)) + " (required " + hex(req) + ")";
    return false;
  }
  return true;
}

Srq* find_srq(const Nic* nic, uint32_t srqn) {
  for (Srq* s : registry().srqs)
    if (s->nic == nic && s->srqn == srqn) return s;
  return nullptr;
}

void qp_set_state(Qp& qp, int state) {
  if (state == IBV_QPS_RESET || state == IBV_QPS_ERR) abandon_requests(qp, state == IBV_QPS_ERR);
  if (state == IBV_QPS_RESET) {
    // The device forgets the queues' progress; the provider restarts its indices (mlx5 does the same).
    qp.ci = 0;
    qp.has_rung = false;
    qp.rung_to = 0;
    qp.last_doorbell = 0;
    qp.rq_ci = 0;
    qp.blocked = qp.retrying = qp.rnr_waiting = false;
    if (qp.kind == QpKind::verbs) {
      std::lock_guard<std::mutex> lock(qp.post_mu);
      qp.sq_head = qp.sq_tail = qp.rq_head = qp.rq_tail = 0;
      __atomic_store_n(&qp.private_doorbell, 0ull, __ATOMIC_RELEASE);
      if (qp.sq.dbrec != nullptr) {
        qp.sq.dbrec[0] = 0;
        qp.sq.dbrec[1] = 0;
      }
    }
  }
  qp.state.store(state, std::memory_order_release);
}

// ---- async events --------------------------------------------------------------------------------
void post_async_event(Context* ctx, const ibv_async_event& ev) {
  if (ctx == nullptr || ctx->async_pipe[1] < 0) return;
  // One fixed-size record per event; the pipe keeps them in order (writes below PIPE_BUF are atomic).
  const ssize_t n = write(ctx->async_pipe[1], &ev, sizeof ev);
  if (n != static_cast<ssize_t>(sizeof ev))
    fail(EAGAIN, "async event", ctx->nic->spec().name, "event queue full; event " + std::to_string(ev.event_type) + " lost");
}

}  // namespace gicomm::emu
