// The layer's projections on cuBLASLt (runtime/cuda/gemm.hpp) against fp64 products of the same bf16
// inputs: forward, input and weight gradients (also accumulating), row-major as PyTorch holds them.
// Tolerance: fp32 accumulation then one bf16 rounding: |got - want| <= 2^-8 |want| + 1e-2 sqrt(K)
// (the absolute part covers the fp32 sums of K products of unit-variance values that cancel).
#include <catch2/catch.hpp>

#include <cmath>
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
