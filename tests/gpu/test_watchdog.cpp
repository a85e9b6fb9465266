// Process model and watchdog: launcher environment parsing, the TCP unique-id bootstrap with a
// missing rank or a wrong world size, and a stuck collective ending in an error within the
// configured time (never a hang).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "runtime/cuda/bootstrap.hpp"
#include "runtime/cuda/cluster.hpp"
#include "runtime/cuda/launcher.hpp"
#include "core/errors.hpp"
#include "tests/gpu/gpu_util.hpp"

using namespace ulysses;
using namespace ulysses::runtime::cuda;
using Clock = std::chrono::steady_clock;

namespace {

LaunchInfo detect(const std::map<std::string, std::string>& env) {
  return detect_launch([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int free_port() {  // a port unlikely to be in use: 20000 + pid-derived offset
  return 20000 + static_cast<int>(::getpid() % 20000);
}

}  // namespace

TEST_CASE("launcher environment: torchrun, mpirun, srun, none", "[.gpu][gpu][launcher]") {
  auto t = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  CHECK(t.launched);
  CHECK(t.launcher == "torchrun");
  CHECK(t.rank == 1);
  CHECK(t.world == 2);
  CHECK(t.master_addr == "10.0.0.1");
  CHECK(t.bootstrap_port == 29501);
  auto m = detect({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  CHECK(m.launcher == "mpirun");
  CHECK(m.local_rank == 1);
  auto s = detect({{"SLURM_PROCID", "2"}, {"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_LOCALID", "2"}, {"SLURM_LAUNCH_NODE_IPADDR", "10.1.1.1"}});
  CHECK(s.launcher == "srun");
  CHECK(s.world == 8);
  CHECK(s.master_addr == "10.1.1.1");
  CHECK_FALSE(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}).launched);  // sbatch script without srun
  CHECK_FALSE(detect({}).launched);
  CHECK_THROWS_AS(detect({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), core::InputError);
  CHECK_THROWS_AS(detect({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), core::InputError);
}

TEST_CASE("bootstrap: a missing rank ends in an error within the timeout", "[.gpu][gpu][watchdog]") {
  const auto t0 = Clock::now();
  try {
    exchange_unique_id(0, 2, "127.0.0.1", free_port(), 1.5);
    FAIL("rank 0 returned without its peer");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("did not connect") != std::string::npos);
  }
  CHECK(seconds_since(t0) < 5);
  const auto t1 = Clock::now();
  CHECK_THROWS_WITH(exchange_unique_id(1, 2, "127.0.0.1", free_port() + 1, 1.0), Catch::Contains("could not reach"));
  CHECK(seconds_since(t1) < 5);
}

TEST_CASE("bootstrap: a wrong world size is refused on both sides", "[.gpu][gpu][watchdog]") {
  const int port = free_port() + 2;
  std::string server_err, client_err;
  std::thread server([&] {
    try {
      exchange_unique_id(0, 2, "127.0.0.1", port, 5);
    } catch (const std::exception& e) {
      server_err = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  try {
    exchange_unique_id(1, 3, "127.0.0.1", port, 5);
  } catch (const std::exception& e) {
    client_err = e.what();
  }
  server.join();
  CHECK(server_err.find("world size 3") != std::string::npos);
  CHECK(client_err.find("world size 3") != std::string::npos);
}

TEST_CASE("bootstrap: two ranks agree on the id", "[.gpu][gpu][watchdog]") {
  const int port = free_port() + 3;
  ncclUniqueId a{}, b{};
  std::thread server([&] { a = exchange_unique_id(0, 2, "127.0.0.1", port, 10); });
  b = exchange_unique_id(1, 2, "127.0.0.1", port, 10);
  server.join();
  CHECK(std::memcmp(&a, &b, sizeof a) == 0);
}

TEST_CASE("watchdog: a stuck collective is aborted within the timeout", "[.gpu][gpu][watchdog]") {
  GPUTEST_SKIP_UNLESS_DEVICES(2);
  auto cl = Cluster::acquire(2, 3.0);
  const auto t0 = Clock::now();
  // rank 0 sends to rank 1, which never posts the receive
  CHECK_THROWS_WITH(cl->run([](RankCtx& ctx) -> std::string {
                      void* buf = nullptr;
                      const std::size_t n = std::size_t(64) << 20;  // 128 MiB: far beyond NCCL's FIFOs
                      CUDA_CHECK(cudaMalloc(&buf, n * 2));
                      // a matched exchange first (connections exist), then the unmatched send
                      NCCL_CHECK(ncclGroupStart());
                      NCCL_CHECK(ncclSend(buf, 1024, ncclBfloat16, 1 - ctx.rank, ctx.comm, ctx.comm_stream));
                      NCCL_CHECK(ncclRecv(static_cast<char*>(buf) + 4096, 1024, ncclBfloat16, 1 - ctx.rank, ctx.comm, ctx.comm_stream));
                      ctx.group_end("matched exchange");
                      ctx.wait(ctx.comm_stream, "a matched exchange");
                      if (ctx.rank == 1) return "";
                      ctx.nccl(ncclSend(buf, n, ncclBfloat16, 1, ctx.comm, ctx.comm_stream), "an unmatched send");
                      ctx.wait(ctx.comm_stream, "an unmatched send");
                      return "";
                    }),
                    Catch::Contains("watchdog"));
  CHECK(seconds_since(t0) < 15);
  // the broken communicators are replaced on the next acquire
  auto fresh = Cluster::acquire(2, 30.0);
  CHECK(fresh.get() != cl.get());
  const auto out = fresh->run([](RankCtx& ctx) { return std::to_string(ctx.rank); });
  CHECK(out == std::vector<std::string>{"0", "1"});
}
