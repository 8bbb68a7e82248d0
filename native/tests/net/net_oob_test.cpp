// The out-of-band exchange between two ranks (threads of this process, real TCP on localhost):
// agreement, the endpoint's wire form, and every refusal and timeout failing fast with a reason
// that names the peer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "check.h"
#include "gicomm/net/oob.h"

using namespace gicomm::net;
using Clock = std::chrono::steady_clock;

namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

Launch rank(int r, int port) {
  Launch l;
  l.rank = r;
  l.world = 2;
  l.source = "flags";
  l.rendezvous_host = "localhost";
  l.rendezvous_port = port;
  return l;
}

Identity ident(const std::string& point = "p1", const std::string& build = build_id()) {
  Identity id;
  id.build = build;
  id.experiment = "proxy_one_op";
  id.point = point;
  id.run = 0;
  return id;
}

struct Side {
  std::unique_ptr<OobSession> s;
  std::string error;
  double seconds = 0;
};

// Establishes both sides at once; each side's identity and timeout are the test's.
void pair(const Identity& id0, const Identity& id1, Side* a, Side* b, int timeout_ms = 20000) {
  const int port = free_port();
  auto go = [&](int r, const Identity& id, Side* out) {
    const auto t0 = Clock::now();
    out->s = OobSession::establish(rank(r, port), id, timeout_ms, &out->error);
    out->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  };
  std::thread t0(go, 0, id0, a), t1(go, 1, id1, b);
  t0.join();
  t1.join();
}

void has(const std::string& text, const std::string& needle) {
  REQUIRE(text.find(needle) != std::string::npos, "'%s' lacks '%s'", text.c_str(), needle.c_str());
  REQUIRE(text.find('\n') == std::string::npos, "'%s' is not one line", text.c_str());
}

void agree_and_swap_endpoints() {
  Side a, b;
  pair(ident(), ident(), &a, &b);
  REQUIRE(a.s && b.s, "%s | %s", a.error.c_str(), b.error.c_str());
  REQUIRE(a.s->peer_rank() == 1 && b.s->peer_rank() == 0);
  REQUIRE(a.s->peer_hello().get("pid") == std::to_string(::getpid()));
  REQUIRE(a.s->peer_hello().get("build") == build_id());
  Endpoint e0, e1;
  e0.device = "mlx5_0";
  e0.roce = true;
  e0.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  e0.gid_index = 3;
  e0.mtu = 4096;
  e0.qps = {{0x123, 0xabcdef}, {0xffffff, 0}};
  e0.buffer_addr = 0x7f0000001000ull;
  e0.buffer_bytes = 1 << 20;
  e0.rkey = 0xdeadbeef;
  e1.device = "mlx5_1";
  e1.lid = 7;
  e1.mtu = 2048;
  // The largest endpoint the verbs backend opens (kMaxEndpointQps, the connection sweep's 32,768),
  // every QP number and PSN at its widest: still one message.
  e1.qps.assign(32768, {0xffffff, 0xffffff});
  e1.qps[0] = {5, 6};
  Message m0, m1, got0, got1;
  put_endpoint(e0, &m0);
  put_endpoint(e1, &m1);
  std::string err0, err1;
  std::thread t([&] { REQUIRE(b.s->exchange("endpoint", m1, &got1, 5000, &err1), "%s", err1.c_str()); });
  REQUIRE(a.s->exchange("endpoint", m0, &got0, 5000, &err0), "%s", err0.c_str());
  t.join();
  Endpoint r0, r1;
  REQUIRE(get_endpoint(got1, &r0, &err0), "%s", err0.c_str());
  REQUIRE(get_endpoint(got0, &r1, &err0), "%s", err0.c_str());
  REQUIRE(r0.device == "mlx5_0" && r0.roce && r0.gid == e0.gid && r0.gid_index == 3 && r0.mtu == 4096);
  REQUIRE(r0.qps.size() == 2 && r0.qps[0].qpn == 0x123 && r0.qps[0].psn == 0xabcdef && r0.qps[1].qpn == 0xffffff);
  REQUIRE(r0.buffer_addr == e0.buffer_addr && r0.buffer_bytes == e0.buffer_bytes && r0.rkey == 0xdeadbeef);
  REQUIRE(r1.device == "mlx5_1" && !r1.roce && r1.lid == 7 && r1.mtu == 2048 && r1.qps.size() == 32768 &&
          r1.qps[0].qpn == 5 && r1.qps[32767].psn == 0xffffff);

  // The ranks at different phases: both notice.
  std::thread t2([&] { REQUIRE(!b.s->exchange("done", Message{}, &got1, 5000, &err1)); });
  REQUIRE(!a.s->exchange("ready", Message{}, &got0, 5000, &err0));
  t2.join();
  has(err0, "sent phase 'done' while this rank is at 'ready'");
  has(err1, "sent phase 'ready' while this rank is at 'done'");

  // A peer that stops taking part: a bounded wait naming it, then its closing is noticed at once.
  const auto t0 = Clock::now();
  REQUIRE(!a.s->exchange("done", Message{}, &got0, 300, &err0));
  has(err0, "no 'done' message from rank 1");
  has(err0, "within 0.3 s");
  REQUIRE(std::chrono::duration<double>(Clock::now() - t0).count() < 2);
  b.s.reset();
  REQUIRE(!a.s->exchange("done", Message{}, &got0, 5000, &err0));
  has(err0, "closed the connection");
  std::printf("  agreement, endpoints, phase mismatch, silent and closed peers: ok\n");
}

// Both sides refuse each other, fast, each naming what differs.
void refused(const Identity& id0, const Identity& id1, const std::string& needle) {
  Side a, b;
  pair(id0, id1, &a, &b);
  REQUIRE(!a.s && !b.s);
  has(a.error, "refusing rank 1");
  has(b.error, "refusing rank 0");
  has(a.error, needle);
  REQUIRE(a.seconds < 3 && b.seconds < 3, "refusal took %.1f s / %.1f s", a.seconds, b.seconds);
  std::printf("  refused (%s): '%s'\n", needle.c_str(), a.error.c_str());
}

void refusals() {
  refused(ident("p1"), ident("p2"), "it is at experiment proxy_one_op point p2 run 0, this rank at experiment proxy_one_op point p1");
  refused(ident("p1", "build-a"), ident("p1", "build-b"), "it runs build build-b, this rank runs build build-a");
  Identity run1 = ident();
  run1.run = 1;
  refused(ident(), run1, "run 1");
  Identity other_exp = ident();
  other_exp.experiment = "gda_rtt";
  refused(ident(), other_exp, "experiment gda_rtt");

  // A world of 4 is not a pair; two ranks that both say rank 0 never meet (both listen).
  std::string err;
  Launch four = rank(0, free_port());
  four.world = 4;
  REQUIRE(!OobSession::establish(four, ident(), 1000, &err));
  has(err, "connects two ranks; the world size is 4");
}

void dead_peers() {
  const int port = free_port();
  std::string err;
  auto t0 = Clock::now();
  REQUIRE(!OobSession::establish(rank(0, port), ident(), 1000, &err));
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  has(err, "rank 0 (host ");
  has(err, "rank 1 did not connect to port " + std::to_string(port) + " within 1.0 s");
  REQUIRE(s >= 0.9 && s < 3, "%.2f s", s);
  t0 = Clock::now();
  REQUIRE(!OobSession::establish(rank(1, port), ident(), 1000, &err));
  s = std::chrono::duration<double>(Clock::now() - t0).count();
  has(err, "rank 0 (host localhost) did not answer at localhost:" + std::to_string(port) + " within 1.0 s");
  has(err, "Connection refused");
  REQUIRE(s >= 0.9 && s < 3, "%.2f s", s);
  // An unresolvable rank 0 fails at once.
  Launch nowhere = rank(1, port);
  nowhere.rendezvous_host = "no-such-host.invalid";
  t0 = Clock::now();
  REQUIRE(!OobSession::establish(nowhere, ident(), 10000, &err));
  has(err, "cannot resolve rank 0's host 'no-such-host.invalid'");
  REQUIRE(std::chrono::duration<double>(Clock::now() - t0).count() < 5);
  std::printf("  dead peers: '%s'\n", err.c_str());
}

// Rank 0 facing something that is not a gicomm rank 1 (raw bytes from a plain socket).
std::string rank0_against(const std::function<void(int fd)>& client) {
  const int port = free_port();
  std::string err;
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    client(fd);
    ::close(fd);
  });
  REQUIRE(!OobSession::establish(rank(0, port), ident(), 3000, &err));
  t.join();
  return err;
}

void strangers() {
  const auto send = [](int fd, const std::string& s) { REQUIRE(::send(fd, s.data(), s.size(), 0) == ssize_t(s.size())); };
  const auto frame = [](const std::string& body) {
    std::string f(4, '\0');
    for (int i = 0; i < 4; ++i) f[size_t(i)] = char((body.size() >> (24 - 8 * i)) & 0xff);
    return f + body;
  };
  std::string e = rank0_against([](int) {});
  has(e, "closed the connection before its 'hello' message");
  e = rank0_against([&](int fd) { send(fd, "GET / HTTP/1.0\r\n\r\n"); });
  has(e, "is not a gicomm rank (it sent 'GET ...')");
  e = rank0_against([&](int fd) { send(fd, frame("hello there\n")); });
  has(e, "not 'gicomm-oob <version> <phase>'");
  e = rank0_against([&](int fd) { send(fd, frame("gicomm-oob 2 hello\nbuild=future\nrank=1\nworld=2\n")); });
  has(e, "refusing rank 1");
  has(e, "it speaks out-of-band protocol v2, this binary v1 (its build future");
  std::printf("  strangers: '%s'\n", e.c_str());

  // The port is taken by someone else.
  const int port = free_port();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::listen(fd, 1) == 0);
  std::string err;
  REQUIRE(!OobSession::establish(rank(0, port), ident(), 1000, &err));
  has(err, "cannot listen on port " + std::to_string(port));
  ::close(fd);
}

void messages() {
  Message m;
  REQUIRE(m.set("a.b-c_1", "x y=z"));
  REQUIRE(!m.set("bad key", "v") && !m.set("", "v") && !m.set("k", "two\nlines"));
  REQUIRE(m.set("a.b-c_1", "replaced") && m.items().size() == 1 && m.get("a.b-c_1") == "replaced");
  Message back;
  std::string phase, err;
  int version = 0;
  REQUIRE(Message::decode(m.encode("ph"), &back, &phase, &version, &err) && phase == "ph" && version == kOobVersion);
  REQUIRE(back.get("a.b-c_1") == "replaced");
  REQUIRE(!Message::decode("gicomm-oob 1 ph\nno-equals-sign\n", &back, &phase, &version, &err));
  has(err, "bad line 'no-equals-sign'");
  uint64_t v = 0;
  m.set("n", "12");
  REQUIRE(m.get_u64("n", 100, &v, &err) && v == 12);
  REQUIRE(!m.get_u64("n", 10, &v, &err));
  has(err, "'n'='12' is not an integer in 0..10");
  REQUIRE(!m.get_u64("missing", 10, &v, &err));
  has(err, "'missing' is missing");

  Endpoint ep;
  ep.device = "d";
  ep.qps = {{1, 2}};
  Message em;
  put_endpoint(ep, &em);
  Endpoint out;
  REQUIRE(get_endpoint(em, &out, &err));
  // Each field checked on receipt, the reason naming key and value.
  const char* bad[][3] = {{"ep.mtu", "1500", "'ep.mtu'='1500' is not one of 256, 512, 1024, 2048, 4096"},
                          {"ep.gid", "fe80::1", "'ep.gid'='fe80::1' is not a GID"},
                          {"ep.qps", "1:2,16777216:0", "'ep.qps' item '16777216:0' is not QPN:PSN"},
                          {"ep.link", "ethernet", "'ep.link'='ethernet' is not one of roce, ib"},
                          {"ep.rkey", "4294967296", "'ep.rkey'='4294967296' is not an integer"}};
  for (const auto& b : bad) {
    put_endpoint(ep, &em);
    em.set(b[0], b[1]);
    REQUIRE(!get_endpoint(em, &out, &err));
    has(err, b[2]);
  }
  REQUIRE(mtu_code(256) == 1 && mtu_code(4096) == 5 && mtu_code(1500) == 0 && mtu_bytes(3) == 1024 && mtu_bytes(0) == 0);
  std::array<uint8_t, 16> g{};
  REQUIRE(parse_gid("fe80:0000:0000:0000:0202:c9ff:fe00:0001", &g) && g[0] == 0xfe && g[15] == 1);
  REQUIRE(gid_text(g) == "fe80:0000:0000:0000:0202:c9ff:fe00:0001");
}

}  // namespace

int main() {
  messages();
  agree_and_swap_endpoints();
  refusals();
  dead_peers();
  strangers();
  std::printf("net_oob_test: ok (build %s)\n", build_id());
  return 0;
}
