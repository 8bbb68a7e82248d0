// The wire between emulated hosts (wire.h): Unix-domain stream sockets, non-blocking, each message
// a 16-byte header (magic, type, body length) and a body. Connections and buffers live on the
// engine thread; claim_node() runs once, at device enumeration.
#include "wire.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "emu.h"

namespace gicomm::emu::wire {

namespace {

constexpr uint32_t kMagic = 0x31574547;  // "GEW1"
constexpr uint64_t kMaxBody = (uint64_t(1) << 30) + 4096;  // a 1 GiB message and its fixed part

struct Header {
  uint32_t magic;
  uint16_t type;
  uint16_t reserved;
  uint64_t body_len;
};
static_assert(sizeof(Header) == 16, "wire header layout");

struct Conn {
  int fd = -1;
  uint32_t node = 0;          // the peer node (outgoing connections)
  std::vector<uint8_t> in;    // received, not yet framed
  std::vector<uint8_t> out;   // queued, not yet written
  size_t out_done = 0;
  bool dead = false;
};

std::mutex g_listen_mu;  // claim_node may run on any thread, once
int g_listen_fd = -1;
std::map<int, Conn> g_conns;          // by id
std::map<uint32_t, int> g_node_conn;  // node -> outgoing connection id
int g_next_id = 1;

sockaddr_un address_of(uint32_t node, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string name = endpoint_of(node);
  a.sun_path[0] = '\0';  // abstract namespace: nothing on disk, gone with the process
  std::memcpy(a.sun_path + 1, name.data(), std::min(name.size(), sizeof(a.sun_path) - 2));
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

int add_conn(int fd, uint32_t node) {
  set_nonblocking(fd);
  const int id = g_next_id++;
  Conn& c = g_conns[id];
  c.fd = fd;
  c.node = node;
  return id;
}

void close_conn(int id, std::vector<Message>* out) {
  auto it = g_conns.find(id);
  if (it == g_conns.end()) return;
  if (it->second.fd >= 0) close(it->second.fd);
  for (auto n = g_node_conn.begin(); n != g_node_conn.end();)
    n = n->second == id ? g_node_conn.erase(n) : std::next(n);
  g_conns.erase(it);
  if (out != nullptr) {
    Message m;
    m.conn = id;
    m.type = kClosed;
    out->push_back(std::move(m));
  }
}

// Writes what the connection has queued; false when the peer is gone.
bool flush(Conn& c) {
  while (c.out_done < c.out.size()) {
    const ssize_t n = ::send(c.fd, c.out.data() + c.out_done, c.out.size() - c.out_done, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
  if (c.out_done == c.out.size()) {
    c.out.clear();
    c.out_done = 0;
  } else if (c.out_done > (size_t(1) << 20)) {
    c.out.erase(c.out.begin(), c.out.begin() + static_cast<std::ptrdiff_t>(c.out_done));
    c.out_done = 0;
  }
  return true;
}

// Reads what has arrived and frames complete messages; false when the peer is gone or broke the
// protocol.
bool drain_input(int id, Conn& c, std::vector<Message>* out) {
  uint8_t buf[65536];
  for (;;) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      c.in.insert(c.in.end(), buf, buf + n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    return false;  // 0: orderly close; < 0: error
  }
  size_t pos = 0;
  while (c.in.size() - pos >= sizeof(Header)) {
    Header h;
    std::memcpy(&h, c.in.data() + pos, sizeof h);
    if (h.magic != kMagic || h.body_len > kMaxBody || (h.type != kRequest && h.type != kReply)) {
      fail(EPROTO, "wire", "connection to node " + std::to_string(c.node),
           "malformed message (magic " + hex(h.magic) + ", type " + std::to_string(h.type) + ", " +
               std::to_string(h.body_len) + " bytes): closing it");
      return false;
    }
    if (c.in.size() - pos - sizeof h < h.body_len) break;
    Message m;
    m.conn = id;
    m.type = static_cast<MessageType>(h.type);
    const uint8_t* body = c.in.data() + pos + sizeof h;
    m.body.assign(body, body + h.body_len);
    out->push_back(std::move(m));
    pos += sizeof h + h.body_len;
  }
  if (pos != 0) c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
  return true;
}

}  // namespace

softnic::AtomicOp Request::atomic() const {
  softnic::AtomicOp a;
  a.compare_swap = atomic_compare_swap != 0;
  a.bytes = atomic_bytes;
  a.swap_add = atomic_swap_add;
  a.compare = atomic_compare;
  a.swap_mask = atomic_swap_mask;
  a.compare_mask = atomic_compare_mask;
  a.boundary = atomic_boundary;
  return a;
}

void Request::set_atomic(const softnic::AtomicOp& a) {
  atomic_compare_swap = a.compare_swap ? 1 : 0;
  atomic_bytes = a.bytes;
  atomic_swap_add = a.swap_add;
  atomic_compare = a.compare;
  atomic_swap_mask = a.swap_mask;
  atomic_compare_mask = a.compare_mask;
  atomic_boundary = a.boundary;
}

std::string endpoint_of(uint32_t node) { return "gicomm-emu/" + std::to_string(node); }

uint32_t claim_node(uint32_t preferred, bool explicit_choice, uint32_t max_node, std::string* why) {
  std::lock_guard<std::mutex> lock(g_listen_mu);
  const uint32_t tries = explicit_choice ? 1 : 64;
  int last_errno = 0;
  for (uint32_t t = 0; t < tries; ++t) {
    const uint32_t node = (preferred - 1 + t) % max_node + 1;
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_errno = errno;
      break;
    }
    socklen_t len = 0;
    const sockaddr_un a = address_of(node, &len);
    if (bind(fd, reinterpret_cast<const sockaddr*>(&a), len) == 0 && listen(fd, 64) == 0) {
      set_nonblocking(fd);
      g_listen_fd = fd;
      return node;
    }
    last_errno = errno;
    close(fd);
    if (last_errno != EADDRINUSE) break;
  }
  *why = "cannot listen on the wire endpoint @" + endpoint_of(preferred) + " (" + std::strerror(last_errno) + ")" +
         (explicit_choice ? ": another process uses GICOMM_EMU_NODE=" + std::to_string(preferred) + "; give each process its own"
                          : "") +
         "; QPs of other processes cannot reach this one";
  return preferred;
}

int connect_node(uint32_t node, std::string* why) {
  auto it = g_node_conn.find(node);
  if (it != g_node_conn.end()) return it->second;
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  socklen_t len = 0;
  const sockaddr_un a = address_of(node, &len);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    *why = "no emulated host " + std::to_string(node) + " listens on @" + endpoint_of(node) + " (" + std::strerror(errno) + ")";
    close(fd);
    return -1;
  }
  const int id = add_conn(fd, node);
  g_node_conn[node] = id;
  note("wire: connected to node " + std::to_string(node));
  return id;
}

bool send(int conn, MessageType type, const void* fixed, size_t fixed_len, const std::vector<Span>& payload) {
  auto it = g_conns.find(conn);
  if (it == g_conns.end()) return false;
  Conn& c = it->second;
  uint64_t bytes = 0;
  for (const Span& s : payload) bytes += s.len;
  const Header h{kMagic, static_cast<uint16_t>(type), 0, fixed_len + bytes};
  const size_t at = c.out.size();
  c.out.resize(at + sizeof h + fixed_len + bytes);
  std::memcpy(c.out.data() + at, &h, sizeof h);
  std::memcpy(c.out.data() + at + sizeof h, fixed, fixed_len);
  if (bytes != 0) copy_spans({Span{c.out.data() + at + sizeof h + fixed_len, Loc{}, bytes}}, payload);
  if (!flush(c)) {
    c.dead = true;
    return false;
  }
  return true;
}

size_t exchange(std::vector<Message>* out) {
  const size_t before = out->size();
  if (g_listen_fd >= 0) {
    for (;;) {
      const int fd = accept4(g_listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) break;
      add_conn(fd, 0);
    }
  }
  std::vector<int> gone;
  for (auto& [id, c] : g_conns) {
    if (c.dead || !flush(c) || !drain_input(id, c, out)) gone.push_back(id);
  }
  for (int id : gone) close_conn(id, out);
  return out->size() - before;
}

void wait(int timeout_us) {
  std::vector<pollfd> fds;
  if (g_listen_fd >= 0) fds.push_back(pollfd{g_listen_fd, POLLIN, 0});
  for (auto& [id, c] : g_conns) {
    (void)id;
    fds.push_back(pollfd{c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
  }
  const timespec ts{0, static_cast<long>(timeout_us) * 1000};
  ppoll(fds.data(), fds.size(), &ts, nullptr);
}

bool busy() {
  for (auto& [id, c] : g_conns) {
    (void)id;
    if (!c.out.empty()) return true;
  }
  return false;
}

void shutdown() {
  for (auto& [id, c] : g_conns) {
    (void)id;
    if (c.fd >= 0) close(c.fd);
  }
  g_conns.clear();
  g_node_conn.clear();
}

}  // namespace gicomm::emu::wire
