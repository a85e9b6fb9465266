// The CUDA backend end to end: run_block is correct (device checks + the CPU reference's checks)
// for P = 1 and P = 2, MHA and GQA, both kv strategies with P > H_kv, B = 2, sliced exchange;
// and Ulysses on P = 2 equals the same block on P = 1 over the full sequence (out, dq, dk, dv).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/bf16.hpp"
#include "runtime/checks.hpp"
#include "runtime/cuda/cuda_backend.hpp"
#include "tests/gpu/gpu_util.hpp"

using namespace ulysses;
using runtime::BlockShape;

namespace {

BlockShape shape(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t H_kv, std::int64_t D, std::int64_t P,
                 KvStrategy kv = KvStrategy::replicate, bool causal = true) {
  BlockShape s;
  s.B = B, s.S = S, s.H = H, s.H_kv = H_kv, s.D = D, s.P = P, s.kv_strategy = kv, s.causal = causal;
  s.attn_implementation = "ulysses_reference";
  return s;
}

runtime::Measurement run(const BlockShape& s, int slices, std::vector<runtime::cuda::RankReport>* reps = nullptr) {
  runtime::cuda::CudaBackend be;
  runtime::cuda::CudaRunConfig cfg;
  cfg.slices = slices;
  cfg.host_verify = 1;
  cfg.keep_tensors = reps != nullptr;
  cfg.followers_exit = false;
  runtime::RunOptions opt;
  opt.warmup = 1, opt.iters = 2, opt.timeout_s = 60;
  return be.run_block_ex(s, opt, cfg, reps);
}

void expect_correct(const runtime::Measurement& m) {
  for (const auto& c : m.checks) {
    INFO(fmt::format("{}: #wrong {} max err {:.3g}", c.name, c.wrong, c.max_abs_err));
    CHECK(c.passed);
  }
  CHECK(m.checks.size() >= 9);
  CHECK(m.correct);
  REQUIRE(m.phases.size() == 6);
  for (const auto& p : m.phases) CHECK(p.median_s > 0);
  CHECK(!m.trace.empty());
}

// Concatenate the ranks' sequence shards [1, S_l, Hx, D] (B = 1) into the full [S, Hx, D].
std::vector<float> gather_seq(const std::vector<runtime::cuda::RankReport>& reps, std::vector<std::uint16_t> runtime::RankResult::*f) {
  std::vector<float> out;
  for (const auto& r : reps)
    for (auto b : r.result.*f) out.push_back(core::bf16_to_float(b));
  return out;
}

}  // namespace

TEST_CASE("cuda run_block on one GPU is correct", "[.gpu][gpu][block]") {
  if (gputest::device_count() < 1) FAIL("no CUDA device");
  expect_correct(run(shape(1, 256, 4, 2, 64, 1), 1));
  expect_correct(run(shape(2, 128, 4, 4, 128, 1, KvStrategy::replicate, false), 1));
}

TEST_CASE("cuda run_block on two GPUs is correct", "[.gpu][gpu][block]") {
  GPUTEST_SKIP_UNLESS_DEVICES(2);
  SECTION("GQA H_kv >= P, sliced exchange") { expect_correct(run(shape(1, 512, 8, 2, 128, 2), 3)); }
  SECTION("MHA, B = 2 (pack/unpack through buffers), non-causal") {
    expect_correct(run(shape(2, 256, 4, 4, 64, 2, KvStrategy::replicate, false), 1));
  }
  SECTION("P > H_kv, replicate") { expect_correct(run(shape(1, 256, 4, 1, 64, 2, KvStrategy::replicate), 2)); }
  SECTION("P > H_kv, send_once") { expect_correct(run(shape(1, 256, 4, 1, 64, 2, KvStrategy::send_once), 1)); }
}

TEST_CASE("Ulysses on 2 GPUs equals 1 GPU on the full sequence", "[.gpu][gpu][block][sp1]") {
  GPUTEST_SKIP_UNLESS_DEVICES(2);
  for (KvStrategy kv : {KvStrategy::replicate, KvStrategy::send_once}) {
    for (std::int64_t H_kv : {2, 1}) {
      INFO("H_kv " << H_kv << (kv == KvStrategy::replicate ? " replicate" : " send_once"));
      std::vector<runtime::cuda::RankReport> r2, r1;
      const auto m2 = run(shape(1, 384, 4, H_kv, 64, 2, kv), 2, &r2);
      const auto m1 = run(shape(1, 384, 4, H_kv, 64, 1, kv), 1, &r1);
      REQUIRE(m2.correct);
      REQUIRE(m1.correct);
      using RR = runtime::RankResult;
      for (auto [f, name] : {std::pair{&RR::o_seq, "out"}, {&RR::dq_seq, "dq"}, {&RR::dk_seq, "dk"}, {&RR::dv_seq, "dv"}}) {
        const auto got = gather_seq(r2, f);
        const auto ref_f = gather_seq(r1, f);
        REQUIRE(got.size() == ref_f.size());
        const std::vector<double> ref(ref_f.begin(), ref_f.end());
        // both sides are bf16 results within kBf16AttentionTol of the same fp64 value (the CPU
        // reference's checks above), so they may differ by twice that
        const auto c = runtime::check_close(name, got.data(), ref.data(), static_cast<std::int64_t>(got.size()),
                                            2 * runtime::kBf16AttentionTol);
        INFO(fmt::format("{}: sp=2 vs sp=1 #wrong {} of {}, max err {:.3g}", name, c.wrong, got.size(), c.max_abs_err));
        CHECK(c.passed);
      }
    }
  }
}
