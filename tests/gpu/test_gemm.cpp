// The layer's projections on cuBLASLt (runtime/cuda/gemm.hpp) against fp64 products of the same bf16
// inputs: forward, input and weight gradients (also accumulating), row-major as PyTorch holds them.
// Tolerance: fp32 accumulation then one bf16 rounding: |got - want| <= 2^-8 |want| + 1e-2 sqrt(K)
// (the absolute part covers the fp32 sums of K products of unit-variance values that cancel). Gemm keeps
// one algorithm per problem, timed on its first call: its later calls give the same bits.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/bf16.hpp"
#include "runtime/cuda/gemm.hpp"
#include "tests/gpu/gpu_util.hpp"

using namespace ulysses;
using core::bf16;
using gputest::Dev;

namespace {

std::vector<bf16> random_bf16(std::size_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<bf16> v(n);
  for (auto& x : v) x = core::float_to_bf16(d(g));
  return v;
}
double f(bf16 v) { return core::bf16_to_float(v); }

// C[r, c] = sum_i A(r, i) B(i, c) with accessors
template <class FA, class FB>
std::vector<double> product(std::int64_t R, std::int64_t C, std::int64_t K, FA a, FB b) {
  std::vector<double> out(static_cast<std::size_t>(R * C));
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (std::int64_t i = 0; i < K; ++i) s += a(r, i) * b(i, c);
      out[static_cast<std::size_t>(r * C + c)] = s;
    }
  return out;
}

std::int64_t wrong(const std::vector<bf16>& got, const std::vector<double>& want, std::int64_t K) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(f(got[i]) - want[i]) <= std::fabs(want[i]) / 256 + 1e-2 * std::sqrt(double(K)))) ++n;
  return n;
}
__nv_bfloat16* b16(Dev<bf16>& d) { return reinterpret_cast<__nv_bfloat16*>(d.p); }

}  // namespace

TEST_CASE("cuBLASLt projections: forward, input and weight gradients against fp64", "[.gpu][gpu][layer]") {
  runtime::cuda::Gemm gemm;
  struct Shape {
    std::int64_t M, N, K;
  };
  for (const Shape s : {Shape{256, 384, 512}, Shape{1000, 1024, 4096}, Shape{64, 14336 / 8, 4096 / 8}}) {
    const std::int64_t M = s.M, N = s.N, K = s.K;
    const auto X = random_bf16(M * K, 1), W = random_bf16(N * K, 2), dY = random_bf16(M * N, 3);
    const auto Y_want = product(M, N, K, [&](auto r, auto i) { return f(X[r * K + i]); }, [&](auto i, auto c) { return f(W[c * K + i]); });
    const auto dX_want = product(M, K, N, [&](auto r, auto i) { return f(dY[r * N + i]); }, [&](auto i, auto c) { return f(W[i * K + c]); });
    const auto dW_want = product(N, K, M, [&](auto r, auto i) { return f(dY[i * N + r]); }, [&](auto i, auto c) { return f(X[i * K + c]); });
    Dev<bf16> dX_in(X), dW_in(W), ddY(dY), Y(M * N), dX(M * K), dW(N * K);
    gemm.forward(b16(dX_in), b16(dW_in), b16(Y), M, N, K, nullptr);
    gemm.input_grad(b16(ddY), b16(dW_in), b16(dX), M, N, K, nullptr);
    gemm.weight_grad(b16(ddY), b16(dX_in), b16(dW), M, N, K, 0.f, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    INFO("M " << M << " N " << N << " K " << K);
    CHECK(wrong(Y.download(), Y_want, K) == 0);
    CHECK(wrong(dX.download(), dX_want, N) == 0);
    CHECK(wrong(dW.download(), dW_want, M) == 0);
    // beta = 1 accumulates a second weight gradient into the first
    gemm.weight_grad(b16(ddY), b16(dX_in), b16(dW), M, N, K, 1.f, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> twice(dW_want);
    for (auto& v : twice) v *= 2;
    CHECK(wrong(dW.download(), twice, 2 * M) == 0);
  }
}

TEST_CASE("cuBLASLt projections: one algorithm kept per problem, the same bits every call", "[.gpu][gpu][layer]") {
  const std::int64_t M = 1000, N = 1024, K = 4096;
  const auto X = random_bf16(M * K, 1), W = random_bf16(N * K, 2), dY = random_bf16(M * N, 3);
  const auto Y_want = product(M, N, K, [&](auto r, auto i) { return f(X[r * K + i]); }, [&](auto i, auto c) { return f(W[c * K + i]); });
  Dev<bf16> dX_in(X), dW_in(W), ddY(dY), Y1(M * N), Y2(M * N), Y0(M * N), dW(N * K);
  runtime::cuda::Gemm tuned, untuned(false);
  tuned.forward(b16(dX_in), b16(dW_in), b16(Y1), M, N, K, nullptr);  // tunes this problem
  const auto tu = tuned.last_tuning();
  REQUIRE(!tu.median_s.empty());
  CHECK(tu.chosen < int(tu.median_s.size()));
  for (const double t : tu.median_s) CHECK(t > 0);
  tuned.forward(b16(dX_in), b16(dW_in), b16(Y2), M, N, K, nullptr);  // reuses it
  untuned.forward(b16(dX_in), b16(dW_in), b16(Y0), M, N, K, nullptr);
  CHECK(untuned.last_tuning().median_s.empty());
  CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(tuned.problems() == 1);
  const auto y1 = Y1.download(), y2 = Y2.download(), y0 = Y0.download();
  CHECK(y1 == y2);  // the first call (after its timing runs) and a later one: the same bits
  CHECK(wrong(y1, Y_want, K) == 0);
  CHECK(wrong(y0, Y_want, K) == 0);
  if (tu.chosen == 0) CHECK(y1 == y0);  // the heuristic's first kept: what the untuned path computes
  // beta = 1 is not timed (its runs would change dW): the heuristic's first algorithm, and dW ends as
  // exactly two accumulated products when the first one is in it
  tuned.weight_grad(b16(ddY), b16(dX_in), b16(dW), M, N, K, 0.f, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto once = dW.download();
  tuned.weight_grad(b16(ddY), b16(dX_in), b16(dW), M, N, K, 1.f, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(tuned.problems() == 3);
  CHECK(tuned.last_tuning().median_s.empty());
  const auto twice = dW.download();
  std::int64_t off = 0;  // bf16(once + product) is within one rounding of 2 * once
  for (std::size_t i = 0; i < once.size(); ++i) off += !(std::fabs(f(twice[i]) - 2 * f(once[i])) <= std::fabs(f(once[i])) / 64 + 0.5);
  CHECK(off == 0);
}

TEST_CASE("cuBLASLt projections: an accumulating weight gradient timed while dW is free", "[.gpu][gpu][layer]") {
  // a TiledMLP-like pass: the shards after the first accumulate; their problem is chosen by timing before the first
  // shard writes dW (the timing runs add garbage into dW, which that first write replaces)
  const std::int64_t M = 1000, N = 1024, K = 4096;
  const auto X = random_bf16(M * K, 4), dY = random_bf16(M * N, 5);
  const auto dW_want = product(N, K, M, [&](auto r, auto i) { return f(dY[i * N + r]); }, [&](auto i, auto c) { return f(X[i * K + c]); });
  Dev<bf16> dX_in(X), ddY(dY), dW(N * K);
  runtime::cuda::Gemm gemm;
  gemm.tune_accumulating_weight_grad(b16(ddY), b16(dX_in), b16(dW), M, N, K, nullptr);
  const auto tu = gemm.last_tuning();
  CHECK(gemm.problems() == 1);
  if (!tu.median_s.empty()) {  // more than one proposal: each timed, the fastest kept
    CHECK(tu.chosen < int(tu.median_s.size()));
    for (const double t : tu.median_s) CHECK(t > 0);
  }
  gemm.weight_grad(b16(ddY), b16(dX_in), b16(dW), M, N, K, 0.f, nullptr);  // the first shard
  // where the beta = 0 problem of this shape had proposals to time, the accumulating one was timed too
  if (!gemm.last_tuning().median_s.empty()) CHECK(!tu.median_s.empty());
  gemm.weight_grad(b16(ddY), b16(dX_in), b16(dW), M, N, K, 1.f, nullptr);  // a later one: the problem timed above
  CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(gemm.problems() == 2);
  CHECK(gemm.last_tuning().median_s.size() == tu.median_s.size());  // the same plan, not chosen again
  std::vector<double> twice(dW_want);
  for (auto& v : twice) v *= 2;
  CHECK(wrong(dW.download(), twice, 2 * M) == 0);
  // an untimed Gemm times nothing here either
  runtime::cuda::Gemm untuned(false);
  untuned.tune_accumulating_weight_grad(b16(ddY), b16(dX_in), b16(dW), M, N, K, nullptr);
  CHECK(untuned.last_tuning().median_s.empty());
}

TEST_CASE("cuBLASLt sustained timing: 1 ms problems timed back to back", "[.gpu][gpu][gemm]") {
  // Gemm(true, window): problems whose fastest proposal takes 1 ms or more are chosen by their mean per call over
  // about window of back-to-back runs after as long untimed; shorter ones keep the burst timing. The product is the
  // same product whichever proposal wins: 512 sampled entries against fp64.
  const double window = 0.02;
  runtime::cuda::Gemm gemm(true, window);
  const std::int64_t M = 8192, N = 8192, K = 8192;  // 1.1 TFLOP: over 1 ms on an H100 or H200
  const auto X = random_bf16(M * K, 6), W = random_bf16(N * K, 7);
  Dev<bf16> dX(X), dW(W), dY(M * N);
  gemm.forward(b16(dX), b16(dW), b16(dY), M, N, K, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto tu = gemm.last_tuning();
  if (!tu.median_s.empty()) {  // more than one proposal
    CHECK(tu.sustained);
    CHECK(tu.median_s[static_cast<std::size_t>(tu.chosen)] >= runtime::cuda::Gemm::kSustainedMinRunS);
    for (const double t : tu.median_s) CHECK(tu.median_s[static_cast<std::size_t>(tu.chosen)] <= t);  // the fastest kept
  }
  const auto Y = dY.download();
  std::mt19937 g(8);
  std::int64_t bad = 0;
  for (int i = 0; i < 512; ++i) {
    const std::int64_t r = g() % M, c = g() % N;
    double want = 0;
    for (std::int64_t k = 0; k < K; ++k) want += f(X[r * K + k]) * f(W[c * K + k]);
    if (!(std::fabs(f(Y[r * N + c]) - want) <= std::fabs(want) / 256 + 1e-2 * std::sqrt(double(K)))) ++bad;
  }
  CHECK(bad == 0);
  // a short problem keeps the burst timing
  const auto xs = random_bf16(256 * 512, 9), ws = random_bf16(384 * 512, 10);
  Dev<bf16> sx(xs), sw(ws), sy(256 * 384);
  gemm.forward(b16(sx), b16(sw), b16(sy), 256, 384, 512, nullptr);
  CHECK_FALSE(gemm.last_tuning().sustained);
  // the variable: milliseconds in 0..10000, else one InputError line naming it
  setenv("ULYSSES_GEMM_TUNE_WINDOW_MS", "50", 1);
  CHECK(runtime::cuda::Gemm::sustained_window_from_env() == Approx(0.05));
  setenv("ULYSSES_GEMM_TUNE_WINDOW_MS", "fast", 1);
  CHECK_THROWS_WITH(runtime::cuda::Gemm::sustained_window_from_env(), Catch::Contains("ULYSSES_GEMM_TUNE_WINDOW_MS"));
  unsetenv("ULYSSES_GEMM_TUNE_WINDOW_MS");
  CHECK(runtime::cuda::Gemm::sustained_window_from_env() == 0);
}
