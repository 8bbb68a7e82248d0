// The emulated rdma-core: internal interfaces shared by libibverbs.so.1 (which holds the emulated
// NIC: devices, objects, the engine) and libmlx5.so.1 (the mlx5dv/DEVX surface, a thin layer that
// calls into it). Nothing here is part of the public rdma-core API; the symbols are exported under
// the private version node GICOMM_EMU_PRIVATE so only our libmlx5 binds to them.
//
// Model (docs/emulated-rdma-core.md has the long form):
//   - Every queue is a real mlx5 queue: send WQEs in the mlx5 format (the verbs provider builds them
//     with the same encoders as mini-gda), CQEs in the mlx5 format with owner bits, doorbell records
//     and doorbells. DEVX callers place the queues themselves (umems); verbs callers get host memory.
//   - One engine thread per process serves every emulated device of the process: it watches
//     doorbells, executes WQEs with the softnic core (gicomm/softnic/core.h: decode, key checks,
//     CQE encoding), writes CQEs where the CQ lives, and drives the responder side of the connected
//     QP: a QP of an emulated device of this process directly, a QP of another process (another
//     emulated host) through the wire (wire.h), where that process's engine performs the responder
//     half on its own memory. A destination nobody answers for fails the way a real fabric does:
//     transport retries, then RETRY_EXC_ERR.
//   - Memory the engine touches is host memory (loads/stores) or CUDA device memory (copies on a
//     non-blocking stream through the CUDA driver API, loaded with dlopen only when the process has
//     it), as classified when it was registered.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gicomm/mlx5/cqe.h"
#include "gicomm/mlx5/queue.h"
#include "gicomm/softnic/core.h"

#define GICOMM_EMU_API __attribute__((visibility("default")))

namespace gicomm::emu {

using Clock = std::chrono::steady_clock;

// ---- errors -------------------------------------------------------------------------------------
// Every failure names the call, the object and the reason on stderr ("gicomm-emu: <call>: <object>:
// <reason>", unless GICOMM_EMU_LOG=quiet), sets errno, and returns `err`.
GICOMM_EMU_API int fail(int err, const char* call, const std::string& object, const std::string& reason);
GICOMM_EMU_API void note(const std::string& line);  // informational line (GICOMM_EMU_LOG=verbose)
GICOMM_EMU_API void warn(const std::string& line);  // a problem that is not a call's failure (unless quiet)
// Data-path events (doorbells, WQEs issued and completed, wire requests served): the first
// GICOMM_EMU_TRACE of them are printed. tracing() says whether the next one would be, so callers
// build the line only then.
bool tracing();
void trace(const std::string& line);
GICOMM_EMU_API std::string hex(uint64_t v);

// ---- devices ------------------------------------------------------------------------------------
struct GidEntry {
  ibv_gid gid;
  uint32_t type;  // enum ibv_gid_type
};

struct DeviceSpec {
  std::string name;   // mlx5_<n>
  uint32_t index = 0; // position in the device list
  uint32_t node = 0;  // this process's emulated host (GICOMM_EMU_NODE, default from the pid)
  bool roce = false;  // link layer Ethernet (RoCE) or InfiniBand
  uint64_t guid = 0;  // node and port GUID (host order)
  uint16_t lid = 0;   // InfiniBand only (0 on RoCE)
  std::vector<GidEntry> gids;
};

// The emulated devices, from GICOMM_EMU_DEVICES ("mlx5_0:ib,mlx5_1:roce" by default; "" for none).
const std::vector<DeviceSpec>& device_specs();
// Why the device list is what it is (bad GICOMM_EMU_DEVICES entries are reported here, once).
const std::string& device_spec_error();
// This process's emulated host number (GICOMM_EMU_NODE, claimed on the wire).
uint32_t this_node();
// The emulated host and device index an address belongs to: a LID, the link-local GID of an
// emulated GUID, or the emulated IPv4-mapped RoCE GID. False for an address no emulated device has.
bool node_of_address(bool is_global, const uint8_t* gid, uint16_t lid, uint32_t* node, uint32_t* index);
// True when the device answers for the address (its LID, or one of its GIDs).
bool spec_matches(const DeviceSpec& spec, bool is_global, const uint8_t* gid, uint16_t lid);

// ---- memory -------------------------------------------------------------------------------------
enum class Place : uint8_t { host, device };
struct Loc {
  Place place = Place::host;
  int device = -1;  // CUDA device ordinal (Place::device)
  bool is_device() const { return place == Place::device; }
};

// A run of bytes the engine reads or writes, and where they are.
struct Span {
  uint8_t* ptr = nullptr;
  Loc loc;
  uint64_t len = 0;
};
// Copies the bytes of `src` spans into `dst` spans, in order (equal totals, or dst shorter).
void copy_spans(const std::vector<Span>& dst, const std::vector<Span>& src);

// Classifies [p, p + n): CUDA device memory (only when libcuda.so.1 is already loaded in this
// process), else host memory that must be mapped. False with a reason when neither.
bool classify(const void* p, size_t n, Loc* out, std::string* why);

// Engine-side access. Host locations are plain loads/stores; device locations go through copies on
// a non-blocking stream of the owning device (they proceed while the application's kernels run).
void mem_read(void* dst_host, const void* src, size_t n, Loc src_loc);
void mem_write(void* dst, const void* src_host, size_t n, Loc dst_loc);
void mem_copy(void* dst, Loc dst_loc, const void* src, Loc src_loc, size_t n);
// A 4- or 8-byte atomic (softnic::AtomicOp: compare-swap or fetch-add, masked or not, host byte
// order) at p; returns the old value. Atomic with respect to other NIC atomics (and, in host
// memory, to CPU atomics).
uint64_t mem_atomic(void* p, Loc loc, const softnic::AtomicOp& op);
uint32_t mem_load32(const uint32_t* p, Loc loc);
uint64_t mem_load64(const uint64_t* p, Loc loc);
// The last device error the memory layer saw ("" when none), for the engine's error reports.
std::string mem_last_error();

// ---- objects ------------------------------------------------------------------------------------
class Nic;
struct Context;
struct Qp;
struct Srq;

struct Umem {
  uint32_t id = 0;
  uint8_t* addr = nullptr;
  size_t size = 0;
  Loc loc;
  Context* owner = nullptr;
};

// A doorbell page. DEVX callers get one per mlx5dv_devx_alloc_uar; its doorbell registers (offset
// 0x800 and 0x900, the two BlueFlame registers) are what the engine watches. Every verbs QP rings a
// private register instead (lossless: no other QP overwrites it).
struct Uar {
  uint32_t page_id = 0;
  uint8_t* page = nullptr;  // 4 KiB, host memory (the application may map it into a GPU)
  Context* owner = nullptr;
  uint64_t last[2] = {0, 0};
  std::vector<Qp*> qps;
};

struct Cq {
  Nic* nic = nullptr;
  Context* ctx = nullptr;
  uint32_t cqn = 0;
  Loc loc;
  mlx5::Cqe64* buf = nullptr;
  uint32_t cqe_cnt = 0;        // power of two
  bool collapsed = false;      // cc=1: every CQE into entry 0
  bool overrun_ignore = false; // oi=1: no overflow check
  uint32_t* dbrec = nullptr;   // [0] BE consumer index (24 bits), [1] arm
  uint32_t refs = 0;           // QPs using it
  // engine
  uint32_t pi = 0;
  bool overrun = false;
  // verbs provider
  ibv_cq* ibv = nullptr;
  std::mutex poll_mu;
  uint32_t ci = 0;
  std::atomic<int> armed{0};   // 0: not armed, 1: next completion, 2: solicited only
  int notify_fd = -1;          // completion channel (write end): the engine writes the ibv_cq* there
  void* owned_mem = nullptr;   // provider allocations (verbs CQs)
};

enum class QpKind : uint8_t { verbs, devx };
// Transport service: reliable connection, DC initiator (every WQE names its target DCT in an
// address vector), DC target (answers any DCI that presents its access key).
enum class QpType : uint8_t { rc, dci, dct };

// A shared receive queue: a ring of receive WQEs (data segments, as a QP's receive queue holds
// them) that the QPs attached to it consume in order. Not mlx5's linked-list SRQ format: only this
// provider posts to it.
struct Srq {
  Nic* nic = nullptr;
  Context* ctx = nullptr;
  uint32_t srqn = 0;
  uint32_t pdn = 0;
  uint8_t* buf = nullptr;
  uint32_t wqe_cnt = 0, stride = 0;  // power-of-two ring of `stride`-byte WQEs
  uint32_t* dbrec = nullptr;         // [0]: producer counter (host order, 32 bits)
  uint32_t refs = 0;                 // QPs attached
  uint32_t limit = 0;                // srq_limit (armed; no limit event is raised)
  uint32_t max_sge = 0;
  // engine
  uint32_t ci = 0;
  // provider
  ibv_srq* ibv = nullptr;
  std::mutex post_mu;
  uint32_t head = 0;
  std::atomic<uint32_t> tail{0};
  std::vector<uint64_t> wrid;
  void* owned_mem = nullptr;
};

// One request on the wire (or delivered in this process) that has not completed yet. Requests of
// a QP complete in the order they were issued.
struct InFlight {
  uint64_t seq = 0;            // the engine's request number (the wire tag)
  uint32_t ci = 0;             // the WQE's first WQEBB (unwrapped) and its size
  uint32_t nbb = 0;
  uint16_t index = 0;
  uint8_t opcode = 0;
  bool signaled = false;
  uint32_t psn = 0, npsn = 0;
  uint64_t length = 0;
  uint8_t atomic_bytes = 0;    // 4 or 8 for an atomic
  std::vector<Span> scatter;   // read / atomic result destination
  Clock::time_point sent{};
  bool done = false;           // the outcome below is valid
  bool data_placed = false;    // a read's data already landed (local delivery)
  uint8_t kind = 0;            // wire::ReplyKind
  uint8_t syndrome = 0;
  uint8_t rnr_timer = 0;
  uint64_t atomic_old = 0;
  std::vector<uint8_t> data;   // a remote read's response
  std::string peer;            // who answered (error reports)
};

struct Qp {
  Nic* nic = nullptr;
  Context* ctx = nullptr;
  uint32_t qpn = 0;
  QpKind kind = QpKind::verbs;
  QpType type = QpType::rc;
  bool dci = false;              // type == dci (the decoder's flag)
  uint64_t dc_key = 0;           // DCT: the access key a DCI must present
  Srq* srq = nullptr;            // receives come from this SRQ instead of a receive queue
  std::atomic<int> state{IBV_QPS_RESET};  // enum ibv_qp_state
  // attributes (verbs semantics; DEVX commands set the same ones)
  uint32_t pdn = 0;
  uint8_t port = 0;
  uint16_t pkey_index = 0;
  uint32_t access = 0;  // IBV_ACCESS_REMOTE_* the responder grants
  uint8_t path_mtu = 0;
  uint32_t dest_qpn = 0;
  uint32_t rq_psn = 0, sq_psn = 0;
  uint8_t timeout = 0, retry_cnt = 0, rnr_retry = 0, min_rnr_timer = 0;
  uint8_t max_rd_atomic = 0, max_dest_rd_atomic = 0;
  ibv_ah_attr ah{};
  bool sq_sig_all = false;
  // queues, where their producer put them
  mlx5::SqDesc sq;
  Loc sq_loc, dbrec_loc;
  uint8_t* rq_buf = nullptr;
  uint32_t rq_wqe_cnt = 0, rq_stride = 0;
  Loc rq_loc;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Uar* uar = nullptr;            // DEVX: the doorbell page; verbs: none (private register)
  uint64_t private_doorbell = 0; // verbs: the register post_send rings
  // engine state (engine thread; reset with the QP)
  uint32_t ci = 0;               // next WQEBB to execute (unwrapped)
  bool has_rung = false;
  uint16_t rung_to = 0;          // last WQE (first WQEBB) a doorbell asked for
  uint64_t last_doorbell = 0;
  uint32_t rq_ci = 0;            // next receive WQE to consume (unwrapped)
  bool blocked = false;          // waiting for an RNR or transport retry timer
  Clock::time_point blocked_until{};
  uint32_t retries_left = 0, rnr_left = 0;
  bool retrying = false, rnr_waiting = false;
  std::deque<InFlight> inflight; // issued, not yet completed (oldest first)
  uint32_t epoch = 0;            // bumped when the in-flight requests are abandoned (go back, reset)
  Clock::time_point last_reply{};  // when the peer last answered one of them
  // verbs provider state
  ibv_qp* ibv = nullptr;
  std::mutex post_mu;
  uint32_t sq_head = 0;          // next WQEBB (unwrapped)
  uint32_t sq_tail = 0;          // first WQEBB not known complete
  uint32_t sq_wqe_bytes = 0;     // WQE size budget (64-byte multiple)
  uint32_t max_send_wr = 0, max_recv_wr = 0, max_send_sge = 0, max_recv_sge = 0, max_inline = 0;
  std::vector<uint64_t> sq_wrid;
  std::vector<uint32_t> sq_wqe_head;  // per WQEBB: sq_head value after the WQE that starts there
  uint32_t rq_head = 0, rq_tail = 0;
  std::vector<uint64_t> rq_wrid;
  void* owned_mem = nullptr;          // provider allocation (verbs QPs): SQ, RQ, dbrec
};

// Traffic counters of the device's port (as the kernel's port counters count them: packets and
// 4-byte data words, both directions), read by the sysfs view (counters.cpp).
struct PortCounters {
  std::atomic<uint64_t> xmit_packets{0}, rcv_packets{0}, xmit_words{0}, rcv_words{0};
  bool dirty = false;  // moved since the sysfs view last wrote them (engine thread)
};

// The sysfs-like view of GICOMM_EMU_SYSFS_DIR (sysfs_view.cpp; nothing when unset): a device's
// files, written when it is first opened, and its port counters, rewritten as traffic moves.
void sysfs_view_open(const DeviceSpec& spec);
void sysfs_view_counters(Nic& nic);

// Memory region bookkeeping beside the softnic key table (softnic::MrEntry holds key, iova base,
// length and access): the PD, where the memory is, and the virtual address of the iova base.
struct MrInfo {
  uint32_t pdn = 0;
  Loc loc;
  uint64_t va = 0;
};

// One emulated device (shared by every context opened on it in this process).
class Nic {
 public:
  static constexpr uint32_t kMaxMrs = 1u << 16;
  static constexpr uint32_t kQpnBase = 0x100;
  static constexpr uint32_t kMaxQps = 1u << 14;
  explicit Nic(const DeviceSpec& spec);
  const DeviceSpec& spec() const { return spec_; }

  // Control path (callers hold registry().mu).
  uint32_t alloc_pdn() {
    live_pdns_.push_back(next_pdn_);
    return next_pdn_++;
  }
  void free_pdn(uint32_t pdn);
  bool pdn_live(uint32_t pdn) const;
  uint32_t alloc_cqn() { return next_cqn_++; }
  uint32_t alloc_srqn() { return next_srqn_++; }
  // Registers [va, va+length) as iova..iova+length; returns the key (lkey == rkey) or 0 when full.
  uint32_t add_mr(uint64_t va, uint64_t iova, uint64_t length, uint32_t access, uint32_t pdn, Loc loc);
  void remove_mr(uint32_t key);
  uint32_t add_qp(Qp* qp);  // assigns the QP number; 0 when the table is full
  void remove_qp(Qp* qp);

  // Engine path (lock-free reads of append-only tables).
  softnic::Tables tables() const;
  const MrInfo& mr_info(uint32_t key) const { return info_[key >> 8]; }
  Qp* qp(uint32_t qpn) const;
  uint64_t va_of(const softnic::MrEntry& e, uint64_t iova) const { return info_[e.key >> 8].va + (iova - e.addr); }
  PortCounters& counters() { return counters_; }

 private:
  DeviceSpec spec_;
  std::unique_ptr<softnic::MrEntry[]> mrs_;
  std::unique_ptr<MrInfo[]> info_;
  uint32_t num_mrs_ = 0;  // published with release stores
  std::unique_ptr<std::atomic<Qp*>[]> qps_;
  uint32_t next_qp_slot_ = 0;
  uint32_t next_pdn_ = 1, next_cqn_ = 0x400, next_srqn_ = 0x40;
  std::vector<uint32_t> live_pdns_;
  PortCounters counters_;
};

// One ibv_context of ours. The public struct is embedded (verbs_context ends with ibv_context).
struct Context {
  Nic* nic = nullptr;
  ibv_context* ibv = nullptr;
  int async_pipe[2] = {-1, -1};
  std::vector<Umem*> umems;
  std::vector<Uar*> uars;
};

struct DevxObj;  // devx_cmd.cpp

// The process-wide registry: devices, every object, the control-path lock, the engine thread.
struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<Nic>> nics;  // one per device spec, created on first open
  std::vector<Qp*> qps;                    // every QP, in creation order
  std::vector<Cq*> cqs;
  std::vector<Srq*> srqs;
  std::vector<Uar*> uars;
  uint32_t next_umem_id = 1, next_uar_page = 0x10;
  int open_contexts = 0;
};
Registry& registry();
Nic& nic_for(uint32_t device_index);  // under registry().mu

// Async events (ibv_get_async_event): queued on the QP's or CQ's context.
void post_async_event(Context* ctx, const ibv_async_event& ev);

// The engine thread: started with the first open context, stopped with the last.
void engine_start();  // under registry().mu
void engine_stop();   // NOT under the lock (joins the thread)
// Runs a pass of the engine inline (tests of the engine itself; the thread may run too).
void engine_kick();
// What the engine thread is doing while it is inside the scope (a static description): SIGUSR1
// prints it from the signal handler, so a stuck engine (one that cannot reach its state dump) still
// says where it is, and a pass that takes long names its slowest step. Other threads: no effect.
class EngineActivity {
 public:
  explicit EngineActivity(const char* what);
  ~EngineActivity();
  EngineActivity(const EngineActivity&) = delete;
  EngineActivity& operator=(const EngineActivity&) = delete;

 private:
  static thread_local EngineActivity* t_current;  // the innermost open scope
  const char* prev_ = nullptr;
  EngineActivity* parent_ = nullptr;
  int64_t since_ns_ = 0;
  int64_t children_ns_ = 0;  // time spent in inner scopes
  bool engine_ = false;
};
// A QP moved to ERR flushes its unanswered requests (`flush`: WR_FLUSH_ERR completions), one
// being reset drops them; one being destroyed is forgotten by the engine (replies still on their
// way are then ignored). Under the lock.
void abandon_requests(Qp& q, bool flush);
void forget_qp(Qp& q);

// The SRQ `srqn` of `nic` (nullptr when none). Under the lock.
Srq* find_srq(const Nic* nic, uint32_t srqn);

// QP state transitions shared by verbs and DEVX (under registry().mu).
// Moves the QP to `state`, resetting engine and provider state on RESET.
void qp_set_state(Qp& qp, int state);
// The kernel's attribute-mask rules for a transition (ib_modify_qp_is_ok for RC), as EINVAL.
bool modify_qp_is_ok(int cur, int next, int mask, std::string* why);
// The rules for a DC target (mlx5_ib's DCT modify): RESET->INIT with PKEY_INDEX|PORT|ACCESS_FLAGS,
// INIT->RTR with AV|PATH_MTU|MIN_RNR_TIMER, to RESET or ERR with the state alone.
bool modify_dct_is_ok(int cur, int next, int mask, std::string* why);

// ---- DEVX commands (devx_cmd.cpp) ---------------------------------------------------------------
// Execute one PRM command the way a device does: returns 0 with out filled (status 0), or EREMOTEIO
// with the PRM status and syndrome in out, or an errno the kernel returns before the device sees
// the command (EINVAL for commands DEVX does not pass through, EFAULT/ENOSPC for bad lengths).
GICOMM_EMU_API int devx_general_cmd(ibv_context* ctx, const void* in, size_t inlen, void* out, size_t outlen);
GICOMM_EMU_API DevxObj* devx_obj_create(ibv_context* ctx, const void* in, size_t inlen, void* out, size_t outlen);
GICOMM_EMU_API int devx_obj_modify(DevxObj* obj, const void* in, size_t inlen, void* out, size_t outlen);
GICOMM_EMU_API int devx_obj_query(DevxObj* obj, const void* in, size_t inlen, void* out, size_t outlen);
GICOMM_EMU_API int devx_obj_destroy(DevxObj* obj);
GICOMM_EMU_API Umem* devx_umem_reg(ibv_context* ctx, void* addr, size_t size, uint32_t access);
GICOMM_EMU_API int devx_umem_dereg(Umem* umem);
GICOMM_EMU_API Uar* devx_alloc_uar(ibv_context* ctx, uint32_t flags);
GICOMM_EMU_API void devx_free_uar(Uar* uar);
GICOMM_EMU_API int devx_query_eqn(ibv_context* ctx, uint32_t vector, uint32_t* eqn);
// Destroys the DEVX objects, umems and UARs of a context being closed (under the lock).
void devx_destroy_context_objects(Context* ctx);

// Helpers for libmlx5: our objects behind the public structs, and the emulated device identity.
GICOMM_EMU_API Context* context_of(ibv_context* ctx);  // nullptr when not an emulated context
GICOMM_EMU_API ibv_context* open_context(ibv_device* dev);
GICOMM_EMU_API uint32_t pd_number(ibv_pd* pd);
GICOMM_EMU_API Qp* qp_of(ibv_qp* qp);
GICOMM_EMU_API Cq* cq_of(ibv_cq* cq);
GICOMM_EMU_API bool is_emulated_device(ibv_device* dev);
GICOMM_EMU_API Srq* srq_of(ibv_srq* srq);
GICOMM_EMU_API const void* ah_av(ibv_ah* ah);  // the AH's struct mlx5_wqe_av
// A DC target through mlx5dv_create_qp (MLX5DV_DCTYPE_DCT, on an SRQ, with its access key).
GICOMM_EMU_API ibv_qp* create_dct(ibv_context* ctx, ibv_qp_init_attr_ex* attr, uint64_t dc_key);

}  // namespace gicomm::emu
