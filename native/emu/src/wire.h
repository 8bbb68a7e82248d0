// The wire between emulated hosts: how a QP of one process reaches a QP of another.
//
// Every process that uses the emulation is one emulated host ("node", GICOMM_EMU_NODE); its
// devices' LIDs, GUIDs and GIDs carry the node number (devices.cpp), so an address names the node
// that answers for it. Each node's engine listens on a stream socket named after the node: the
// abstract Unix-domain socket "gicomm-emu/<node>" on one host. A requester's engine connects to
// the destination node, sends the decoded request (with its payload for writes and sends), and the
// responder's engine performs the responder half exactly as it does for a QP of its own process:
// keys checked against its own table, payloads written into its own memory (GPU memory by CUDA
// copies in its own context), receive completions on its own CQs. The reply (ACK, NAK with the
// syndrome, RNR, sequence error, or nobody there) comes back on the same connection with the read
// data or the atomic's old value. Timers and retries stay with the requester.
//
// Across hosts the same protocol runs over TCP: only endpoint_of() (where a node listens) and
// listen/connect change; messages are plain structs of fixed-width fields exchanged between
// builds of the same code on the same architecture (x86-64), so nothing else depends on the
// socket family.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gicomm/softnic/core.h"

namespace gicomm::emu {
struct Span;
}

namespace gicomm::emu::wire {

enum MessageType : uint16_t { kRequest = 1, kReply = 2, kClosed = 0xffff };

enum ReplyKind : uint8_t {
  kAck = 0,       // executed (or a duplicate, acknowledged again)
  kNak = 1,       // rejected: `syndrome` is what the requester's error CQE reports
  kRnr = 2,       // receiver not ready: no receive posted; retry after `rnr_timer`
  kSeqErr = 3,    // the PSN is ahead of what the responder expects: retry from it
  kNoAnswer = 4,  // no such QP (or DCT), or not ready to receive: a real fabric stays silent
};

// A request as the responder sees it. `length` payload bytes follow it for writes and sends.
struct Request {
  uint64_t tag = 0;       // the requester's request number, returned in the reply
  uint8_t dgid[16] = {};  // destination address: GID (is_global) or LID
  uint16_t dlid = 0;
  uint8_t is_global = 0;
  uint8_t dc = 0;         // a DCI's request: dest_qpn is a DCT number, dc_key its access key
  uint32_t dest_qpn = 0;
  uint32_t src_qpn = 0;
  uint32_t psn = 0;       // first PSN and packet count (RC)
  uint32_t npsn = 0;
  uint8_t opcode = 0, opmod = 0, fm_ce_se = 0, pad0 = 0;
  uint32_t imm_raw = 0;
  uint32_t rkey = 0;
  uint32_t pad1 = 0;
  uint64_t dc_key = 0;
  uint64_t raddr = 0;
  uint64_t length = 0;    // message bytes (an atomic: its size)
  uint8_t atomic_compare_swap = 0, atomic_bytes = 0, pad2[6] = {};
  uint64_t atomic_swap_add = 0, atomic_compare = 0, atomic_swap_mask = 0, atomic_compare_mask = 0,
           atomic_boundary = 0;

  softnic::AtomicOp atomic() const;
  void set_atomic(const softnic::AtomicOp& a);
};
static_assert(sizeof(Request) == 136, "wire request layout");

// The answer. `length` bytes of read data follow an ACKed read.
struct Reply {
  uint64_t tag = 0;
  uint8_t kind = kNoAnswer, syndrome = 0, rnr_timer = 0, pad[5] = {};
  uint64_t atomic_old = 0;
  uint64_t length = 0;
};
static_assert(sizeof(Reply) == 32, "wire reply layout");

// One received message: which connection it came on, its type and its body (fixed part, then
// payload). A kClosed message says a connection went away (its requests will not be answered).
struct Message {
  int conn = -1;
  MessageType type = kClosed;
  std::vector<uint8_t> body;
};

// Where node `node` listens (the abstract socket name, without the leading NUL).
std::string endpoint_of(uint32_t node);

// Claims `preferred` for this process by binding its endpoint. When the number was not chosen
// explicitly (GICOMM_EMU_NODE unset) and is taken, the next free ones are tried (up to `tries`);
// returns the node claimed, or `preferred` with *why set when none could be bound (the process
// then reaches only its own devices).
uint32_t claim_node(uint32_t preferred, bool explicit_choice, uint32_t max_node, std::string* why);

// The engine side; every call on the engine thread.
// The connection that carries requests to `node` (connected on first use); -1 and *why when the
// node cannot be reached.
int connect_node(uint32_t node, std::string* why);
// Queues a message: `fixed` (its fixed part) then the bytes of `payload` (gathered now; spans may
// be device memory). False when the connection is gone.
bool send(int conn, MessageType type, const void* fixed, size_t fixed_len, const std::vector<Span>& payload);
// Accepts connections, reads what has arrived and writes what is queued, without blocking;
// complete messages are appended to `out`. Returns the number of messages.
size_t exchange(std::vector<Message>* out);
// Waits up to `timeout_us` for wire traffic (the engine's idle wait).
void wait(int timeout_us);
// True when some connection still has queued output (the engine keeps exchanging).
bool busy();
// Closes every connection and the endpoint (process exit).
void shutdown();

}  // namespace gicomm::emu::wire
