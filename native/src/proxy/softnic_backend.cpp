// mini-proxy softnic backend (see gicomm/proxy/softnic_backend.h).
#include "gicomm/proxy/softnic_backend.h"

#include <deque>

#include "gicomm/mlx5/host_post.h"
#include "gicomm/mlx5/wqe.h"

namespace gicomm {
namespace proxy {

namespace {

class SoftnicChannel : public Channel {
 public:
  SoftnicChannel(softnic::SoftNic& nic, uint32_t qp, const SoftnicTarget& t)
      : qp_(qp), t_(t), sq_(nic.sq(qp)), cq_(nic.cq(qp)), depth_(nic.sq(qp).wqe_cnt) {}

  uint32_t room() const override { return depth_ - outstanding_; }

  bool post(const Desc* d, uint32_t n, std::string* error) override {
    for (uint32_t k = 0; k < n; ++k) {
      // Selective signaling: only the chain's last WQE asks for a CQE; it retires the others.
      const mlx5::WqeHeader h = sq_.header(k + 1 == n);
      mlx5::WqeImage img;
      uint32_t ds = 0;
      const uint64_t raddr = t_.remote_addr + 8ull * info_slot(d[k].info);
      switch (info_op(d[k].info)) {
        case Op::write_inline:
          ds = mlx5::build_rdma_write_inline_u64(img, h, raddr, t_.rkey, d[k].value);
          break;
        case Op::write:
          ds = mlx5::build_rdma_write(img, h, raddr, t_.rkey,
                                      t_.local_addr + (d[k].value & ((1ull << 40) - 1)), t_.lkey,
                                      static_cast<uint32_t>(d[k].value >> 40));
          break;
        case Op::nop:
          ds = mlx5::build_nop(img, h);
          break;
        default:
          *error = "descriptor with unknown op " + std::to_string(static_cast<uint32_t>(info_op(d[k].info)));
          return false;
      }
      last_index_ = static_cast<uint16_t>(sq_.push(img, ds));
    }
    sq_.ring();  // one doorbell for the whole chain
    chains_.push_back({last_index_, n});
    outstanding_ += n;
    return true;
  }

  int64_t poll(std::string* error) override {
    int64_t retired = 0;
    mlx5::CqeFields f;
    while (cq_.poll(&f)) {
      if (f.opcode != mlx5::kCqeReq) {
        *error = "softnic qp " + std::to_string(qp_) + ": error CQE opcode " + std::to_string(f.opcode) +
                 " syndrome 0x" + hex(f.syndrome) + " at wqe " + std::to_string(f.wqe_counter);
        return -1;
      }
      // The CQE names the signaled WQE that ended a chain; chains complete in order.
      while (!chains_.empty()) {
        const Chain c = chains_.front();
        chains_.pop_front();
        retired += c.count;
        outstanding_ -= c.count;
        if (c.last == f.wqe_counter) break;
      }
    }
    return retired;
  }

 private:
  struct Chain {
    uint16_t last;   // WQE index of the chain's signaled WQE
    uint32_t count;  // descriptors in the chain
  };
  static std::string hex(uint8_t v) {
    const char* d = "0123456789abcdef";
    return std::string{d[v >> 4], d[v & 15]};
  }
  uint32_t qp_;
  SoftnicTarget t_;
  mlx5::HostSq sq_;
  mlx5::HostCq cq_;
  uint32_t depth_;
  uint32_t outstanding_ = 0;
  uint16_t last_index_ = 0;
  std::deque<Chain> chains_;
};

class SoftnicBackend : public Backend {
 public:
  SoftnicBackend(softnic::SoftNic& nic, const SoftnicTarget& t) : nic_(nic), t_(t) {}
  const char* name() const override { return "softnic-cpu"; }
  std::unique_ptr<Channel> open(uint32_t, std::string* error) override {
    softnic::QueueConfig qc;
    qc.sq_wqebbs = t_.sq_wqebbs;
    qc.cq_entries = t_.sq_wqebbs;  // at most one CQE per outstanding WQE
    try {
      const uint32_t qp = nic_.create_qp(qc);
      return std::unique_ptr<Channel>(new SoftnicChannel(nic_, qp, t_));
    } catch (const std::exception& e) {
      *error = std::string("softnic: cannot create QP: ") + e.what();
      return nullptr;
    }
  }

 private:
  softnic::SoftNic& nic_;
  SoftnicTarget t_;
};

}  // namespace

std::unique_ptr<Backend> make_softnic_backend(softnic::SoftNic& nic, const SoftnicTarget& target) {
  return std::unique_ptr<Backend>(new SoftnicBackend(nic, target));
}

}  // namespace proxy
}  // namespace gicomm
