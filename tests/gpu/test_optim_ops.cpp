// The optimizer step's kernels alone (kernels/optim_ops.hpp), on the paths the step never takes: the gradient
// norm's partial sums over tensors whose length is no multiple of 8 or that start off 16-byte alignment (one
// element at a time), next to the 16-byte path, against an fp64 sum of squares (fp32 partial sums: 1e-5 of it)
// and bit for bit on a second run; AdamW's one-at-a-time path (n % 4 != 0) against its 4-wide path (the same
// arithmetic: equal bits) and against fp64 AdamW (runtime/reference_adam.hpp; the step test's tolerance).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/bf16.hpp"
#include "kernels/optim_ops.hpp"
#include "runtime/reference_adam.hpp"
#include "tests/gpu/gpu_util.hpp"

using namespace ulysses;
using core::bf16;
using gputest::Dev;

namespace {

template <class G>
G to_g(float x) {
  if constexpr (sizeof(G) == 2) return core::float_to_bf16(x);
  else return x;
}
template <class G>
double from_g(G x) {
  if constexpr (sizeof(G) == 2) return core::bf16_to_float(x);
  else return x;
}

cudaError_t sq_partials(const bf16* g, std::int64_t n, float* part) {
  return kernels::grad_sq_partials(reinterpret_cast<const __nv_bfloat16*>(g), n, part, nullptr);
}
cudaError_t sq_partials(const float* g, std::int64_t n, float* part) { return kernels::grad_sq_partials(g, n, part, nullptr); }

template <class G>
void check_partials(std::int64_t n, std::int64_t offset) {
  INFO("n " << n << ", offset " << offset << ", " << sizeof(G) << "-byte gradients");
  std::mt19937 gen(static_cast<std::uint32_t>(n + offset));
  std::normal_distribution<float> d(0.f, 1e-2f);
  std::vector<G> g(static_cast<std::size_t>(n + offset));
  for (auto& x : g) x = to_g<G>(d(gen));
  double want = 0;
  for (std::int64_t i = offset; i < offset + n; ++i) want += from_g(g[i]) * from_g(g[i]);
  Dev<G> d_g(g);
  Dev<float> part(kernels::kNormBlocks);
  part.fill_bytes(0xff);
  REQUIRE(sq_partials(d_g.p + offset, n, part.p) == cudaSuccess);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto first = part.download();
  double got = 0;
  for (float x : first) got += x;
  CHECK(std::abs(got - want) <= 1e-5 * want);
  std::int64_t nonzero = 0;
  for (float x : first) nonzero += x != 0.f;
  if (n <= 1024) CHECK(nonzero <= 1);  // one block's threads cover it; every other partial is 0
  part.fill_bytes(0xff);
  REQUIRE(sq_partials(d_g.p + offset, n, part.p) == cudaSuccess);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto second = part.download();
  CHECK(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0);
}

// One AdamW step t = 1 of n elements (coefficient 0.5 from the device), as the kernel returns it.
struct AdamOut {
  std::vector<float> master, m, v;
  std::vector<bf16> param;
};
AdamOut adam_once(const std::vector<float>& master0, const std::vector<bf16>& grad, std::int64_t n, const kernels::AdamStep& hp) {
  Dev<float> master(std::vector<float>(master0.begin(), master0.begin() + n)), m(n), v(n), coef(std::vector<float>{0.5f});
  Dev<bf16> g(std::vector<bf16>(grad.begin(), grad.begin() + n)), param(n);
  m.fill_bytes(0), v.fill_bytes(0);
  REQUIRE(kernels::adamw_step(reinterpret_cast<__nv_bfloat16*>(param.p), master.p, m.p, v.p,
                              reinterpret_cast<const __nv_bfloat16*>(g.p), n, hp, coef.p, nullptr) == cudaSuccess);
  CUDA_CHECK(cudaDeviceSynchronize());
  return {master.download(), m.download(), v.download(), param.download()};
}

}  // namespace

TEST_CASE("optimizer kernels: the gradient norm's partial sums on both paths against fp64", "[.gpu][gpu][optim]") {
  for (std::int64_t offset : {0, 1})        // 1: off 16-byte alignment, one element at a time
    for (std::int64_t n : {1000003, 4096, 5}) {  // 1000003: 16-byte words and a tail of 3
      check_partials<bf16>(n, offset);
      check_partials<float>(n, offset);
    }
}

TEST_CASE("optimizer kernels: AdamW one element at a time equals its 4-wide path and fp64 AdamW", "[.gpu][gpu][optim]") {
  const std::int64_t n4 = 4096, n1 = 4099;  // n1 % 4 != 0: the one-at-a-time path
  std::mt19937 gen(3);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> master0(n1);
  std::vector<bf16> grad(n1);
  for (auto& x : master0) x = d(gen);
  for (auto& x : grad) x = core::float_to_bf16(1e-2f * d(gen));
  runtime::AdamConfig cfg;
  cfg.lr = 1e-3, cfg.weight_decay = 0.01;
  for (double* x : {&cfg.lr, &cfg.beta1, &cfg.beta2, &cfg.eps, &cfg.weight_decay}) *x = double(float(*x));
  const kernels::AdamStep hp{float(cfg.lr), float(cfg.beta1), float(cfg.beta2), float(cfg.eps), float(cfg.weight_decay),
                             1.f - float(cfg.beta1), 1.f - float(cfg.beta2)};
  const AdamOut wide = adam_once(master0, grad, n4, hp), one = adam_once(master0, grad, n1, hp);
  CHECK(std::memcmp(wide.master.data(), one.master.data(), n4 * sizeof(float)) == 0);
  CHECK(std::memcmp(wide.m.data(), one.m.data(), n4 * sizeof(float)) == 0);
  CHECK(std::memcmp(wide.v.data(), one.v.data(), n4 * sizeof(float)) == 0);
  CHECK(std::memcmp(wide.param.data(), one.param.data(), n4 * sizeof(bf16)) == 0);
  runtime::AdamState ref = runtime::adam_state_from(std::vector<double>(master0.begin(), master0.end()));
  std::vector<double> g(n1);
  for (std::int64_t i = 0; i < n1; ++i) g[i] = core::bf16_to_float(grad[i]);
  runtime::adamw_reference(ref, g, double(0.5f), 1, cfg);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n1; ++i) {
    bad += !(std::abs(one.master[i] - ref.master[i]) <= 1e-6 * std::abs(ref.master[i]) + 1e-4 * cfg.lr);
    bad += one.param[i] != core::float_to_bf16(one.master[i]);
  }
  CHECK(bad == 0);
}
