// Out-of-band exchange over TCP (see gicomm/net/oob.h).
#include "gicomm/net/oob.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

namespace gicomm::net {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(int e) { return std::strerror(e); }

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

std::string seconds(int ms) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f s", ms / 1000.0);
  return b;
}

bool valid_key(const std::string& k) {
  if (k.empty()) return false;
  for (char c : k)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

// Shown when a peer sends something that is not ours.
std::string printable(const std::string& bytes) {
  std::string out;
  for (char c : bytes.substr(0, 24)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '.';
  return out;
}

std::string self_name(const Launch& l) { return "rank " + std::to_string(l.rank) + " (host " + this_host() + ")"; }

// Sends all of `data` before the deadline.
bool send_all(int fd, const std::string& data, Clock::time_point deadline, std::string* why) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      *why = errno == EPIPE || errno == ECONNRESET ? "closed" : errno_text(errno);
      return false;
    }
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) == 0) {
      *why = "timeout";
      return false;
    }
  }
  return true;
}

// Receives exactly n bytes before the deadline. *closed when the peer closed the connection.
bool recv_all(int fd, size_t n, std::string* out, Clock::time_point deadline, bool* closed, std::string* why) {
  out->resize(n);
  size_t off = 0;
  *closed = false;
  while (off < n) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r == 0) {
      *why = "timeout";
      out->resize(off);
      return false;
    }
    if (r < 0 && errno == EINTR) continue;
    const ssize_t got = ::recv(fd, &(*out)[off], n - off, MSG_DONTWAIT);
    if (got == 0) {
      *closed = true;
      out->resize(off);
      return false;
    }
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      *closed = errno == ECONNRESET;
      *why = errno_text(errno);
      out->resize(off);
      return false;
    }
    off += static_cast<size_t>(got);
  }
  return true;
}

int listen_and_accept(const Launch& l, Clock::time_point deadline, int timeout_ms, std::string* error) {
  const int lfd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool v6 = lfd >= 0;
  const int fd = v6 ? lfd : ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = self_name(l) + ": socket() failed: " + errno_text(errno);
    return -1;
  }
  const int one = 1, zero = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (v6) {  // dual stack: IPv4 peers arrive as mapped addresses
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(l.rendezvous_port));
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(l.rendezvous_port));
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  if (rc != 0 || ::listen(fd, 4) != 0) {
    *error = self_name(l) + ": cannot listen on port " + std::to_string(l.rendezvous_port) + ": " +
             errno_text(errno) + " (another job on this node? choose one with --rendezvous-port)";
    ::close(fd);
    return -1;
  }
  while (true) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      *error = self_name(l) + ": " + l.name_rank(1) + " did not connect to port " + std::to_string(l.rendezvous_port) +
               " within " + seconds(timeout_ms) +
               (l.source == "slurm" ? " (are both ranks started by one srun step?)" : "");
      ::close(fd);
      return -1;
    }
    const int cfd = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd >= 0) {
      ::close(fd);
      return cfd;
    }
    if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) {
      *error = self_name(l) + ": accept() failed: " + errno_text(errno);
      ::close(fd);
      return -1;
    }
  }
}

int connect_until(const Launch& l, Clock::time_point deadline, int timeout_ms, std::string* error) {
  const std::string where = l.rendezvous_host + ":" + std::to_string(l.rendezvous_port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(l.rendezvous_port);
  const int g = ::getaddrinfo(l.rendezvous_host.c_str(), port.c_str(), &hints, &res);
  if (g != 0) {
    *error = self_name(l) + ": cannot resolve rank 0's host '" + l.rendezvous_host + "': " + gai_strerror(g) +
             (l.note.empty() ? "" : " (" + l.note + ")");
    return -1;
  }
  std::string last = "no address";
  while (true) {
    for (addrinfo* a = res; a; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
      if (fd < 0) {
        last = errno_text(errno);
        continue;
      }
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        const int wait = std::min(remaining_ms(deadline), 1000);
        if (::poll(&p, 1, wait) == 1) {
          int err = 0;
          socklen_t len = sizeof(err);
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          rc = err ? -1 : 0;
          errno = err;
        } else {
          errno = ETIMEDOUT;
        }
      }
      if (rc == 0) {
        ::freeaddrinfo(res);
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        return fd;
      }
      last = errno_text(errno);
      ::close(fd);
    }
    if (remaining_ms(deadline) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, remaining_ms(deadline))));
  }
  ::freeaddrinfo(res);
  *error = self_name(l) + ": " + l.name_rank(0) + " did not answer at " + where + " within " + seconds(timeout_ms) +
           " (last error: " + last + ")";
  return -1;
}

// One message each way. The peer's phase and version come back unchecked.
bool swap(int fd, const std::string& phase, const Message& mine, Message* theirs, std::string* their_phase,
          int* their_version, Clock::time_point deadline, int timeout_ms, const std::string& self,
          const std::string& peer, std::string* error) {
  const std::string body = mine.encode(phase);
  std::string frame(4, '\0');
  for (int i = 0; i < 4; ++i) frame[static_cast<size_t>(i)] = static_cast<char>((body.size() >> (24 - 8 * i)) & 0xff);
  std::string why;
  if (!send_all(fd, frame + body, deadline, &why)) {
    *error = why == "closed" ? self + ": " + peer + " closed the connection before '" + phase + "' (did it fail?)"
                             : self + ": cannot send '" + phase + "' to " + peer + ": " +
                                   (why == "timeout" ? "no progress within " + seconds(timeout_ms) : why);
    return false;
  }
  std::string head, text;
  bool closed = false;
  if (!recv_all(fd, 4, &head, deadline, &closed, &why)) {
    *error = closed ? self + ": " + peer + " closed the connection before its '" + phase + "' message (did it fail?)"
             : why == "timeout" ? self + ": no '" + phase + "' message from " + peer + " within " + seconds(timeout_ms)
                                : self + ": receiving '" + phase + "' from " + peer + ": " + why;
    return false;
  }
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len = (len << 8) | static_cast<uint8_t>(head[static_cast<size_t>(i)]);
  if (len > kMaxMessageBytes) {
    *error = self + ": " + peer + " is not a gicomm rank (it sent '" + printable(head) + "...')";
    return false;
  }
  if (!recv_all(fd, len, &text, deadline, &closed, &why)) {
    *error = self + ": " + peer + (closed ? " closed the connection in the middle of its '" + phase + "' message"
                                          : " sent a truncated '" + phase + "' message (" + why + ")");
    return false;
  }
  if (!Message::decode(text, theirs, their_phase, their_version, &why)) {
    *error = self + ": " + peer + " is not a gicomm rank or speaks another protocol: " + why;
    return false;
  }
  return true;
}

}  // namespace

// ------------------------------------------------------------------------------------ Message

bool Message::set(const std::string& key, const std::string& value) {
  if (!valid_key(key) || value.find('\n') != std::string::npos) return false;
  for (auto& kv : items_)
    if (kv.first == key) {
      kv.second = value;
      return true;
    }
  items_.emplace_back(key, value);
  return true;
}

bool Message::has(const std::string& key) const {
  for (const auto& kv : items_)
    if (kv.first == key) return true;
  return false;
}

std::string Message::get(const std::string& key) const {
  for (const auto& kv : items_)
    if (kv.first == key) return kv.second;
  return "";
}

bool Message::get_u64(const std::string& key, uint64_t max, uint64_t* out, std::string* error) const {
  if (!has(key)) {
    *error = "'" + key + "' is missing";
    return false;
  }
  const std::string v = get(key);
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 0);
  if (v.empty() || v[0] == '-' || errno || *end != '\0' || x > max) {
    *error = "'" + key + "'='" + v + "' is not an integer in 0.." + std::to_string(max);
    return false;
  }
  *out = x;
  return true;
}

std::string Message::encode(const std::string& phase) const {
  std::string s = "gicomm-oob " + std::to_string(kOobVersion) + " " + phase + "\n";
  for (const auto& kv : items_) s += kv.first + "=" + kv.second + "\n";
  return s;
}

bool Message::decode(const std::string& text, Message* out, std::string* phase, int* version, std::string* error) {
  *out = Message{};
  const size_t nl = text.find('\n');
  const std::string head = text.substr(0, nl);
  int v = 0;
  char ph[64] = {};
  if (head.compare(0, 11, "gicomm-oob ") != 0 || std::sscanf(head.c_str(), "gicomm-oob %d %63s", &v, ph) != 2) {
    *error = "its message starts '" + printable(head) + "', not 'gicomm-oob <version> <phase>'";
    return false;
  }
  *version = v;
  *phase = ph;
  size_t start = nl == std::string::npos ? text.size() : nl + 1;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    const size_t eq = line.find('=');
    if (eq == std::string::npos || !out->set(line.substr(0, eq), line.substr(eq + 1))) {
      *error = "bad line '" + printable(line) + "' in its '" + *phase + "' message";
      return false;
    }
    start = end + 1;
  }
  return true;
}

// ------------------------------------------------------------------------------------ Endpoint

std::string gid_text(const std::array<uint8_t, 16>& gid) {
  char b[40];
  std::snprintf(b, sizeof(b), "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", gid[0],
                gid[1], gid[2], gid[3], gid[4], gid[5], gid[6], gid[7], gid[8], gid[9], gid[10], gid[11], gid[12],
                gid[13], gid[14], gid[15]);
  return b;
}

bool parse_gid(const std::string& text, std::array<uint8_t, 16>* gid) {
  std::string hex;
  for (char c : text) {
    if (c == ':') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    hex += c;
  }
  if (hex.size() != 32 || text.size() != 39) return false;
  for (size_t i = 0; i < 16; ++i) (*gid)[i] = static_cast<uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  return true;
}

int mtu_code(uint32_t bytes) {
  for (int c = 1; c <= 5; ++c)
    if (bytes == (128u << c)) return c;
  return 0;
}

uint32_t mtu_bytes(int code) { return code >= 1 && code <= 5 ? 128u << code : 0; }

void put_endpoint(const Endpoint& ep, Message* m) {
  m->set("ep.device", ep.device);
  m->set_u64("ep.port", static_cast<uint64_t>(ep.port));
  m->set("ep.link", ep.roce ? "roce" : "ib");
  m->set_u64("ep.lid", ep.lid);
  m->set("ep.gid", gid_text(ep.gid));
  m->set_u64("ep.gid_index", static_cast<uint64_t>(ep.gid_index));
  m->set_u64("ep.mtu", ep.mtu);
  std::string qps;
  for (const auto& q : ep.qps) qps += (qps.empty() ? "" : ",") + std::to_string(q.qpn) + ":" + std::to_string(q.psn);
  m->set("ep.qps", qps);
  m->set_u64("ep.buffer_addr", ep.buffer_addr);
  m->set_u64("ep.buffer_bytes", ep.buffer_bytes);
  m->set_u64("ep.rkey", ep.rkey);
}

bool get_endpoint(const Message& m, Endpoint* ep, std::string* error) {
  *ep = Endpoint{};
  uint64_t v = 0;
  ep->device = m.get("ep.device");
  if (ep->device.empty()) {
    *error = "endpoint: 'ep.device' is missing";
    return false;
  }
  if (!m.get_u64("ep.port", 255, &v, error)) return *error = "endpoint: " + *error, false;
  ep->port = static_cast<int>(v);
  const std::string link = m.get("ep.link");
  if (link != "roce" && link != "ib") {
    *error = "endpoint: 'ep.link'='" + link + "' is not one of roce, ib";
    return false;
  }
  ep->roce = link == "roce";
  if (!m.get_u64("ep.lid", 0xffff, &v, error)) return *error = "endpoint: " + *error, false;
  ep->lid = static_cast<uint16_t>(v);
  if (!parse_gid(m.get("ep.gid"), &ep->gid)) {
    *error = "endpoint: 'ep.gid'='" + m.get("ep.gid") + "' is not a GID (8 groups of 4 hex digits)";
    return false;
  }
  if (!m.get_u64("ep.gid_index", 255, &v, error)) return *error = "endpoint: " + *error, false;
  ep->gid_index = static_cast<int>(v);
  if (!m.get_u64("ep.mtu", 4096, &v, error) || !mtu_code(static_cast<uint32_t>(v))) {
    *error = "endpoint: 'ep.mtu'='" + m.get("ep.mtu") + "' is not one of 256, 512, 1024, 2048, 4096";
    return false;
  }
  ep->mtu = static_cast<uint32_t>(v);
  const std::string qps = m.get("ep.qps");
  size_t start = 0;
  while (start < qps.size()) {
    size_t end = qps.find(',', start);
    if (end == std::string::npos) end = qps.size();
    const std::string item = qps.substr(start, end - start);
    unsigned long qpn = 0, psn = 0;
    char tail = 0;
    if (std::sscanf(item.c_str(), "%lu:%lu%c", &qpn, &psn, &tail) != 2 || qpn > 0xffffff || psn > 0xffffff) {
      *error = "endpoint: 'ep.qps' item '" + item + "' is not QPN:PSN with 24-bit numbers";
      return false;
    }
    ep->qps.push_back({static_cast<uint32_t>(qpn), static_cast<uint32_t>(psn)});
    start = end + 1;
  }
  if (!m.get_u64("ep.buffer_addr", UINT64_MAX, &ep->buffer_addr, error) ||
      !m.get_u64("ep.buffer_bytes", UINT64_MAX, &ep->buffer_bytes, error) ||
      !m.get_u64("ep.rkey", 0xffffffffu, &v, error))
    return *error = "endpoint: " + *error, false;
  ep->rkey = static_cast<uint32_t>(v);
  return true;
}

// ------------------------------------------------------------------------------------ session

Message make_hello(const Launch& l, const Identity& self) {
  Message m;
  m.set("build", self.build);
  m.set("experiment", self.experiment.empty() ? "-" : self.experiment);
  m.set("point", self.point.empty() ? "-" : self.point);
  m.set_u64("run", static_cast<uint64_t>(self.run));
  m.set_u64("rank", static_cast<uint64_t>(l.rank));
  m.set_u64("world", static_cast<uint64_t>(l.world));
  m.set("host", this_host());
  m.set_u64("pid", static_cast<uint64_t>(::getpid()));
  m.set("launcher", l.source);
  return m;
}

std::string check_hello(const Launch& l, const Identity& self, const Message& peer, int peer_version) {
  if (peer_version != kOobVersion)
    return "it speaks out-of-band protocol v" + std::to_string(peer_version) + ", this binary v" +
           std::to_string(kOobVersion) + " (its build " + peer.get("build") + ", ours " + self.build + ")";
  const Message mine = make_hello(l, self);
  if (peer.get("world") != mine.get("world"))
    return "its world size is " + peer.get("world") + ", ours " + mine.get("world");
  if (peer.get("rank") != std::to_string(1 - l.rank))
    return "it says it is rank " + peer.get("rank") + "; the peer of rank " + std::to_string(l.rank) + " is rank " +
           std::to_string(1 - l.rank);
  if (peer.get("build") != self.build)
    return "it runs build " + peer.get("build") + ", this rank runs build " + self.build +
           " (both ranks must run the same binary build)";
  for (const char* k : {"experiment", "point", "run"})
    if (peer.get(k) != mine.get(k))
      return std::string("it is at experiment ") + peer.get("experiment") + " point " + peer.get("point") + " run " +
             peer.get("run") + ", this rank at experiment " + mine.get("experiment") + " point " + mine.get("point") +
             " run " + mine.get("run");
  return "";
}

std::unique_ptr<OobSession> OobSession::establish(const Launch& l, const Identity& self, int timeout_ms,
                                                  std::string* error) {
  if (l.world != 2) {
    *error = self_name(l) + ": the out-of-band exchange connects two ranks; the world size is " +
             std::to_string(l.world);
    return nullptr;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const int fd = l.rank == 0 ? listen_and_accept(l, deadline, timeout_ms, error)
                             : connect_until(l, deadline, timeout_ms, error);
  if (fd < 0) return nullptr;
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::unique_ptr<OobSession> s(new OobSession(l, fd));
  const std::string me = self_name(l);
  Message hello;
  std::string phase;
  int version = 0;
  if (!swap(fd, "hello", make_hello(l, self), &hello, &phase, &version, deadline, timeout_ms, me, l.name_rank(1 - l.rank),
            error))
    return nullptr;
  s->peer_host_ = hello.get("host");
  s->peer_hello_ = hello;
  std::string refusal = phase == "hello" ? check_hello(l, self, hello, version)
                                         : "it opened with phase '" + phase + "', not 'hello'";
  Message verdict, theirs;
  verdict.set("verdict", refusal.empty() ? "ok" : "refused");
  if (!refusal.empty()) verdict.set("reason", refusal);
  std::string their_error;
  const bool got = swap(fd, "verdict", verdict, &theirs, &phase, &version, deadline, timeout_ms, me, s->peer_name(),
                        &their_error);
  if (!refusal.empty()) {
    *error = me + ": refusing " + s->peer_name() + ": " + refusal;
    return nullptr;
  }
  if (!got) {
    *error = their_error;
    return nullptr;
  }
  if (theirs.get("verdict") != "ok") {
    *error = me + ": refused by " + s->peer_name() + ": " + theirs.get("reason");
    return nullptr;
  }
  return s;
}

OobSession::~OobSession() {
  if (fd_ >= 0) ::close(fd_);
}

std::string OobSession::name() const { return self_name(launch_); }

std::string OobSession::peer_name() const {
  const std::string h = peer_host_.empty() ? launch_.host_of(peer_rank()) : peer_host_;
  return "rank " + std::to_string(peer_rank()) + (h.empty() ? "" : " (host " + h + ")");
}

bool OobSession::exchange(const std::string& phase, const Message& mine, Message* theirs, int timeout_ms,
                          std::string* error) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string their_phase;
  int version = 0;
  const std::string me = self_name(launch_);
  if (!valid_key(phase)) {
    *error = me + ": phase '" + phase + "' is not a name ([A-Za-z0-9_.-]+)";
    return false;
  }
  if (!swap(fd_, phase, mine, theirs, &their_phase, &version, deadline, timeout_ms, me, peer_name(), error))
    return false;
  if (their_phase != phase) {
    *error = me + ": " + peer_name() + " sent phase '" + their_phase + "' while this rank is at '" + phase +
             "' (the ranks run different sequences)";
    return false;
  }
  return true;
}

std::optional<std::vector<std::string>> agree_on_plan(OobSession& session, const std::vector<std::string>& ids,
                                                      const std::string& own, int timeout_ms, std::string* why) {
  Message mine, theirs;
  mine.set_u64("points", ids.size());
  if (session.rank() == 0)
    for (size_t i = 0; i < ids.size(); ++i) mine.set("point." + std::to_string(i), ids[i]);
  if (!session.exchange("plan", mine, &theirs, timeout_ms, why)) return std::nullopt;
  std::vector<std::string> plan = ids;
  std::string verdict = "ok";
  if (session.rank() != 0) {
    plan.clear();
    uint64_t n = 0;
    std::string err;
    if (!theirs.get_u64("points", 1u << 20, &n, &err)) verdict = session.peer_name() + " sent a bad plan: " + err;
    const std::set<std::string> known(ids.begin(), ids.end());
    for (uint64_t i = 0; i < n && verdict == "ok"; ++i) {
      plan.push_back(theirs.get("point." + std::to_string(i)));
      if (!known.count(plan.back()))
        verdict = "point " + plan.back() + " is not " + own + " (give both ranks the same --points)";
    }
  }
  Message check;
  check.set("status", verdict);
  if (!session.exchange("plan-check", check, &theirs, timeout_ms, why)) return std::nullopt;
  if (verdict != "ok") {
    *why = verdict;
    return std::nullopt;
  }
  if (theirs.get("status") != "ok") {
    *why = session.peer_name() + " refused the plan: " + theirs.get("status");
    return std::nullopt;
  }
  return plan;
}

}  // namespace gicomm::net
