// See ranks.h.
#include "support/ranks.h"

#include "support/launched.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

namespace gicomm::baselines {

namespace {

// This rank's current point window (harness/host_load.h): opened when the rank starts and again
// after each point it writes, so each point's records carry the host's load while it ran.
std::optional<gicomm::bench::HostLoadWindow>& point_window() {
  static std::optional<gicomm::bench::HostLoadWindow> w;
  return w;
}

std::string& last_missing() {
  static std::string why;
  return why;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    return code == 0 ? std::string() : "exited with code " + std::to_string(code);
  }
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + std::to_string(WTERMSIG(status));
  return "ended abnormally";
}

// A rank's stderr, read by the parent through a pipe: copied to the parent's stderr as it comes
// (progress lines stay live) and its last non-empty line kept (what a library printed before it
// exited without an exception, e.g. NVSHMEM's init failure).
struct ErrRelay {
  int fd = -1;
  std::string partial, last;
  void pump() {
    if (fd < 0) return;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) {
      std::fwrite(buf, 1, static_cast<size_t>(n), stderr);
      partial.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1)) {
        const std::string line = partial.substr(0, nl);
        if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
      }
    }
    std::fflush(stderr);
  }
  void close_after_drain() {
    pump();
    if (partial.find_first_not_of(" \t\r") != std::string::npos) last = partial;  // no final newline
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

}  // namespace

// Holds the ranks' blobs and, on the emulated rdma-core, their sysfs views, whose counter files the
// emulation rewrites as traffic moves: tmpfs (/dev/shm) unless TMPDIR says otherwise.
std::string make_rendezvous_dir() {
  const char* tmp = std::getenv("TMPDIR");
  struct stat st;
  const bool shm = ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0;
  std::string tmpl = std::string(tmp && *tmp ? tmp : shm ? "/dev/shm" : "/tmp") + "/gicomm-rdv-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + tmpl + ": " + std::strerror(errno));
  return std::string(buf.data());
}

void remove_rendezvous_dir(const std::string& dir) {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

void start_host_load_window() { point_window().emplace(); }

std::vector<std::string> run_ranks(int nranks, double deadline_s, const RankContext& base,
                                   const std::function<int(RankContext&)>& body, double grace_s,
                                   std::vector<std::string>* last_lines) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  std::vector<ErrRelay> relay(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    int pipe_fd[2] = {-1, -1};
    if (::pipe(pipe_fd) != 0) throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      ::dup2(pipe_fd[1], 2);
      ::close(pipe_fd[0]);
      ::close(pipe_fd[1]);
      for (int q = 0; q < r; ++q) ::close(relay[static_cast<size_t>(q)].fd);
      RankContext ctx = base;
      ctx.rank = r;
      ctx.nranks = nranks;
      ctx.local_rank = r;
      ctx.local_ranks = nranks;
      int code = 1;
      point_window().emplace();
      try {
        code = body(ctx);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[gicomm] rank %d: %s\n", r, e.what());
        const std::string text = e.what();
        try {
          publish_blob(ctx, "error" + std::to_string(r), text.data(), text.size());
        } catch (const std::exception&) {
        }
        code = 1;
      }
      std::fflush(stderr);
      std::fflush(stdout);
      ::_exit(code);
    }
    pids.push_back(pid);
    ::close(pipe_fd[1]);
    ::fcntl(pipe_fd[0], F_SETFL, ::fcntl(pipe_fd[0], F_GETFL) | O_NONBLOCK);
    relay[static_cast<size_t>(r)].fd = pipe_fd[0];
  }
  auto pump_all = [&] {
    for (auto& e : relay) e.pump();
  };
  std::vector<std::string> outcome(nranks, "still running");
  std::vector<bool> reaped(nranks, false);
  const auto t_end = std::chrono::steady_clock::now() + std::chrono::duration<double>(deadline_s);
  int left = nranks;
  while (left > 0) {
    pump_all();
    bool progressed = false;
    for (int r = 0; r < nranks; ++r) {
      if (reaped[r]) continue;
      int status = 0;
      const pid_t got = ::waitpid(pids[r], &status, WNOHANG);
      if (got == pids[r]) {
        reaped[r] = true;
        outcome[r] = describe_status(status);
        --left;
        progressed = true;
        // One rank failing leaves its partner waiting on it: give the partner a short grace.
        if (!outcome[r].empty()) {
          const auto grace = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
          for (int q = 0; q < nranks; ++q) {
            if (reaped[q]) continue;
            while (std::chrono::steady_clock::now() < grace) {
              pump_all();  // a partner blocked on a full pipe would never end
              if (::waitpid(pids[q], &status, WNOHANG) == pids[q]) {
                reaped[q] = true;
                outcome[q] = describe_status(status);
                --left;
                break;
              }
              std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
            if (!reaped[q]) {
              ::kill(pids[q], SIGKILL);
              ::waitpid(pids[q], &status, 0);
              reaped[q] = true;
              outcome[q] = "killed after its partner rank " + std::to_string(r) + " " + outcome[r];
              --left;
            }
          }
        }
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > t_end) {
      for (int r = 0; r < nranks; ++r) {
        if (reaped[r]) continue;
        int status = 0;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], &status, 0);
        reaped[r] = true;
        outcome[r] = "killed after the job deadline of " + std::to_string(static_cast<int>(deadline_s)) + " s";
      }
      break;
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Every rank has ended: what is left in the pipes (a descendant holding one open does not block).
  for (auto& e : relay) e.close_after_drain();
  if (last_lines) {
    last_lines->clear();
    for (const auto& e : relay) last_lines->push_back(e.last);
  }
  return outcome;
}

namespace {

// A blob as a message of its own phase between launched ranks.
net::Message swap_blob(const RankContext& ctx, const std::string& name, const net::Message& mine, int timeout_ms) {
  net::Message theirs;
  std::string err;
  if (!ctx.oob->exchange(name, mine, &theirs, timeout_ms, &err)) throw std::runtime_error(err);
  return theirs;
}

}  // namespace

void publish_blob(const RankContext& ctx, const std::string& name, const void* data, size_t size) {
  if (ctx.oob) {
    net::Message m;
    m.set("data", net::hex_of(data, size));
    swap_blob(ctx, name, m, ctx.peer_timeout_ms);
    return;
  }
  const std::string path = ctx.rendezvous_dir + "/" + name;
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) throw std::runtime_error("cannot create " + tmp + ": " + std::strerror(errno));
  const ssize_t n = ::write(fd, data, size);
  ::fsync(fd);
  ::close(fd);
  if (n != static_cast<ssize_t>(size)) throw std::runtime_error("short write to " + tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + tmp + ": " + std::strerror(errno));
}

void fetch_blob(const RankContext& ctx, const std::string& name, void* data, size_t size, int timeout_ms) {
  if (ctx.oob) {
    const net::Message m = swap_blob(ctx, name, net::Message{}, timeout_ms);
    if (!net::bytes_of(m.get("data"), data, size))
      throw std::runtime_error(ctx.oob->peer_name() + " sent a " + name + " that is not " + std::to_string(size) +
                               " bytes of hex");
    return;
  }
  const std::string path = ctx.rendezvous_dir + "/" + name;
  const auto t_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd >= 0) {
      const ssize_t n = ::read(fd, data, size);
      ::close(fd);
      if (n == static_cast<ssize_t>(size)) return;
      throw std::runtime_error("short read from " + path);
    }
    if (std::chrono::steady_clock::now() > t_end)
      throw std::runtime_error("rank " + std::to_string(ctx.rank) + ": no " + name + " from rank 0 within " +
                               std::to_string(timeout_ms) + " ms (" + path + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

const std::string& missing_reason() { return last_missing(); }

int hardware_missing(const RankContext& ctx, const std::string& reason) {
  std::fprintf(stderr, "%s: %s\n", ctx.info.program.c_str(), reason.c_str());
  last_missing() = reason;
  if (ctx.oob) return 3;  // no file to leave: rank 0 records it (support/launched.h)
  try {
    publish_blob(ctx, "missing", reason.data(), reason.size());
  } catch (const std::exception&) {
  }
  return 3;
}

void write_point(const RankContext& ctx, const Point& p, const std::vector<Record>& records) {
  const auto load = point_window() ? point_window()->finish() : std::nullopt;
  std::string lines;
  for (Record r : records) {
    if (r.rdma_provider.empty()) r.rdma_provider = ctx.rdma_provider;
    if (r.topology.empty()) r.topology = ctx.topology;
    if (!r.params && !ctx.extra_params.empty()) {
      gicomm::bench::Params merged = p.params;
      for (const auto& [k, v] : ctx.extra_params) merged.set(k, v);
      r.params = merged;
    }
    if (!r.host_load) r.host_load = load;
    lines += gicomm::bench::record_to_json(r, ctx.options, ctx.info, p) + "\n";
  }
  if (point_window()) point_window().emplace();
  if (!lines.empty()) gicomm::bench::append_lines_atomically(ctx.options.out_path, lines);
}

std::vector<Record> status_records(const std::vector<std::string>& metrics, const std::string& status,
                                   const std::string& why) {
  std::vector<Record> out;
  for (const auto& m : metrics) {
    Record r;
    r.metric = m;
    r.unit = "";
    r.status = status;
    r.error = why;
    out.push_back(r);
  }
  return out;
}

std::vector<Point> select_points(const std::vector<Point>& all, const std::vector<std::string>& transports,
                                 const std::string& out_path) {
  std::set<std::string> done;
  for (auto& id : gicomm::bench::finished_points(out_path)) done.insert(id);
  std::vector<Point> out;
  for (const Point& p : all) {
    const std::string& t = p.transport;
    if (std::find(transports.begin(), transports.end(), t) == transports.end()) continue;
    if (done.count(p.point_id)) continue;
    out.push_back(p);
  }
  return out;
}

void log_point(const RankContext& ctx, size_t index, const Point& p, const std::string& summary, double secs) {
  std::fprintf(stderr, "[gicomm] %s point %zu/%zu id=%s %s -> %s (%.2f s)\n", ctx.info.program.c_str(), index,
               ctx.points.size(), p.point_id.c_str(), p.params.to_text().c_str(), summary.c_str(), secs);
}

std::string first_point_transport(int argc, char** argv, const std::vector<std::string>& allowed) {
  gicomm::bench::Options o;
  std::string error, transport;
  if (gicomm::bench::parse_options(argc, argv, &o, &error) == 0) {
    try {
      const auto points = gicomm::bench::load_points(o);
      if (!points.empty()) transport = points.front().transport;
    } catch (const std::exception&) {
    }
  }
  for (const std::string& a : allowed)
    if (a == transport) return a;
  return allowed.at(0);
}

int run_baseline_driver(int argc, char** argv, const DriverInfo& info, const std::vector<std::string>& transports,
                        int nranks, const std::vector<std::string>& metrics,
                        const std::function<int(RankContext&)>& body) {
  RankContext base;
  base.info = info;
  std::string error;
  if (gicomm::bench::parse_options(argc, argv, &base.options, &error) != 0) {
    std::fprintf(stderr, "%s: %s\n", info.program.c_str(), error.c_str());
    return 2;
  }
  std::vector<Point> all;
  try {
    all = gicomm::bench::load_points(base.options);
    base.points = select_points(all, transports, base.options.out_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", info.program.c_str(), e.what());
    return 2;
  }
  // Ranks a launcher started (one per process): rank 1 runs the points rank 0 still has to measure.
  const auto launched = launched_rank(base.options.launch_flags, net::process_env(), nranks, &error);
  if (!error.empty()) {
    std::fprintf(stderr, "%s: %s\n", info.program.c_str(), error.c_str());
    return 2;
  }
  if (launched) {
    if (launched->launch.rank != 0) base.points = select_points(all, transports, "");
    return run_launched_rank(base, *launched, transports, metrics, body);
  }
  if (base.points.empty()) return 0;
  base.rendezvous_dir = make_rendezvous_dir();
  // Start-up (library init) plus a generous allowance per point; every GPU wait inside is bounded
  // by --timeout-ms, so this only catches a wedged process.
  const double deadline_s = 120.0 + 60.0 * static_cast<double>(base.points.size());
  std::vector<std::string> outcome, last_lines;
  try {
    outcome = run_ranks(nranks, deadline_s, base, body, 10.0, &last_lines);
  } catch (const std::exception& e) {
    remove_rendezvous_dir(base.rendezvous_dir);
    std::fprintf(stderr, "%s: %s\n", info.program.c_str(), e.what());
    return 1;
  }
  std::string missing_reason;
  {
    std::ifstream f(base.rendezvous_dir + "/missing");
    std::getline(f, missing_reason);
  }
  std::vector<std::string> errors(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    std::ifstream f(base.rendezvous_dir + "/error" + std::to_string(r));
    std::getline(f, errors[static_cast<size_t>(r)]);
  }
  remove_rendezvous_dir(base.rendezvous_dir);
  std::string why;
  bool missing_hw = false;
  for (int r = 0; r < nranks; ++r) {
    if (outcome[r].empty()) continue;
    if (outcome[r] == "exited with code 3") missing_hw = true;
    why += (why.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " " + outcome[r];
    // The rank's own exception text, else the last line it printed (a library that exits itself).
    if (!errors[r].empty())
      why += " (" + errors[r] + ")";
    else if (!last_lines[static_cast<size_t>(r)].empty())
      why += " (its last output: " + last_lines[static_cast<size_t>(r)].substr(0, 300) + ")";
  }
  // Points the ranks did not record: failed (or skipped when the hardware is missing), with why.
  const auto left = select_points(base.points, transports, base.options.out_path);
  for (const Point& p : left) {
    RankContext ctx = base;
    const std::string status = missing_hw ? "skipped" : "failed";
    const std::string text = missing_hw ? "not measurable on this host: " + (missing_reason.empty() ? why : missing_reason)
                                        : (why.empty() ? "rank 0 ended without recording this point" : why);
    write_point(ctx, p, status_records(metrics, status, text));
  }
  return 0;
}

}  // namespace gicomm::baselines
