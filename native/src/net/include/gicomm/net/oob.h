// The out-of-band exchange of a two-rank point: a small TCP rendezvous at rank 0's host (from the
// launcher), over which the ranks check that they belong together and then swap what RDMA needs
// (QP numbers, LID/GID, PSNs, MTU, buffer address and rkey) or any other bootstrap data (an NCCL
// or NVSHMEM unique id, counter readings, "done").
//
// Every wait is bounded by a deadline, and every failure is one line naming the peer it waited
// for: "rank 0: rank 1 (host nodeb) did not connect to port 15123 within 30.0 s".
//
// On connection both ranks send a hello (protocol version, build id, experiment, point, run,
// rank, world size, host, pid), check the peer's, and send back a verdict. A peer with another
// protocol version, build, experiment, point or run, or a rank that does not fit, is refused: both
// sides fail, each with the reason ("refused by rank 1 (host nodeb): ..." on the refused side).
//
// Wire format (stable across versions so that a mismatch is reported, not misparsed): each
// message is a 4-byte big-endian length and that many bytes of text, "gicomm-oob <version>
// <phase>\n" followed by "key=value\n" lines.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gicomm/net/launcher.h"

namespace gicomm::net {

constexpr int kOobVersion = 1;
constexpr size_t kMaxMessageBytes = 1u << 20;

// The build id compiled into this binary: the source commit, with "-dirty.<hash of the diff>" when
// the tree had uncommitted changes (GICOMM_BUILD_ID at configure time overrides it).
const char* build_id();

// What both ranks must agree on before any traffic.
struct Identity {
  std::string build = build_id();
  std::string experiment;  // experiment name ("-" outside a campaign)
  std::string point;       // point_id ("-" outside a campaign)
  int run = 0;             // independent run index
};

// An ordered set of key=value pairs. Keys: [A-Za-z0-9_.-]+; values: any text without a newline.
class Message {
 public:
  // false (and nothing stored) for a bad key or a value with a newline.
  bool set(const std::string& key, const std::string& value);
  void set_u64(const std::string& key, uint64_t v) { set(key, std::to_string(v)); }
  bool has(const std::string& key) const;
  // The value, or "" when absent.
  std::string get(const std::string& key) const;
  // Parses key as an unsigned integer <= max; false with a reason naming key and value otherwise.
  bool get_u64(const std::string& key, uint64_t max, uint64_t* out, std::string* error) const;
  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }

  std::string encode(const std::string& phase) const;
  // Parses `text` (without the length prefix); *phase is set; false with a reason on bad input.
  static bool decode(const std::string& text, Message* out, std::string* phase, int* version, std::string* error);

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

// What a peer needs to connect an RC QP to ours and write into our buffer.
struct QpInfo {
  uint32_t qpn = 0;  // 24 bits
  uint32_t psn = 0;  // 24 bits: the first packet sequence number this QP sends
};
struct Endpoint {
  std::string device;  // the NIC (ibv device name) these QPs live on
  int port = 1;
  bool roce = false;  // Ethernet link layer: the peer must route by GID (GRH)
  uint16_t lid = 0;   // InfiniBand
  std::array<uint8_t, 16> gid{};
  int gid_index = 0;
  uint32_t mtu = 1024;  // active path MTU in bytes: 256, 512, 1024, 2048 or 4096
  std::vector<QpInfo> qps;
  // The buffer the peer may RDMA-write into (bytes == 0: none).
  uint64_t buffer_addr = 0;
  uint64_t buffer_bytes = 0;
  uint32_t rkey = 0;
};
void put_endpoint(const Endpoint& ep, Message* m);
bool get_endpoint(const Message& m, Endpoint* ep, std::string* error);
// "fe80:0000:...:0001" (sysfs form) <-> 16 bytes.
std::string gid_text(const std::array<uint8_t, 16>& gid);
bool parse_gid(const std::string& text, std::array<uint8_t, 16>* gid);
// MTU in bytes -> the verbs/PRM encoding (256 -> 1 ... 4096 -> 5); 0 when not a valid MTU.
int mtu_code(uint32_t bytes);
uint32_t mtu_bytes(int code);

class OobSession {
 public:
  // Connects rank 0 and rank 1 (world size 2) at launch.rendezvous_host:port and checks the
  // peer's hello against `self`. nullptr and a one-line reason on timeout, refusal or error.
  static std::unique_ptr<OobSession> establish(const Launch& launch, const Identity& self, int timeout_ms,
                                               std::string* error);
  ~OobSession();
  OobSession(const OobSession&) = delete;
  OobSession& operator=(const OobSession&) = delete;

  // Sends `mine` and receives the peer's message of the same phase (both ranks call it with the
  // same phase, in the same order). The wait is bounded by timeout_ms: give the peer's share of
  // the work (a passive rank waits through the whole measurement for "done").
  bool exchange(const std::string& phase, const Message& mine, Message* theirs, int timeout_ms, std::string* error);

  int rank() const { return launch_.rank; }
  int peer_rank() const { return 1 - launch_.rank; }
  const std::string& peer_host() const { return peer_host_; }
  // What the peer said about itself in its hello (host, pid, build, ...).
  const Message& peer_hello() const { return peer_hello_; }
  // "rank 1 (host nodeb)", and this rank's own name in the same form.
  std::string peer_name() const;
  std::string name() const;

 private:
  OobSession(const Launch& launch, int fd) : launch_(launch), fd_(fd) {}
  Launch launch_;
  int fd_ = -1;
  std::string peer_host_;
  Message peer_hello_;
};

// The hello a rank sends, and the check of a peer's hello (empty: accepted; else the reason).
// Rank 0's plan of point ids, agreed by both ranks: rank 0 sends its `ids` in order; rank 1 takes
// them when each is one of its own `ids` (else it refuses: "point X is not <own> (give both ranks
// the same --points)", `own` saying where it looked, e.g. "in rank 1's points file"); then both
// swap verdicts, so a refusal fails both. The plan, or nullopt and *why: this rank's refusal, the
// peer's ("<peer> refused the plan: ..."), or the exchange's error.
std::optional<std::vector<std::string>> agree_on_plan(OobSession& session, const std::vector<std::string>& ids,
                                                      const std::string& own, int timeout_ms, std::string* why);

Message make_hello(const Launch& launch, const Identity& self);
std::string check_hello(const Launch& launch, const Identity& self, const Message& peer, int peer_version);

// Bytes as lowercase hex (a blob inside a Message's text fields), and back: false when `hex` is
// not exactly 2 * n hex digits.
inline std::string hex_of(const void* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(2 * n, '0');
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[b[i] >> 4];
    out[2 * i + 1] = digits[b[i] & 15];
  }
  return out;
}

inline bool bytes_of(const std::string& hex, void* p, size_t n) {
  if (hex.size() != 2 * n) return false;
  auto v = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    const int hi = v(hex[2 * i]), lo = v(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    b[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

}  // namespace gicomm::net
