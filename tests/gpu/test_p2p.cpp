// The peer-to-peer exchange (runtime/cuda/p2p.hpp, kernels/p2p_exchange.cuh) on 2 GPUs: it is
// the transport actually used, and the block is correct with it in every layout case (bit-exact
// exchanges, round trip, CPU reference); the NCCL transport forced by ULYSSES_A2A_TRANSPORT is
// correct too; a rank that never arrives ends in one clear error within the timeout.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <chrono>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "runtime/cuda/cluster.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "runtime/cuda/device_memory.hpp"
#include "runtime/cuda/exchange.hpp"
#include "tests/gpu/gpu_util.hpp"

using namespace ulysses;
using runtime::BlockShape;

namespace {

BlockShape shape(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t H_kv, std::int64_t D, KvStrategy kv, bool causal) {
  BlockShape s;
  s.B = B, s.S = S, s.H = H, s.H_kv = H_kv, s.D = D, s.P = 2, s.kv_strategy = kv, s.causal = causal;
  s.attn_implementation = "ulysses_reference";  // the exchange is under test, not the flash kernels
  return s;
}

runtime::Measurement run(const BlockShape& s) {
  runtime::cuda::CudaBackend be;
  runtime::cuda::CudaRunConfig cfg;
  cfg.host_verify = 1;
  cfg.followers_exit = false;
  runtime::RunOptions opt;
  opt.warmup = 1, opt.iters = 3, opt.timeout_s = 60;
  return be.run_block_ex(s, opt, cfg);
}

void expect_correct(const runtime::Measurement& m, const std::string& transport) {
  INFO(m.device);
  CHECK(m.device.find("exchange " + transport) != std::string::npos);
  for (const auto& c : m.checks) {
    INFO(fmt::format("{}: #wrong {} max err {:.3g}", c.name, c.wrong, c.max_abs_err));
    CHECK(c.passed);
  }
  CHECK(m.checks.size() >= 9);
  CHECK(m.correct);
}

struct EnvGuard {
  explicit EnvGuard(const char* v) { setenv("ULYSSES_A2A_TRANSPORT", v, 1); }
  ~EnvGuard() { unsetenv("ULYSSES_A2A_TRANSPORT"); }
};

}  // namespace

TEST_CASE("p2p exchange is the transport on 2 GPUs and the block is correct with it", "[.gpu][gpu][p2p]") {
  GPUTEST_SKIP_UNLESS_DEVICES(2);
  EnvGuard env("p2p");  // an error, not a silent NCCL fallback, if direct stores are impossible
  SECTION("GQA H_kv >= P, B = 1") { expect_correct(run(shape(1, 512, 8, 2, 128, KvStrategy::replicate, true)), "p2p"); }
  SECTION("MHA, B = 2 (general index maps), non-causal") {
    expect_correct(run(shape(2, 256, 4, 4, 64, KvStrategy::replicate, false)), "p2p");
  }
  SECTION("P > H_kv, replicate") { expect_correct(run(shape(1, 256, 4, 1, 64, KvStrategy::replicate, true)), "p2p"); }
  SECTION("P > H_kv, send_once (summed kv gradient on NCCL)") {
    expect_correct(run(shape(1, 256, 4, 1, 64, KvStrategy::send_once, true)), "p2p");
  }
  SECTION("ragged row count: S_l * H_l * D/8 not a multiple of the 1024-vector tile") {
    expect_correct(run(shape(1, 2 * 136, 6, 2, 64, KvStrategy::replicate, true)), "p2p");
  }
}

TEST_CASE("the NCCL transport, forced, is correct", "[.gpu][gpu][p2p]") {
  GPUTEST_SKIP_UNLESS_DEVICES(2);
  EnvGuard env("nccl");
  expect_correct(run(shape(1, 512, 8, 2, 128, KvStrategy::replicate, true)), "nccl");
  expect_correct(run(shape(2, 256, 4, 4, 64, KvStrategy::replicate, false)), "nccl");
}

TEST_CASE("a bad ULYSSES_A2A_TRANSPORT is refused in one line", "[.gpu][gpu][p2p]") {
  GPUTEST_SKIP_UNLESS_DEVICES(2);
  EnvGuard env("nvlink");
  CHECK_THROWS_WITH(run(shape(1, 256, 4, 4, 64, KvStrategy::replicate, true)), Catch::Contains("must be one of auto, nccl, p2p"));
}

// Traps rank 0's CUDA context on purpose, so it is NOT tagged [gpu] (a trap ends the context for every
// later test of the process): run it alone, `ulysses_gpu_tests "[p2p_timeout]"`.
TEST_CASE("p2p: a rank that never arrives ends in an error within the timeout", "[.][p2p_timeout]") {
  using namespace ulysses::runtime::cuda;
  GPUTEST_SKIP_UNLESS_DEVICES(2);
  EnvGuard env("p2p");
  auto cl = Cluster::acquire(2, 3.0);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(cl->run([](RankCtx& ctx) -> std::string {
                      DeviceArena a(ctx.device);
                      const core::Dims x{1, 256, 2, 4, 64};
                      DevBuf<std::uint16_t> src(a, 128 * 4 * 64), dst(a, 256 * 2 * 64);
                      Exchanger ex(ctx, a, 2 * core::chunk_elems(x));
                      ex.register_destinations({dst.get()});
                      if (ex.transport() != "p2p") throw std::runtime_error("p2p unavailable: " + ex.p2p_unavailable_reason());
                      if (ctx.rank == 1) {  // never arrives; keeps its buffers alive past rank 0's timeout
                        std::this_thread::sleep_for(std::chrono::seconds(8));
                        return "";
                      }
                      ex.run(Direction::seq_to_head, {{x, src.get(), dst.get()}});
                      ctx.wait(ctx.stream, "the p2p exchange");
                      return "";
                    }),
                    Catch::Contains("did not arrive"));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(s < 15);
}
