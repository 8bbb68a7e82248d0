#include "gicomm/gda/hybrid.h"

#include "gicomm/mlx5/doorbell.h"

namespace gicomm::gda {

void HybridRinger::start() {
  stop_.store(false);
  thread_ = std::thread([this] {
    std::vector<uint16_t> last(sqs_.size(), 0);
    uint32_t idle = 0;
    while (!stop_.load(std::memory_order_relaxed)) {
      bool rang = false;
      for (size_t i = 0; i < sqs_.size(); ++i) {
        const mlx5::SqDesc& sq = sqs_[i];
        const uint32_t word = __atomic_load_n(&sq.dbrec[mlx5::kSndDbr], __ATOMIC_ACQUIRE);
        const uint16_t pi = mlx5::sq_dbrec_pi(word);
        if (pi == last[i]) continue;
        last[i] = pi;
        // The doorbell names the last WQEBB published; the NIC executes every WQE up to it.
        const uint64_t db = mlx5::doorbell_value(static_cast<uint16_t>(pi - 1), sq.qpn, mlx5::kOpcodeRdmaWrite, 3);
        __atomic_store_n(sq.doorbell, db, __ATOMIC_RELEASE);
        rings_.fetch_add(1, std::memory_order_relaxed);
        rang = true;
      }
      // Stay hot while doorbells keep coming; give the core up after a long quiet stretch (CI
      // machines have two cores shared with the engine and the producers).
      if (rang) {
        idle = 0;
      } else if (++idle > 4096) {
        std::this_thread::yield();
      }
    }
  });
}

void HybridRinger::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

}  // namespace gicomm::gda
