// gicomm-emu-nvshmem: NVSHMEM's device API over its NIC transports (IBGDA, or IBRC through its CPU
// proxy), two PEs in two processes, with payload checks, then the latencies of the paper's Table 3
// (issue, put+completion, round trip). Only NVSHMEM's public API is used. Meant to run over
// gicomm's emulated rdma-core (see docs/nvshmem-on-emulated-nic.md), where every number is an
// emulated number and says so (rdma_provider: emulated); on a ConnectX node the same binary runs
// on the system's rdma-core and the records say that instead.
//
//   gicomm-emu-nvshmem --transport ibgda|ibrc [--gpus 1|2] [--out FILE] [--iters N] [--warmup N]
//                      [--sizes 8,4096,65536] [--timeout-s S] [--skip-metrics] [--param KEY=VALUE]...
//                      [--campaign C] [--host H] [--platform P] [--run-index I] [--provenance-id ID]
// (--param adds a string parameter to every record, e.g. mps=on.)
//
// The process forks into the two PEs before CUDA or NVSHMEM start (rank 0 makes NVSHMEM's unique
// id and hands it to rank 1 through a pipe). With --gpus 1 both PEs share GPU 0 (NVSHMEM's
// "limited MPG"; concurrent kernels of the two processes then need MPS or are time-sliced), with 2
// each has its own. NVSHMEM_DISABLE_P2P=1 keeps the PEs off NVLink and host memory sharing, so
// every operation goes through the NIC transport; the program checks that the peer's heap is not
// mapped. Environment it sets when not set: NVSHMEM_DISABLE_P2P=1, NVSHMEM_IB_ENABLE_IBGDA,
// NVSHMEM_REMOTE_TRANSPORT (none for ibgda, ibrc for ibrc), NVSHMEM_BOOTSTRAP_UID_PLUGIN, a 256 MiB
// heap, NVLink multicast off.
//
// Output: one "CHECK <name> PASS|FAIL <detail>" line per check on stdout, "METRIC" lines, and with
// --out the records (JSON lines, the project's record shape, schema_version 2). Exit 0 when every
// check passed, 1 when one failed, 2 for bad arguments, 3 when NVSHMEM did not initialize, 4 on a
// timeout (a PE that does not finish in --timeout-s is killed).
#include <nvshmem.h>
#include <nvshmemx.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

#include "gicomm/mlx5dev/devx.h"
#include "nvshmem/checks.cuh"

#ifndef GICOMM_NVSHMEM_LIBDIR
#define GICOMM_NVSHMEM_LIBDIR ""
#endif

namespace {

// The checks (their kernels, region and bounded waits) are shared with the NIC baseline harness.
using namespace gicomm::nvshmem_checks;
using gicomm::dissect::cycles;

// Each PE's symmetric region for the metrics: the layout of the checks' region (the round-trip
// flag at kFlagOff, puts from kSrcOff into kDstOff, p into the words at kWordsOff).

// ---- measurement kernels (one thread; Table 3) ------------------------------------------------------
constexpr int kOpPut = 0, kOpP = 1;

// out: 3 x iters: issue ns, completion ns (put + quiet), issue cycles.
__global__ void issue_kernel(Dev d, int op, size_t bytes, int warmup, int iters, uint64_t* out) {
  for (int i = 0; i < warmup + iters; ++i) {
    const uint64_t t0 = gtimer();
    const uint64_t c0 = cycles();
    if (op == kOpPut)
      nvshmem_putmem_nbi(d.sym + kDstOff, d.sym + kSrcOff, bytes, d.peer);
    else
      nvshmem_uint64_p(d.u64(kWordsOff + 304), static_cast<uint64_t>(i), d.peer);
    const uint64_t c1 = cycles();
    const uint64_t t1 = gtimer();
    nvshmem_quiet();
    const uint64_t t2 = gtimer();
    if (i >= warmup) {
      out[i - warmup] = t1 - t0;
      out[iters + i - warmup] = t2 - t0;
      out[2 * iters + i - warmup] = c1 - c0;
    }
  }
}

// Round trip: put (or p) carrying a sequence number to the peer's flag, wait for the echo.
// out: iters round-trip ns; out[iters] = 0 ok, else the iteration that timed out + 1.
__global__ void ping_kernel(Dev d, int op, size_t bytes, uint64_t base, int warmup, int iters, uint64_t* out) {
  out[iters] = 0;
  for (int i = 0; i < warmup + iters; ++i) {
    const uint64_t seq = base + static_cast<uint64_t>(i) + 1;
    const uint64_t t0 = gtimer();
    if (op == kOpPut)
      nvshmem_putmem_signal_nbi(d.sym + kDstOff, d.sym + kSrcOff, bytes, d.u64(kFlagOff), seq, NVSHMEM_SIGNAL_SET, d.peer);
    else
      nvshmem_uint64_p(d.u64(kFlagOff), seq, d.peer);
    if (!wait_word(d.u64(kFlagOff), seq, false)) {
      out[iters] = static_cast<uint64_t>(i) + 1;
      return;
    }
    if (i >= warmup) out[i - warmup] = gtimer() - t0;
  }
}

__global__ void echo_kernel(Dev d, int op, size_t bytes, uint64_t base, int n, uint64_t* out) {
  out[0] = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t seq = base + static_cast<uint64_t>(i) + 1;
    if (!wait_word(d.u64(kFlagOff), seq, false)) {
      out[0] = static_cast<uint64_t>(i) + 1;
      return;
    }
    if (op == kOpPut)
      nvshmem_putmem_signal_nbi(d.sym + kDstOff, d.sym + kSrcOff, bytes, d.u64(kFlagOff), seq, NVSHMEM_SIGNAL_SET, d.peer);
    else
      nvshmem_uint64_p(d.u64(kFlagOff), seq, d.peer);
  }
  nvshmem_quiet();
}

// ---- host side -----------------------------------------------------------------------------------------
struct Options {
  std::string transport = "ibgda";
  int gpus = 1;
  std::string out;
  int iters = 200, warmup = 20;
  std::vector<size_t> sizes = {8, 4096, 65536};
  int timeout_s = 240;
  bool metrics = true;
  std::string campaign = "emulated-nic", host, platform = "unknown", provenance_id;
  int run_index = 0;
  std::vector<std::pair<std::string, std::string>> params;  // --param KEY=VALUE
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gicomm-emu-nvshmem: %s\nusage: gicomm-emu-nvshmem --transport ibgda|ibrc [--gpus 1|2] [--out FILE] "
               "[--iters N] [--warmup N] [--sizes 8,4096] [--timeout-s S] [--skip-metrics] [--param KEY=VALUE] [--campaign C] "
               "[--host H] [--platform P] [--run-index I] [--provenance-id ID]\n",
               why.c_str());
  std::exit(2);
}

long parse_int(const std::string& key, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi)
    usage(key + " '" + v + "' is not an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  return x;
}

Options parse(int argc, char** argv) {
  Options o;
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  o.host = name;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--skip-metrics") {
      o.metrics = false;
      continue;
    }
    if (i + 1 >= argc) usage(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--transport") {
      if (v != "ibgda" && v != "ibrc") usage("--transport '" + v + "' (allowed: ibgda, ibrc)");
      o.transport = v;
    } else if (k == "--gpus") {
      o.gpus = static_cast<int>(parse_int(k, v, 1, 2));
    } else if (k == "--out") {
      o.out = v;
    } else if (k == "--iters") {
      o.iters = static_cast<int>(parse_int(k, v, 1, 100000));
    } else if (k == "--warmup") {
      o.warmup = static_cast<int>(parse_int(k, v, 0, 100000));
    } else if (k == "--timeout-s") {
      o.timeout_s = static_cast<int>(parse_int(k, v, 5, 3600));
    } else if (k == "--sizes") {
      o.sizes.clear();
      size_t pos = 0;
      while (pos <= v.size()) {
        const size_t comma = v.find(',', pos);
        const std::string item = v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        o.sizes.push_back(static_cast<size_t>(parse_int("--sizes entry", item, 8, kMaxBytes / 2)));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    } else if (k == "--campaign") {
      o.campaign = v;
    } else if (k == "--host") {
      o.host = v;
    } else if (k == "--platform") {
      o.platform = v;
    } else if (k == "--run-index") {
      o.run_index = static_cast<int>(parse_int(k, v, 0, 1000000));
    } else if (k == "--provenance-id") {
      o.provenance_id = v;
    } else if (k == "--param") {
      const size_t eq = v.find('=');
      bool ok = eq != std::string::npos && eq > 0;
      for (size_t j = 0; ok && j < eq; ++j) ok = (v[j] >= 'a' && v[j] <= 'z') || (v[j] >= '0' && v[j] <= '9') || v[j] == '_';
      if (!ok) usage("--param '" + v + "' is not KEY=VALUE with KEY of [a-z0-9_]");
      o.params.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else {
      usage("unknown option " + k);
    }
  }
  if (o.provenance_id.empty()) o.provenance_id = o.host;
  return o;
}

// ---- checks and records ---------------------------------------------------------------------------
int g_failures = 0;
int g_rank = 0;

void report(bool ok, const std::string& name, const std::string& detail) {
  std::printf("CHECK %s %s rank %d%s%s\n", name.c_str(), ok ? "PASS" : "FAIL", g_rank, detail.empty() ? "" : ": ",
              detail.c_str());
  std::fflush(stdout);
  if (!ok) ++g_failures;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
      continue;
    }
    o += c;
  }
  return o + "\"";
}

// A JSON number; null for a value that is not finite (JSON has no NaN or infinity).
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

struct Writer {
  const Options& o;
  std::string rdma_provider, handler;
  FILE* f = nullptr;
  explicit Writer(const Options& opts) : o(opts) {
    if (!o.out.empty()) {
      f = std::fopen(o.out.c_str(), "a");
      if (!f) throw std::runtime_error("cannot open --out " + o.out);
    }
  }
  ~Writer() {
    if (f) std::fclose(f);
  }
  // One record: `stats` empty for a failed one (then `error` says why).
  void record(const std::string& op, size_t size, const std::string& metric, const std::string& unit,
              std::vector<double> v, double mhz, const std::string& error) {
    std::string params = "{\"op\": " + json_str(op) + ", \"size\": " + std::to_string(size) + ", \"pes\": 2, \"gpus\": " +
                         std::to_string(o.gpus) + (handler.empty() ? "" : ", \"nic_handler\": " + json_str(handler));
    for (const auto& [k, val] : o.params) params += ", " + json_str(k) + ": " + json_str(val);
    params += "}";
    char ts[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::string line = "{\"schema_version\": 2, \"campaign\": " + json_str(o.campaign) + ", \"host\": " + json_str(o.host) +
                       ", \"platform\": " + json_str(o.platform) + ", \"experiment\": \"library_baselines\", \"transport\": " +
                       json_str("nvshmem-" + o.transport) + ", \"nic_backend\": \"mlx5\", \"rdma_provider\": " +
                       json_str(rdma_provider) + ", \"topology\": \"two-rank\", \"params\": " + params +
                       ", \"metric\": " + json_str(metric) + ", \"unit\": " + json_str(unit);
    if (error.empty() && !v.empty()) {
      std::sort(v.begin(), v.end());
      double sum = 0;
      for (double x : v) sum += x;
      const double mean = sum / static_cast<double>(v.size());
      double var = 0;
      for (double x : v) var += (x - mean) * (x - mean);
      auto pct = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))]; };
      line += ", \"stats\": {\"n\": " + std::to_string(v.size()) + ", \"p50\": " + num(pct(0.5)) + ", \"p90\": " + num(pct(0.9)) +
              ", \"p99\": " + num(pct(0.99)) + ", \"min\": " + num(v.front()) + ", \"max\": " + num(v.back()) +
              ", \"mean\": " + num(mean) + ", \"stddev\": " + num(std::sqrt(var / static_cast<double>(v.size()))) + "}";
      line += ", \"sm_clock_mhz\": " + (mhz > 0 ? num(mhz) : std::string("null")) + ", \"status\": \"ok\"";
      std::printf("METRIC nvshmem-%s %s size %zu %s p50 %s %s (n %zu, rdma_provider %s)\n", o.transport.c_str(), op.c_str(),
                  size, metric.c_str(), num(pct(0.5)).c_str(), unit.c_str(), v.size(), rdma_provider.c_str());
    } else {
      line += ", \"status\": \"failed\", \"error\": " + json_str(error.empty() ? "no samples" : error);
      std::printf("METRIC nvshmem-%s %s size %zu %s FAILED: %s\n", o.transport.c_str(), op.c_str(), size, metric.c_str(),
                  error.c_str());
    }
    line += ", \"run_index\": " + std::to_string(o.run_index) + ", \"provenance_id\": " + json_str(o.provenance_id) +
            ", \"timestamp\": " + json_str(ts) + "}";
    if (f) {
      std::fprintf(f, "%s\n", line.c_str());
      std::fflush(f);
    }
  }
};

double clock_mhz(const std::vector<uint64_t>& raw, int iters) {
  double ns = 0, cyc = 0;
  for (int i = 0; i < iters; ++i) {
    ns += static_cast<double>(raw[i]);
    cyc += static_cast<double>(raw[2 * iters + i]);
  }
  return ns > 0 ? cyc * 1e3 / ns : 0;
}

void run_metrics(char* sym, int me, const Options& o, Writer& w) {
  const Dev d{sym, 1 - me};
  uint64_t* dout = nullptr;
  const int n = o.warmup + o.iters;
  cuda_ok(cudaMalloc(&dout, sizeof(uint64_t) * (3 * o.iters + 1)), "cudaMalloc(out)");
  struct Point {
    int op;
    size_t size;
  };
  std::vector<Point> points = {{kOpP, 8}};
  for (size_t s : o.sizes) points.push_back({kOpPut, s});
  uint64_t base = 0;
  for (const Point& p : points) {
    const std::string op = p.op == kOpPut ? "put" : "p";
    // issue and completion (rank 0 alone; the peer only receives)
    if (me == 0) {
      std::string err;
      issue_kernel<<<1, 1>>>(d, p.op, p.size, o.warmup, o.iters, dout);
      const cudaError_t e = cudaDeviceSynchronize();
      std::vector<uint64_t> raw(3 * static_cast<size_t>(o.iters));
      if (e == cudaSuccess) cuda_ok(cudaMemcpy(raw.data(), dout, raw.size() * 8, cudaMemcpyDeviceToHost), "read issue");
      if (e != cudaSuccess) err = std::string("issue_kernel: ") + cudaGetErrorString(e);
      const double mhz = err.empty() ? clock_mhz(raw, o.iters) : 0;
      std::vector<double> issue, completion, issue_cycles;
      for (int i = 0; err.empty() && i < o.iters; ++i) {
        issue.push_back(static_cast<double>(raw[i]));
        completion.push_back(static_cast<double>(raw[o.iters + i]));
        issue_cycles.push_back(static_cast<double>(raw[2 * o.iters + i]));
      }
      w.record(op, p.size, "issue_ns", "ns", issue, mhz, err);
      w.record(op, p.size, "issue_cycles", "cycles", issue_cycles, mhz, err);
      w.record(op, p.size, "completion_ns", "ns", completion, mhz, err);
    }
    cuda_ok(cudaMemset(sym, 0, 256), "clear flag");
    cuda_ok(cudaDeviceSynchronize(), "clear flag");
    nvshmem_barrier_all();
    // round trip: both ranks
    if (me == 0)
      ping_kernel<<<1, 1>>>(d, p.op, p.size, base, o.warmup, o.iters, dout);
    else
      echo_kernel<<<1, 1>>>(d, p.op, p.size, base, n, dout);
    const cudaError_t e = cudaDeviceSynchronize();
    std::vector<uint64_t> raw(static_cast<size_t>(o.iters) + 1);
    if (e == cudaSuccess) cuda_ok(cudaMemcpy(raw.data(), dout, raw.size() * 8, cudaMemcpyDeviceToHost), "read rtt");
    if (me == 0) {
      std::string err = e != cudaSuccess ? std::string("ping_kernel: ") + cudaGetErrorString(e)
                        : raw[o.iters] != 0 ? "the echo of round trip " + std::to_string(raw[o.iters] - 1) + " did not come within 10 s"
                                            : "";
      std::vector<double> rtt;
      for (int i = 0; err.empty() && i < o.iters; ++i) rtt.push_back(static_cast<double>(raw[i]));
      w.record(op, p.size, "rtt_ns", "ns", rtt, 0, err);
    } else if (e != cudaSuccess || raw[0] != 0) {
      std::fprintf(stderr, "gicomm-emu-nvshmem: rank 1 echo %s size %zu: %s\n", op.c_str(), p.size,
                   e != cudaSuccess ? cudaGetErrorString(e) : "a round trip did not come within 10 s");
    }
    base += static_cast<uint64_t>(n);
    nvshmem_barrier_all();
  }
  cudaFree(dout);
}

int rank_main(int rank, int uid_fd, const Options& o) {
  g_rank = rank;
  alarm(static_cast<unsigned>(o.timeout_s));  // a hung PE dies (SIGALRM) rather than hang the run
  cuda_ok(cudaSetDevice(o.gpus == 2 ? rank : 0), "cudaSetDevice");
  nvshmemx_uniqueid_t uid = NVSHMEMX_UNIQUEID_INITIALIZER;
  if (rank == 0) {
    if (nvshmemx_get_uniqueid(&uid) != 0) throw std::runtime_error("nvshmemx_get_uniqueid failed");
    if (write(uid_fd, &uid, sizeof uid) != static_cast<ssize_t>(sizeof uid)) throw std::runtime_error("cannot pass the unique id");
  } else {
    size_t got = 0;
    while (got < sizeof uid) {
      const ssize_t r = read(uid_fd, reinterpret_cast<char*>(&uid) + got, sizeof uid - got);
      if (r <= 0) throw std::runtime_error("rank 0 did not pass the unique id");
      got += static_cast<size_t>(r);
    }
  }
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  if (nvshmemx_set_attr_uniqueid_args(rank, 2, &uid, &attr) != 0) throw std::runtime_error("nvshmemx_set_attr_uniqueid_args failed");
  if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) {
    std::fprintf(stderr, "gicomm-emu-nvshmem: rank %d: nvshmemx_init_attr failed (NVSHMEM_DEBUG=INFO says why)\n", rank);
    return 3;
  }
  const int me = nvshmem_my_pe();
  report(nvshmem_n_pes() == 2 && me == rank, "init", "PE " + std::to_string(me) + " of " + std::to_string(nvshmem_n_pes()));
  Writer w(o);
  w.rdma_provider = gicomm::mlx5dev::rdma_provider();
  if (o.transport == "ibgda") {
    const char* h = std::getenv("NVSHMEM_IBGDA_NIC_HANDLER");
    w.handler = h ? h : "auto";
  }
  std::printf("rank %d: NVSHMEM %d.%d, transport nvshmem-%s, rdma-core: %s\n", rank, NVSHMEM_MAJOR_VERSION,
              NVSHMEM_MINOR_VERSION, o.transport.c_str(), w.rdma_provider.c_str());
  if (rank == 0)
    for (const char* k : {"NVSHMEM_DISABLE_P2P", "NVSHMEM_IB_ENABLE_IBGDA", "NVSHMEM_REMOTE_TRANSPORT", "NVSHMEM_IBGDA_NIC_HANDLER",
                          "NVSHMEM_IBGDA_FORCE_NIC_BUF_MEMTYPE", "NVSHMEM_IBGDA_NUM_RC_PER_PE", "CUDA_MPS_PIPE_DIRECTORY"})
      std::printf("rank 0: %s=%s\n", k, std::getenv(k) ? std::getenv(k) : "(unset)");
  for (const Check& c : run_checks(me, o.transport == "ibrc")) report(c.ok, c.name, c.detail);
  const int both = failures_of_both(me, g_failures);
  char* sym = static_cast<char*>(nvshmem_malloc(kRegion));
  if (sym == nullptr) throw std::runtime_error("nvshmem_malloc failed");
  if (o.metrics && both == 0) run_metrics(sym, me, o, w);
  if (o.metrics && both != 0 && me == 0)
    for (const char* m : {"issue_ns", "completion_ns", "rtt_ns"})
      w.record("put", 8, m, "ns", {}, 0, "not measured: " + std::to_string(both) + " correctness checks failed");
  nvshmem_barrier_all();
  nvshmem_free(sym);
  nvshmem_finalize();
  std::printf("rank %d: %s (%d failed checks)\n", rank, g_failures ? "FAILED" : "all checks passed", g_failures);
  return g_failures ? 1 : 0;
}

void set_default_env(const Options& o) {
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
  setenv("NVSHMEM_DISABLE_P2P", "1", 0);
  setenv("NVSHMEM_IB_ENABLE_IBGDA", o.transport == "ibgda" ? "1" : "0", 0);
  setenv("NVSHMEM_REMOTE_TRANSPORT", o.transport == "ibgda" ? "none" : "ibrc", 0);
  setenv("NVSHMEM_SYMMETRIC_SIZE", "268435456", 0);
  const std::string plugin = std::string(GICOMM_NVSHMEM_LIBDIR) + "/nvshmem_bootstrap_uid.so.3";
  struct stat st;
  if (stat(plugin.c_str(), &st) == 0) setenv("NVSHMEM_BOOTSTRAP_UID_PLUGIN", plugin.c_str(), 0);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  set_default_env(o);
  int fds[2];
  if (pipe(fds) != 0) return 2;
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return 2;
  const int rank = child == 0 ? 1 : 0;
  close(fds[rank == 0 ? 0 : 1]);
  int rc = 0;
  try {
    rc = rank_main(rank, fds[rank == 0 ? 1 : 0], o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gicomm-emu-nvshmem: rank %d: %s\n", rank, e.what());
    rc = 1;
  }
  std::fflush(stdout);
  if (rank == 1) std::_Exit(rc);
  // Rank 0 waits for rank 1, bounded: a PE still running after the timeout is killed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "gicomm-emu-nvshmem: rank 1 did not finish within 30 s of rank 0; killing it\n");
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      return 4;
    }
    usleep(100000);
  }
  const int child_rc = WIFEXITED(status) ? WEXITSTATUS(status) : (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? 4 : 1);
  if (child_rc != 0) std::fprintf(stderr, "gicomm-emu-nvshmem: rank 1 exited with %d\n", child_rc);
  return rc != 0 ? rc : child_rc;
}
