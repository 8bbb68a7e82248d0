// The rank plumbing of the baseline drivers (ranks.h): forked ranks and how each ends, the
// unique-id hand-off, the job deadline, and records for points the ranks left unfinished
// (failed with the rank's reason, or skipped "not measurable on this host" for missing hardware).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/ranks.h"

using namespace gicomm::baselines;

static int failures = 0;
#define CHECK(c, msg)                                               \
  do {                                                              \
    if (!(c)) {                                                     \
      ++failures;                                                   \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, msg); \
    }                                                               \
  } while (0)

static std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

static int driver(const std::string& points, const std::string& out, const std::function<int(RankContext&)>& body) {
  std::vector<std::string> args = {"prog", "--experiment", "e", "--points", points, "--out", out, "--campaign", "c",
                                   "--host", "h", "--platform", "p", "--run-index", "0", "--provenance-id", "x"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(&a[0]);
  const gicomm::bench::DriverInfo info{"gicomm-bench-test", "t", "nvlink"};
  return run_baseline_driver(static_cast<int>(argv.size()), argv.data(), info, {"t"}, 2, {"rtt_ns", "issue_ns"}, body);
}

int main() {
  char dir[] = "/tmp/gicomm-ranks-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  RankContext base;
  base.rendezvous_dir = dir;

  // Two ranks, both fine; a blob goes from rank 0 to rank 1.
  auto out = run_ranks(2, 30, base, [](RankContext& ctx) {
    int v = 42;
    if (ctx.rank == 0) {
      publish_blob(ctx, "nccl_uid", &v, sizeof(v));
      return 0;
    }
    int got = 0;
    fetch_blob(ctx, "nccl_uid", &got, sizeof(got), 5000);
    return got == 42 ? 0 : 5;
  });
  CHECK(out.size() == 2 && out[0].empty() && out[1].empty(), "both ranks should exit 0");

  // A rank that exits 3 and a partner that would wait forever: the partner is killed after a grace.
  out = run_ranks(2, 60, base, [](RankContext& ctx) {
    if (ctx.rank == 1) return 3;
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return 0;
  }, 0.2);
  CHECK(out[1] == "exited with code 3", out[1].c_str());
  CHECK(out[0].find("killed after its partner rank 1") != std::string::npos, out[0].c_str());

  // The job deadline.
  out = run_ranks(1, 0.3, base, [](RankContext&) {
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return 0;
  });
  CHECK(out[0].find("deadline") != std::string::npos, out[0].c_str());

  // fetch_blob times out with a message naming the blob.
  bool threw = false;
  try {
    int v = 0;
    fetch_blob(base, "nvshmem_uid", &v, sizeof(v), 50);
  } catch (const std::runtime_error& e) {
    threw = std::string(e.what()).find("nvshmem_uid") != std::string::npos;
  }
  CHECK(threw, "fetch_blob should time out naming the blob");

  const std::string points = std::string(dir) + "/points.jsonl";
  {
    std::ofstream p(points);
    p << "{\"point_id\": \"a\", \"params\": {\"transport\": \"t\"}}\n"
      << "{\"point_id\": \"b\", \"params\": {\"transport\": \"t\"}}\n"
      << "{\"point_id\": \"o\", \"params\": {\"transport\": \"other\"}}\n";
  }

  // Rank 0 records point a, then throws: b becomes failed with the exception text; o is not ours.
  const std::string out1 = std::string(dir) + "/out1.jsonl";
  int rc = driver(points, out1, [](RankContext& ctx) {
    if (ctx.rank == 1) return 0;
    Record r = Record::ok("rtt_ns", "ns", gicomm::bench::compute_stats({1.0, 2.0}));
    write_point(ctx, ctx.points[0], {r});
    throw std::runtime_error("ncclCommInitRank: unhandled system error");
  });
  std::string text = slurp(out1);
  CHECK(rc == 0, "driver exit code");
  CHECK(text.find("\"point_id\": \"a\"") != std::string::npos, "point a recorded");
  CHECK(text.find("\"host_load\": {") != std::string::npos, "a rank's point carries the host's load while it ran");
  CHECK(text.find("\"status\": \"failed\"") != std::string::npos, "point b failed");
  CHECK(text.find("ncclCommInitRank: unhandled system error") != std::string::npos, "failure names the exception");
  CHECK(text.find("\"point_id\": \"o\"") == std::string::npos, "other transports are left alone");

  // Missing hardware: every point skipped, "not measurable on this host" with the reason.
  const std::string out2 = std::string(dir) + "/out2.jsonl";
  rc = driver(points, out2, [](RankContext& ctx) { return hardware_missing(ctx, "needs 2 GPUs, found 0"); });
  text = slurp(out2);
  CHECK(rc == 0, "driver exit code");
  CHECK(text.find("not measurable on this host: needs 2 GPUs, found 0") != std::string::npos, text.c_str());
  CHECK(text.find("\"status\": \"skipped\"") != std::string::npos, "skipped status");

  // A library that prints its reason and exits by itself (NVSHMEM's init does): the record ends
  // with the rank's last line of output; a rank writing far more than a pipe holds still ends.
  const std::string out3 = std::string(dir) + "/out3.jsonl";
  rc = driver(points, out3, [](RankContext& ctx) {
    if (ctx.rank == 1) {
      for (int i = 0; i < 4000; ++i) std::fprintf(stderr, "rank 1 chatter line %d of a long log\n", i);
      return 0;
    }
    std::fprintf(stderr, "transport.cpp:294: Unable to initialize any transports. returning error.\n");
    std::fprintf(stderr, "init.cu:1034: non-zero status: 7 nvshmem detect topo failed\n\n");
    std::fflush(stderr);
    _exit(255);
  });
  text = slurp(out3);
  CHECK(rc == 0, "driver exit code");
  CHECK(text.find("rank 0 exited with code 255 (its last output: init.cu:1034: non-zero status: 7 nvshmem detect "
                  "topo failed)") != std::string::npos,
        text.c_str());

  // A rank's provenance (the RDMA provider, the topology, how the PEs were placed) reaches every
  // record it writes; a record's own provider is kept. Rank 1 hands rank 0 a text blob (what failed
  // on its side) under a name the job's clean-up removes.
  const std::string out4 = std::string(dir) + "/out4.jsonl";
  rc = driver(points, out4, [](RankContext& ctx) {
    char text[64] = "putmem_8: first bad byte 3";
    if (ctx.rank == 1) {
      publish_blob(ctx, "checks1", text, sizeof text);
      return 0;
    }
    char got[64] = {};
    fetch_blob(ctx, "checks1", got, sizeof got, 5000);
    ctx.rdma_provider = "emulated";
    ctx.topology = "two-rank";
    ctx.extra_params = {{"pes_per_gpu", 2LL}, {"mps", std::string("on")}};
    Record mine = Record::failed("rtt_ns", "ns", got);
    Record own = Record::ok("issue_ns", "ns", gicomm::bench::compute_stats({1.0}));
    own.rdma_provider = "system rdma-core 50.0";
    write_point(ctx, ctx.points[0], {mine, own});
    write_point(ctx, ctx.points[1], {Record::ok("rtt_ns", "ns", gicomm::bench::compute_stats({1.0}))});
    return 0;
  });
  text = slurp(out4);
  CHECK(rc == 0, "driver exit code");
  CHECK(text.find("\"error\": \"putmem_8: first bad byte 3\"") != std::string::npos, text.c_str());
  CHECK(text.find("\"params\": {\"pes_per_gpu\": 2, \"mps\": \"on\"}") != std::string::npos,
        text.c_str());
  CHECK(text.find("\"rdma_provider\": \"emulated\"") != std::string::npos, "the rank's provider");
  CHECK(text.find("\"rdma_provider\": \"system rdma-core 50.0\"") != std::string::npos, "a record's own provider");
  CHECK(text.find("\"topology\": \"two-rank\"") != std::string::npos, "the rank's topology");
  CHECK(access((std::string(dir) + "/checks1").c_str(), F_OK) != 0, "the blob is removed with the job");

  // A rerun measures nothing already recorded.
  int calls = 0;
  rc = driver(points, out2, [&calls](RankContext&) {
    ++calls;
    return 0;
  });
  CHECK(rc == 0 && calls == 0, "finished points are skipped on rerun (no ranks started)");

  for (const char* f : {"points.jsonl", "out1.jsonl", "out2.jsonl", "out3.jsonl", "out4.jsonl"}) unlink((std::string(dir) + "/" + f).c_str());
  rmdir(dir);
  if (failures) std::fprintf(stderr, "%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
