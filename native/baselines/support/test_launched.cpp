// Library harnesses whose ranks a launcher starts (launched.h): what the flags and the environment
// say (explicit flags, Slurm, Open MPI; refusals name the flag or variable), and two local processes
// running run_baseline_driver as rank 0 and rank 1: a unique id handed over the out-of-band
// session, rank 0 alone writing the records, a peer with other points refused, a peer that never
// comes reported by name, and missing hardware recorded as skipped.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "check.h"
#include "support/launched.h"

using namespace gicomm::baselines;


static bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

static std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

static void test_what_the_launch_says() {
  std::string err;
  CHECK(!launched_rank({}, {}, 2, &err) && err.empty(), "nothing names a rank: the harness forks");
  auto me = launched_rank({{"rank", "1"}, {"world-size", "2"}, {"rendezvous", "127.0.0.1"}}, {}, 2, &err);
  CHECK(me && me->launch.rank == 1 && me->launch.source == "flags", "%s", err.c_str());
  CHECK(me && me->local_rank == 1 && me->local_ranks == 2, "rank 0 listens on this host: both ranks local");
  me = launched_rank({{"rank", "1"}, {"world-size", "2"}, {"rendezvous", "nodea.example"}}, {}, 2, &err);
  CHECK(me && me->local_rank == 0 && me->local_ranks == 1, "rank 0 elsewhere: one rank on this host");
  CHECK(!launched_rank({{"rank", "0"}, {"world-size", "3"}}, {}, 2, &err) &&
            has(err, "world size 3 (from flags): this harness runs 2 ranks"),
        "%s", err.c_str());
  CHECK(!launched_rank({{"rank", "0"}, {"world-size", "2"}, {"peer-timeout-ms", "soon"}}, {}, 2, &err) &&
            has(err, "--peer-timeout-ms soon: allowed"),
        "%s", err.c_str());
  CHECK(!launched_rank({{"rank", "x"}, {"world-size", "2"}}, {}, 2, &err) && has(err, "rank"), "%s", err.c_str());
  // A peer timeout with no rank is a launch missing its rank, as for the native drivers (not a fork).
  CHECK(!launched_rank({{"peer-timeout-ms", "5000"}}, {}, 2, &err) && has(err, "no rank"), "%s", err.c_str());
  // srun -N2 -n2 --ntasks-per-node=1: rank 1 on nodeb, alone there; rank 0's host is the rendezvous.
  const gicomm::net::Env slurm = {{"SLURM_PROCID", "1"},
                                  {"SLURM_NTASKS", "2"},
                                  {"SLURM_STEP_NODELIST", "nodea,nodeb"},
                                  {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
                                  {"SLURM_JOB_ID", "77"}};
  me = launched_rank({}, slurm, 2, &err);
  CHECK(me && me->launch.source == "slurm" && me->launch.rank == 1 && me->launch.rendezvous_host == "nodea",
        "%s", err.c_str());
  CHECK(me && me->local_rank == 0 && me->local_ranks == 1, "one task per node: local rank 0 of 1");
  // The pipeline's own job step (one task) forks as on one node.
  CHECK(!launched_rank({}, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_NODELIST", "nodea"},
                            {"SLURM_TASKS_PER_NODE", "1"}},
                       2, &err) &&
            err.empty(),
        "%s", err.c_str());
  // mpirun -np 2 on one host: Open MPI's local rank and size.
  me = launched_rank({{"rendezvous", "127.0.0.1"}},
                     {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
                     2, &err);
  CHECK(me && me->launch.source == "openmpi" && me->local_rank == 1 && me->local_ranks == 2, "%s", err.c_str());
  std::vector<unsigned char> blob = {0x00, 0x7f, 0xff, 0x10};
  std::vector<unsigned char> back(4);
  CHECK(gicomm::net::bytes_of(gicomm::net::hex_of(blob.data(), 4), back.data(), 4) && back == blob, "hex round trip");
  CHECK(!gicomm::net::bytes_of("0g", back.data(), 1) && !gicomm::net::bytes_of("00", back.data(), 2), "bad hex refused");
}

static int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// One rank of the harness as a child process: run_baseline_driver with the launch flags.
static pid_t start_rank(int rank, int port, const std::string& points, const std::string& out, int peer_ms,
                        const std::function<int(RankContext&)>& body) {
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  std::vector<std::string> args = {"prog", "--experiment", "e", "--points", points, "--out", out,
                                   "--campaign", "c", "--host", "h", "--platform", "p", "--run-index", "0",
                                   "--provenance-id", "x", "--rank", std::to_string(rank), "--world-size", "2",
                                   "--rendezvous", "127.0.0.1", "--rendezvous-port", std::to_string(port),
                                   "--peer-timeout-ms", std::to_string(peer_ms)};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(&a[0]);
  const gicomm::bench::DriverInfo info{"gicomm-bench-test", "t", "mlx5"};
  _exit(run_baseline_driver(static_cast<int>(argv.size()), argv.data(), info, {"t"}, 2, {"rtt_ns"}, body));
}

static int wait_rank(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static std::string points_file(const std::string& dir, const std::string& name, const std::vector<std::string>& ids) {
  const std::string path = dir + "/" + name;
  std::ofstream f(path);
  for (const auto& id : ids) f << "{\"point_id\": \"" << id << "\", \"transport\": \"t\", \"params\": {}}\n";
  return path;
}

// The body of both ranks: rank 0 makes an id, rank 1 must receive it whole; rank 0 records each point.
static int uid_body(RankContext& ctx) {
  unsigned char uid[128];
  if (ctx.rank == 0) {
    for (int i = 0; i < 128; ++i) uid[i] = static_cast<unsigned char>(i * 7);
    publish_blob(ctx, "nvshmem_uid", uid, sizeof uid);
    for (const auto& p : ctx.points) {
      gicomm::bench::Stats st;
      st.n = 1;
      write_point(ctx, p, {gicomm::bench::Record::ok("rtt_ns", "ns", st)});
    }
    return 0;
  }
  fetch_blob(ctx, "nvshmem_uid", uid, sizeof uid, 5000);
  for (int i = 0; i < 128; ++i)
    if (uid[i] != static_cast<unsigned char>(i * 7)) throw std::runtime_error("the unique id arrived changed");
  return ctx.points.size() == 2 ? 0 : 5;
}

// Rank 1 (with `points1`) and rank 0 (with `points0`) as two processes; rank 0's records, and how
// each rank exited in *rc0 / *rc1.
static std::string run_pair(const std::string& dir, const std::string& name, const std::string& points0,
                            const std::string& points1, const std::function<int(RankContext&)>& body, int* rc0,
                            int* rc1) {
  const int port = free_port();
  const pid_t r1 = start_rank(1, port, points1, dir + "/" + name + "1.jsonl", 10000, body);
  const pid_t r0 = start_rank(0, port, points0, dir + "/" + name + "0.jsonl", 10000, body);
  *rc0 = wait_rank(r0);
  *rc1 = wait_rank(r1);
  return slurp(dir + "/" + name + "0.jsonl");
}

static void test_two_local_ranks(const std::string& dir) {
  const std::string pts = points_file(dir, "pts.jsonl", {"a", "b"});
  int rc0 = -1, rc1 = -1;
  // Both ranks, same points: the id crosses over the session, rank 0 records both points.
  const std::string out0 = run_pair(dir, "r", pts, pts, uid_body, &rc0, &rc1);
  CHECK(rc0 == 0 && rc1 == 0, "both ranks exit 0");
  CHECK(has(out0, "\"point_id\": \"a\"") && has(out0, "\"point_id\": \"b\"") && !has(out0, "failed"), "%s",
        out0.c_str());
  CHECK(slurp(dir + "/r1.jsonl").empty(), "rank 1 writes no records");

  // Rank 1 lacks point b: the plan is refused, rank 0 records the points failed with the reason.
  const std::string m0 = run_pair(dir, "m", pts, points_file(dir, "fewer.jsonl", {"a"}), uid_body, &rc0, &rc1);
  CHECK(rc0 == 0 && rc1 == 1, "rank 0 records; rank 1 fails");
  CHECK(has(m0, "\"status\": \"failed\"") && has(m0, "refused the plan: point b is not among rank 1's points"),
        "%s", m0.c_str());

  // Nobody comes: rank 0 names the peer it waited for.
  const pid_t r0 = start_rank(0, free_port(), pts, dir + "/d0.jsonl", 500, uid_body);
  CHECK(wait_rank(r0) == 0, "rank 0 alone still records");
  const std::string d0 = slurp(dir + "/d0.jsonl");
  CHECK(has(d0, "\"status\": \"failed\"") && has(d0, "rank 1") && has(d0, "within"), "%s", d0.c_str());

  // Missing hardware on both: skipped, with the reason.
  auto missing = [](RankContext& ctx) { return hardware_missing(ctx, "t needs a GPU, found none"); };
  const std::string h0 = run_pair(dir, "h", pts, pts, missing, &rc0, &rc1);
  CHECK(rc0 == 0 && rc1 == 0, "missing hardware is no failure of the ranks");
  CHECK(has(h0, "\"status\": \"skipped\"") && has(h0, "not measurable on this host: t needs a GPU, found none"),
        "%s", h0.c_str());
}

int main() {
  char dir[] = "/tmp/gicomm-launched-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  test_what_the_launch_says();
  test_two_local_ranks(dir);
  REQUIRE(std::system(("rm -rf " + std::string(dir)).c_str()) == 0);
  return check_result("test_baselines_launched");
}
